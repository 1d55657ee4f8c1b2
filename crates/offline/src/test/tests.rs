//! `sartor test` on suite files, as the binary runs it in a directory: the
//! report on `out`, the problems with suites on `err`, and how it ends.

use std::path::Path;

use super::{TestArgs, run};
use crate::Exit;
use crate::testing::{
    MUTATED_POD, POD, PULL, Ran, namespace_less, parse, repo_root, run_in, scratch,
};

/// `sartor test ARGS` run in `dir`.
pub(crate) fn run_test(dir: &Path, args: &[&str]) -> Ran {
    let mut args: TestArgs = parse(args);
    for path in &mut args.paths {
        *path = dir.join(&*path);
    }
    run_in(dir, "", |io| run(&args, io))
}

#[test]
fn the_examples_own_test_suite_passes() {
    let root = repo_root();
    let Ran { exit, out, err } = run_test(&root, &["examples"]);
    assert_eq!((exit, err.as_str()), (Exit::Ok, ""));
    assert!(out.ends_with("11 passed, 0 failed\n"), "{out}");
    assert_eq!(
        out.matches("PASS examples/tests/prod-shop.sartor-test.yaml: ")
            .count(),
        8
    );
    assert_eq!(
        out.matches("PASS examples/external-data/images.sartor-test.yaml: ")
            .count(),
        3
    );
}

#[test]
fn a_broken_suite_fails_with_a_diff() {
    let suite = "mutators: [pull.yaml]
cases:
- name: right
  input: pod.yaml
  expected: expected.yaml
- name: wrong
  input: pod.yaml
  expected: pod.yaml
- name: error expected but none
  input: pod.yaml
  expectedError: boom
";
    let dir = scratch(
        "suite",
        &[
            ("t/a.sartor-test.yaml", suite),
            ("t/pull.yaml", PULL),
            ("t/pod.yaml", POD),
            ("t/expected.yaml", MUTATED_POD),
        ],
    );
    let Ran { exit, out, err } = run_test(&dir, &["t"]);
    assert_eq!((exit, err.as_str()), (Exit::MutationFailed, ""));
    assert_eq!(
        out,
        "PASS t/a.sartor-test.yaml: right
FAIL t/a.sartor-test.yaml: wrong
    --- expected #1
    +++ got #1
    @@ -6,4 +6,5 @@
     spec:
       containers:
       - image: nginx
    +    imagePullPolicy: Always
         name: app
FAIL t/a.sartor-test.yaml: error expected but none
    expected an error containing \"boom\", but the mutation succeeded
1 passed, 2 failed
"
    );
    // A suite that does not parse is invalid input.
    std::fs::write(
        dir.join("t/b.sartor-test.yaml"),
        "mutators: [pull.yaml]\ncase: []\n",
    )
    .unwrap();
    let Ran { exit, err, .. } = run_test(&dir, &["t/b.sartor-test.yaml"]);
    assert_eq!(exit, Exit::InvalidInput);
    assert!(
        err.starts_with("error: t/b.sartor-test.yaml: invalid suite: unknown field `case`"),
        "{err}"
    );
}

#[test]
fn run_selects_cases_by_name() {
    let root = repo_root();
    let Ran { exit, out, err } = run_test(&root, &["examples", "--run", "host port"]);
    assert_eq!((exit, err.as_str()), (Exit::Ok, ""));
    assert_eq!(
        out,
        "PASS examples/tests/prod-shop.sartor-test.yaml: the mesh's proxy keeps a writable root filesystem, and no container binds a host port\n1 passed, 0 failed\n"
    );
    let Ran { exit, out, err } = run_test(&root, &["examples", "--run", "no such case"]);
    assert_eq!(
        (exit, out.as_str(), err.as_str()),
        (
            Exit::InvalidInput,
            "",
            "error: no case name contains \"no such case\"\n"
        )
    );
}

#[test]
fn a_malformed_suite_is_named_with_its_line() {
    let dir = scratch(
        "malformed",
        &[(
            "suites/bad.sartor-test.yaml",
            "mutators: [x]\ncases:\n- name: a\n  inptu: {}\n",
        )],
    );
    let path = "suites";
    let Ran { exit, out, err } = run_test(&dir, &[path]);
    assert_eq!(
        (exit, out.as_str(), err),
        (
            Exit::InvalidInput,
            "0 passed, 0 failed, 1 suite invalid\n",
            format!(
                "error: {path}/bad.sartor-test.yaml: invalid suite: cases[0]: unknown field `inptu`, expected one of `name`, `operation`, `namespace`, `input`, `expected`, `expectedError`, `expand`, `username`, `providers` at line 4 column 3\n"
            )
        )
    );
}

/// `text` with every `time="..."` value replaced by `T` (times vary).
fn without_times(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("time=\"") {
        out.push_str(&rest[..start + 6]);
        rest = &rest[start + 6..];
        let end = rest.find('"').unwrap();
        out.push('T');
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[test]
fn test_reports_junit_and_json_for_ci() {
    let dir = scratch(
        "junit",
        &[
            (
                "m.yaml",
                "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {name: pull}\n\
                 spec:\n  applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}]\n  \
                 location: 'spec.containers[name: *].imagePullPolicy'\n  \
                 parameters: {assign: {value: Always}}\n",
            ),
            (
                "t.sartor-test.yaml",
                "mutators: [m.yaml]\ncases:\n\
                 - name: pulls always\n  \
                   input: {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: a}]}}\n  \
                   expected: {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: a, imagePullPolicy: Always}]}}\n\
                 - name: a wrong expectation\n  \
                   input: {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: a}]}}\n  \
                   expected: {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: a}]}}\n",
            ),
        ],
    );
    let Ran { exit, out, err } = run_test(&dir, &[".", "--format", "junit"]);
    assert_eq!((exit, err.as_str()), (Exit::MutationFailed, ""));
    assert_eq!(
        without_times(&out),
        r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="sartor test" tests="2" failures="1" errors="0" time="T">
  <testsuite name="./t.sartor-test.yaml" tests="2" failures="1" errors="0" skipped="0" time="T">
    <testcase name="pulls always" classname="./t.sartor-test.yaml" time="T"/>
    <testcase name="a wrong expectation" classname="./t.sartor-test.yaml" time="T">
      <failure message="--- expected #1" type="mismatch">--- expected #1
+++ got #1
@@ -4,4 +4,5 @@
   name: p
 spec:
   containers:
-  - name: a
+  - imagePullPolicy: Always
+    name: a
</failure>
    </testcase>
  </testsuite>
</testsuites>
"#
    );
    let Ran { exit, out, .. } = run_test(&dir, &[".", "--format", "json", "--run", "pulls"]);
    assert_eq!(exit, Exit::Ok);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["passed"], 1);
    assert_eq!(report["failed"], 0);
    assert_eq!(report["suites"][0]["cases"][0]["name"], "pulls always");
    assert_eq!(report["suites"][0]["cases"][0]["outcome"], "passed");
}

#[test]
fn test_suites_take_the_namespace_of_namespace_less_inputs() {
    let mutators = std::fs::read_to_string(namespace_less("mutators.yaml")).unwrap();
    let pod = std::fs::read_to_string(namespace_less("pod.yaml")).unwrap();
    let suite = "mutators: [mutators.yaml]
namespace: kube-system
cases:
- name: in the suite's namespace, neither pulled nor labelled
  input: pod.yaml
  expected:
    apiVersion: v1
    kind: Pod
    metadata: {name: web}
    spec:
      containers:
      - {name: app, image: nginx:1.27}
      - {name: log-shipper, image: fluent/fluent-bit:3.0, args: [--config=/fluent-bit/etc/fluent-bit.conf]}
- name: in the case's namespace, labelled
  namespace: default
  input: pod.yaml
  expected:
    apiVersion: v1
    kind: Pod
    metadata: {name: web, labels: {team: platform}}
    spec:
      containers:
      - {name: app, image: nginx:1.27, imagePullPolicy: Always}
      - {name: log-shipper, image: fluent/fluent-bit:3.0, imagePullPolicy: Always, args: [--config=/fluent-bit/etc/fluent-bit.conf]}
";
    let dir = scratch(
        "suite-namespace",
        &[
            ("mutators.yaml", mutators.as_str()),
            ("pod.yaml", pod.as_str()),
            ("s.sartor-test.yaml", suite),
        ],
    );
    let Ran { exit, out, err } = run_test(&dir, &["s.sartor-test.yaml"]);
    assert_eq!(
        (exit, out.as_str(), err.as_str()),
        (
            Exit::Ok,
            "PASS s.sartor-test.yaml: in the suite's namespace, neither pulled nor labelled\nPASS s.sartor-test.yaml: in the case's namespace, labelled\n2 passed, 0 failed\n",
            ""
        )
    );
}

#[test]
fn inline_objects_may_be_a_list_and_inline_namespaces_serve_selectors() {
    let suite = "mutators: [mutators]
namespaces:
- {apiVersion: v1, kind: Namespace, metadata: {name: shop, labels: {env: prod}}}
cases:
- name: two Pods inline, labelled from the inline Namespace
  input:
  - {apiVersion: v1, kind: Pod, metadata: {name: a, namespace: shop}}
  - {apiVersion: v1, kind: Pod, metadata: {name: b, namespace: shop}}
  expected:
  - {apiVersion: v1, kind: Pod, metadata: {name: a, namespace: shop, labels: {tier: gold}}}
  - {apiVersion: v1, kind: Pod, metadata: {name: b, namespace: shop, labels: {tier: gold}}}
";
    let dir = scratch(
        "suite-inline",
        &[
            ("mutators/tier.yaml", crate::testing::PROD_ONLY),
            ("s.sartor-test.yaml", suite),
            (
                "bad.sartor-test.yaml",
                &suite.replace("kind: Namespace", "kind: ConfigMap"),
            ),
        ],
    );
    let Ran { exit, out, err } = run_test(&dir, &["s.sartor-test.yaml"]);
    assert_eq!(
        (exit, out.as_str(), err.as_str()),
        (
            Exit::Ok,
            "PASS s.sartor-test.yaml: two Pods inline, labelled from the inline Namespace\n1 passed, 0 failed\n",
            ""
        )
    );
    // Inline, anything but a Namespace is a mistake.
    let Ran { exit, err, .. } = run_test(&dir, &["bad.sartor-test.yaml"]);
    assert_eq!(
        (exit, err.as_str()),
        (
            Exit::InvalidInput,
            "error: bad.sartor-test.yaml: namespaces: inline: document 1: not a v1 Namespace\n"
        )
    );
}
