#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]
//! `sartor` end to end: the built binary, real files, exit codes.

use std::io::Write as _;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A test's scratch directory, removed when the test ends (they used to
/// pile up in the temporary directory, one set per run).
struct Scratch(tempfile::TempDir);

impl Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        self.0.path()
    }
}

/// A scratch directory holding `files`.
fn scratch(test: &str, files: &[(&str, &str)]) -> Scratch {
    let dir = tempfile::Builder::new()
        .prefix(&format!("sartor-cli-{test}-"))
        .tempdir()
        .unwrap();
    for (name, text) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    Scratch(dir)
}

/// Runs `sartor` in `dir`; (exit code, stdout, stderr).
fn sartor(dir: &Path, args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sartor"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// A file of `tests/fixtures`, as an absolute path.
fn fixture(name: &str) -> String {
    let dir = sartor_tests::manifest_dir(env!("CARGO_MANIFEST_DIR"));
    dir.join("tests/fixtures").join(name).display().to_string()
}

/// On CREATE only: on UPDATE too, lint would warn (breaks-update).
const PULL: &str = "apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: pull}
spec:
  applyTo: [{groups: [''], versions: [v1], kinds: [Pod], operations: [CREATE]}]
  location: 'spec.containers[name: *].imagePullPolicy'
  parameters: {assign: {value: Always}}
";

/// PULL for every operation: what expansion generates is admitted by no
/// operation, which only such a mutator matches (as in Gatekeeper).
fn pull_every_operation() -> String {
    PULL.replace(", operations: [CREATE]", "")
}

const PROD_ONLY: &str = "apiVersion: mutations.sartor.dev/v1
kind: AssignMetadata
metadata: {name: tier}
spec:
  match: {namespaceSelector: {matchLabels: {env: prod}}}
  location: metadata.labels.tier
  parameters: {assign: {value: gold}}
";

const POD: &str = "apiVersion: v1
kind: Pod
metadata: {name: web, namespace: shop}
spec:
  containers: [{name: app, image: nginx}]
";

const MUTATED_POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: shop
spec:
  containers:
  - image: nginx
    imagePullPolicy: Always
    name: app
";

#[test]
fn mutates_files_and_directories_in_input_order() {
    let dir = scratch(
        "order",
        &[
            ("mutators/pull.yaml", PULL),
            ("objects/a.yaml", POD),
            ("objects/b/c.yaml", &POD.replace("web", "api")),
        ],
    );
    let (code, stdout, stderr) = sartor(&dir, &["mutate", "--mutators", "mutators", "objects"], "");
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert_eq!(
        stdout,
        format!("{MUTATED_POD}---\n{}", MUTATED_POD.replace("web", "api"))
    );
}

#[test]
fn reads_stdin_and_prints_json() {
    let dir = scratch("json", &[("pull.yaml", PULL)]);
    let (code, stdout, _) = sartor(&dir, &["mutate", "-m", "pull.yaml", "-o", "json"], POD);
    assert_eq!(code, 0);
    let one: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(one["spec"]["containers"][0]["imagePullPolicy"], "Always");
    assert_eq!(one["kind"], "Pod");
    // Several objects: a v1 List.
    let two = format!("{POD}---\n{POD}");
    let (code, stdout, _) = sartor(
        &dir,
        &["mutate", "-m", "pull.yaml", "-o", "json", "-"],
        &two,
    );
    assert_eq!(code, 0);
    let list: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(list["kind"], "List");
    assert_eq!(list["apiVersion"], "v1");
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
}

#[test]
fn invalid_mutators_exit_2_naming_file_document_and_field() {
    let broken = PULL.replace(
        "'spec.containers[name: *].imagePullPolicy'",
        "'spec.containers[name: *'",
    );
    let dir = scratch("invalid", &[("pull.yaml", &broken), ("pod.yaml", POD)]);
    let (code, stdout, stderr) = sartor(&dir, &["mutate", "-m", "pull.yaml", "pod.yaml"], "");
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert_eq!(
        stderr,
        "error: pull.yaml: document 1: Assign pull: spec.location: invalid location \"spec.containers[name: *\": expected ']' at 23, found end of location\n  spec.containers[name: *\n                         ^\n"
    );
    let (code, _, stderr) = sartor(&dir, &["mutate", "-m", "missing.yaml", "pod.yaml"], "");
    assert_eq!(code, 2);
    assert!(
        stderr.starts_with("error: missing.yaml: cannot read: "),
        "{stderr}"
    );
}

#[test]
fn audit_refuses_invalid_mutator_files_before_reaching_a_cluster() {
    let broken = PULL.replace(
        "'spec.containers[name: *].imagePullPolicy'",
        "'spec.containers[name: *'",
    );
    let dir = scratch("audit-invalid", &[("pull.yaml", &broken)]);
    let (code, stdout, stderr) = sartor(&dir, &["audit", "-m", "pull.yaml"], "");
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert_eq!(
        stderr,
        "error: pull.yaml: document 1: Assign pull: spec.location: invalid location \"spec.containers[name: *\": expected ']' at 23, found end of location\n  spec.containers[name: *\n                         ^\n"
    );
}

#[test]
fn schema_conflicts_exit_2() {
    let set = "apiVersion: mutations.sartor.dev/v1
kind: ModifySet
metadata: {name: containers}
spec:
  applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}]
  location: spec.containers
  parameters: {values: {fromList: [x]}}
";
    let dir = scratch(
        "conflict",
        &[("m.yaml", &format!("{PULL}---\n{set}")), ("pod.yaml", POD)],
    );
    let (code, stdout, stderr) = sartor(&dir, &["mutate", "-m", "m.yaml", "pod.yaml"], "");
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert_eq!(
        stderr,
        "error: m.yaml: document 1: Assign pull: conflicts with ModifySet containers about spec.containers: this mutator treats it as a list keyed by name, ModifySet containers as a list of values (v1 Pod CREATE)\n\
         error: m.yaml: document 2: ModifySet containers: conflicts with Assign pull about spec.containers: this mutator treats it as a list of values, Assign pull as a list keyed by name (v1 Pod CREATE)\n"
    );
}

#[test]
fn namespace_selectors_need_the_namespace_and_say_how_to_pass_it() {
    let namespace =
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {env: prod}}\n";
    let dir = scratch(
        "namespaces",
        &[
            ("tier.yaml", PROD_ONLY),
            ("pod.yaml", POD),
            ("ns.yaml", namespace),
        ],
    );
    let (code, stdout, stderr) = sartor(&dir, &["mutate", "-m", "tier.yaml", "pod.yaml"], "");
    assert_eq!((code, stdout.as_str()), (1, ""));
    assert_eq!(
        stderr,
        "error: pod.yaml: document 1: v1 Pod shop/web: AssignMetadata tier: its namespaceSelector needs the labels of Namespace \"shop\", which was not provided; pass the Namespace object with --namespaces\n"
    );
    let (code, stdout, stderr) = sartor(
        &dir,
        &[
            "mutate",
            "-m",
            "tier.yaml",
            "--namespaces",
            "ns.yaml",
            "pod.yaml",
        ],
        "",
    );
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert!(stdout.contains("labels:\n    tier: gold\n"), "{stdout}");
    // A Namespace among the inputs counts too.
    let (code, stdout, _) = sartor(
        &dir,
        &["mutate", "-m", "tier.yaml", "ns.yaml", "pod.yaml"],
        "",
    );
    assert_eq!(code, 0);
    assert_eq!(stdout.matches("tier: gold").count(), 2);
}

#[test]
fn update_applies_only_update_mutators() {
    let dir = scratch("update", &[("m.yaml", PULL), ("pod.yaml", POD)]);
    let (code, stdout, _) = sartor(
        &dir,
        &[
            "mutate",
            "-m",
            "m.yaml",
            "--operation",
            "UPDATE",
            "pod.yaml",
        ],
        "",
    );
    assert_eq!(code, 0);
    assert!(!stdout.contains("imagePullPolicy"), "{stdout}");
}

#[test]
fn lint_lists_every_problem_and_exits_2() {
    let broken_location = PULL.replace("name: pull", "name: broken").replace(
        "'spec.containers[name: *].imagePullPolicy'",
        "'metadata.labels.x'",
    );
    let not_a_mutator = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n";
    let dir = scratch(
        "lint",
        &[
            ("m/a.yaml", &format!("{PULL}---\n{broken_location}")),
            ("m/b.yaml", not_a_mutator),
        ],
    );
    let (code, stdout, stderr) = sartor(&dir, &["lint", "-m", "m"], "");
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert_eq!(
        stderr,
        "error: m/b.yaml: document 1: ConfigMap c: ConfigMap (v1) is not a mutator: expected Assign, AssignImage, AssignMetadata or ModifySet in mutations.sartor.dev/v1 or mutations.gatekeeper.sh/v1, v1beta1, v1alpha1\n\
         error: m/a.yaml: document 2: Assign broken: spec.location: Assign cannot change metadata; use AssignMetadata for labels and annotations\n"
    );
    let (code, stdout, _) = sartor(&dir, &["lint", "-m", "m", "-o", "json"], "");
    assert_eq!(code, 2);
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        report,
        serde_json::json!({
            "mutators": 1,
            "skipped": 0,
            "errors": 2,
            "warnings": 0,
            "findings": [
                {"category": "load", "severity": "error", "file": "m/b.yaml", "document": 1, "item": null, "subject": "ConfigMap c",
                 "message": "ConfigMap (v1) is not a mutator: expected Assign, AssignImage, AssignMetadata or ModifySet in mutations.sartor.dev/v1 or mutations.gatekeeper.sh/v1, v1beta1, v1alpha1"},
                {"category": "compile", "severity": "error", "file": "m/a.yaml", "document": 2, "item": null, "subject": "Assign broken",
                 "message": "spec.location: Assign cannot change metadata; use AssignMetadata for labels and annotations"},
            ],
        })
    );
}

#[test]
fn lint_reports_a_condition_reading_what_another_mutator_writes() {
    let gold_priority = "apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata: {name: gold-priority}
spec:
  applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}]
  location: spec.priorityClassName
  parameters:
    assign: {value: gold}
    conditions: [{path: metadata.labels.tier, operator: In, values: [gold]}]
";
    let dir = scratch(
        "lint-condition",
        &[("m.yaml", &format!("{PROD_ONLY}---\n{gold_priority}"))],
    );
    let (code, stdout, stderr) = sartor(&dir, &["lint", "-m", "m.yaml"], "");
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert_eq!(
        stderr,
        "error: m.yaml: document 2: Assign gold-priority: its condition on metadata.labels.tier reads what AssignMetadata tier writes (metadata.labels.tier) (v1 Pod CREATE and 1 more)\n"
    );
    let (code, stdout, _) = sartor(&dir, &["lint", "-m", "m.yaml", "-o", "json"], "");
    assert_eq!(code, 2);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&stdout).unwrap(),
        serde_json::json!({
            "mutators": 2,
            "skipped": 0,
            "errors": 1,
            "warnings": 0,
            "findings": [
                {"category": "conflict", "severity": "error", "file": "m.yaml", "document": 2, "item": null, "subject": "Assign gold-priority",
                 "message": "its condition on metadata.labels.tier reads what AssignMetadata tier writes (metadata.labels.tier) (v1 Pod CREATE and 1 more)"},
            ],
        })
    );
}

#[test]
fn lint_passes_a_clean_set() {
    let dir = scratch(
        "lint-clean",
        &[("m.yaml", &format!("{PULL}---\n{PROD_ONLY}"))],
    );
    let (code, stdout, stderr) = sartor(&dir, &["lint", "-m", "m.yaml"], "");
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (0, "", "2 mutators, no problems\n")
    );
    let (code, stdout, _) = sartor(&dir, &["lint", "-m", "m.yaml", "-o", "json"], "");
    assert_eq!(code, 0);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&stdout).unwrap(),
        serde_json::json!({"mutators": 2, "skipped": 0, "errors": 0, "warnings": 0, "findings": []})
    );
}

#[test]
fn crds_prints_or_writes_the_checked_in_crds() {
    let root = repo_root().join("crds");
    let files = [
        "assign.yaml",
        "assignimage.yaml",
        "assignmetadata.yaml",
        "modifyset.yaml",
    ];
    let checked_in: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(root.join(f)).unwrap())
        .collect();
    let dir = scratch("crds", &[]);
    std::fs::create_dir_all(&dir).unwrap();
    let (code, stdout, _) = sartor(&dir, &["crds"], "");
    assert_eq!(code, 0);
    assert_eq!(stdout, checked_in.join("---\n"));
    let (code, stdout, _) = sartor(&dir, &["crds", "--out", "out/crds"], "");
    assert_eq!((code, stdout.as_str()), (0, ""));
    for (file, want) in files.iter().zip(&checked_in) {
        assert_eq!(
            &std::fs::read_to_string(dir.join("out/crds").join(file)).unwrap(),
            want
        );
    }
}

#[test]
fn explain_says_which_mutator_changed_what_in_which_pass() {
    let sidecar = "apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata: {name: sidecar}
spec:
  applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}]
  location: 'spec.containers[name: proxy]'
  parameters:
    assign: {value: {name: proxy, image: envoy}}
    pathTests: [{subPath: 'spec.containers[name: proxy]', condition: MustNotExist}]
";
    let config_map = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: shop}\n";
    let dir = scratch(
        "explain",
        &[
            ("m.yaml", &format!("{PULL}---\n{sidecar}")),
            ("o.yaml", &format!("{POD}---\n{config_map}")),
        ],
    );
    let (code, stdout, stderr) =
        sartor(&dir, &["mutate", "-m", "m.yaml", "--explain", "o.yaml"], "");
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert_eq!(
        stdout,
        "o.yaml: document 1 (v1 Pod shop/web):
  pass 1  Assign pull  spec.containers[name: app].imagePullPolicy
  pass 1  Assign sidecar  spec.containers[name: proxy]
  pass 2  Assign pull  spec.containers[name: proxy].imagePullPolicy
o.yaml: document 2 (v1 ConfigMap shop/c):
  no changes
"
    );
}

#[test]
fn objects_sartor_never_mutates_are_printed_unchanged_and_explained() {
    // A Gatekeeper constraint, a webhook configuration and a future group of
    // sartor's are left as they are; Gatekeeper's SyncSet is not on its
    // webhook's list and, like the ConfigMap, is labelled.
    let objects = "apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sRequiredLabels
metadata: {name: must-have-owner}
spec:
  parameters:
    labels: [{key: owner}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: policy}
webhooks: []
---
apiVersion: reports.sartor.dev/v1alpha1
kind: Report
metadata: {name: weekly}
---
apiVersion: syncset.gatekeeper.sh/v1alpha1
kind: SyncSet
metadata: {name: pods}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: shop}
data: {mode: fast}
";
    let dir = scratch("protected", &[("o.yaml", objects)]);
    let mutator = fixture("label-everything.yaml");
    let (code, stdout, stderr) = sartor(&dir, &["mutate", "-m", &mutator, "o.yaml"], "");
    // SyncSet is mutated: no CRD says it is cluster-scoped, and none is needed
    // here (the mutator has no namespace criteria), but sartor says so.
    assert_eq!(
        (code, stderr.as_str()),
        (
            0,
            "warning: o.yaml: document 4: the scope of kind SyncSet.syncset.gatekeeper.sh is unknown (not built in, no CRD among the inputs, not in --api-resources): objects of it without metadata.namespace are mutated as cluster-scoped\n"
        )
    );
    assert_eq!(
        stdout,
        r#"apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sRequiredLabels
metadata:
  name: must-have-owner
spec:
  parameters:
    labels:
    - key: owner
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: policy
webhooks: []
---
apiVersion: reports.sartor.dev/v1alpha1
kind: Report
metadata:
  name: weekly
---
apiVersion: syncset.gatekeeper.sh/v1alpha1
kind: SyncSet
metadata:
  labels:
    mutated: "yes"
  name: pods
---
apiVersion: v1
data:
  mode: fast
kind: ConfigMap
metadata:
  labels:
    mutated: "yes"
  name: settings
  namespace: shop
"#
    );
    let (code, stdout, stderr) =
        sartor(&dir, &["mutate", "-m", &mutator, "--explain", "o.yaml"], "");
    assert_eq!(code, 0);
    assert!(stderr.starts_with("warning: o.yaml: document 4: the scope of kind SyncSet"));
    assert_eq!(
        stdout,
        "o.yaml: document 1 (constraints.gatekeeper.sh/v1beta1 K8sRequiredLabels must-have-owner):
  not mutated: sartor never mutates Gatekeeper's policy objects, as Gatekeeper's webhook does not
o.yaml: document 2 (admissionregistration.k8s.io/v1 ValidatingWebhookConfiguration policy):
  not mutated: the API server never sends admission configuration to admission webhooks
o.yaml: document 3 (reports.sartor.dev/v1alpha1 Report weekly):
  not mutated: sartor never mutates its own API (*.sartor.dev)
o.yaml: document 4 (syncset.gatekeeper.sh/v1alpha1 SyncSet pods):
  mutated cluster-scoped (assumed: kind of unknown scope without metadata.namespace; give its CRD or --api-resources)
  pass 1  AssignMetadata label-everything  metadata.labels.mutated
o.yaml: document 5 (v1 ConfigMap shop/settings):
  pass 1  AssignMetadata label-everything  metadata.labels.mutated
"
    );
}

#[test]
fn diff_shows_what_changed_per_object() {
    let dir = scratch("diff", &[("pull.yaml", PULL), ("pod.yaml", POD)]);
    let (code, stdout, stderr) = sartor(
        &dir,
        &["mutate", "-m", "pull.yaml", "--diff", "pod.yaml"],
        "",
    );
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert_eq!(
        stdout,
        "--- pod.yaml: document 1
+++ pod.yaml: document 1 (mutated)
@@ -6,4 +6,5 @@
 spec:
   containers:
   - image: nginx
+    imagePullPolicy: Always
     name: app
"
    );
    // Nothing changed: nothing printed.
    let (code, stdout, _) = sartor(
        &dir,
        &["mutate", "-m", "pull.yaml", "--diff", "-"],
        "apiVersion: v1\nkind: Secret\n",
    );
    assert_eq!((code, stdout.as_str()), (0, ""));
}

/// The repository root.
fn repo_root() -> PathBuf {
    sartor_tests::workspace_root()
}

#[test]
fn the_readme_shows_what_the_examples_print() {
    let root = repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let quick_start = readme.split("## Quick start").nth(1).unwrap();
    let shown = quick_start
        .split("```text\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .unwrap();
    let (code, stdout, stderr) = sartor(
        &root,
        &[
            "mutate",
            "--mutators",
            "examples/mutators",
            "examples/objects",
        ],
        "",
    );
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert_eq!(stdout, shown);
    // The examples' Pod mutators follow lint's breaks-update advice (CREATE
    // only): the set lints clean.
    let (code, _, stderr) = sartor(&root, &["lint", "--mutators", "examples/mutators"], "");
    assert_eq!((code, stderr.as_str()), (0, "10 mutators, no problems\n"));
}

#[test]
fn the_examples_own_test_suite_passes() {
    let root = repo_root();
    let (code, stdout, stderr) = sartor(&root, &["test", "examples"], "");
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert!(stdout.ends_with("11 passed, 0 failed\n"), "{stdout}");
    assert_eq!(
        stdout
            .matches("PASS examples/tests/prod-shop.sartor-test.yaml: ")
            .count(),
        8
    );
    assert_eq!(
        stdout
            .matches("PASS examples/external-data/images.sartor-test.yaml: ")
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
    let (code, stdout, stderr) = sartor(&dir, &["test", "t"], "");
    assert_eq!((code, stderr.as_str()), (1, ""));
    assert_eq!(
        stdout,
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
    let (code, _, stderr) = sartor(&dir, &["test", "t/b.sartor-test.yaml"], "");
    assert_eq!(code, 2);
    assert!(
        stderr.starts_with("error: t/b.sartor-test.yaml: invalid suite: unknown field `case`"),
        "{stderr}"
    );
}

#[test]
fn the_gatekeeper_examples_mutate_exactly_as_their_sartor_twins() {
    let root = repo_root();
    let mutate = |mutators: &[&str]| {
        let mut args = vec!["mutate"];
        for m in mutators {
            args.extend(["--mutators", m]);
        }
        args.extend(["--namespaces", "examples/objects/namespace.yaml"]);
        args.push("examples/objects/pod.yaml");
        sartor(&root, &args, "")
    };
    let gatekeeper = mutate(&["examples/gatekeeper"]);
    let sartor_twins = mutate(&[
        "examples/mutators/owner-label.yaml",
        "examples/mutators/always-pull.yaml",
    ]);
    assert_eq!((gatekeeper.0, gatekeeper.2.as_str()), (0, ""));
    assert_eq!(gatekeeper, sartor_twins);
    assert!(
        gatekeeper.1.contains("imagePullPolicy: Always"),
        "{}",
        gatekeeper.1
    );
    assert!(
        gatekeeper.1.contains("owner: prod-shop"),
        "{}",
        gatekeeper.1
    );
}

#[test]
fn exit_code_says_whether_anything_would_change() {
    let root = repo_root();
    let mutators = ["mutate", "--mutators", "examples/mutators"];
    let args = |extra: &[&'static str]| -> Vec<&'static str> {
        mutators
            .iter()
            .copied()
            .chain(extra.iter().copied())
            .collect()
    };
    // The example Pod is not mutated yet: exit 1, with the diff.
    let (code, stdout, stderr) = sartor(
        &root,
        &args(&[
            "--diff",
            "--exit-code",
            "examples/objects/pod.yaml",
            "examples/objects/namespace.yaml",
        ]),
        "",
    );
    assert_eq!((code, stderr.as_str()), (1, ""));
    assert!(
        stdout.contains("+      readOnlyRootFilesystem: true"),
        "{stdout}"
    );
    // Its expected output already is: exit 0, and no diff.
    let (code, stdout, stderr) = sartor(
        &root,
        &args(&[
            "--diff",
            "--exit-code",
            "--namespaces",
            "examples/objects/namespace.yaml",
            "examples/tests/expected/pod.yaml",
        ]),
        "",
    );
    assert_eq!((code, stdout.as_str(), stderr.as_str()), (0, "", ""));
    // Without the flag a change is no failure.
    let (code, _, _) = sartor(
        &root,
        &args(&[
            "--diff",
            "examples/objects/pod.yaml",
            "examples/objects/namespace.yaml",
        ]),
        "",
    );
    assert_eq!(code, 0);
}

#[test]
fn run_selects_cases_by_name() {
    let root = repo_root();
    let (code, stdout, stderr) = sartor(&root, &["test", "examples", "--run", "host port"], "");
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert_eq!(
        stdout,
        "PASS examples/tests/prod-shop.sartor-test.yaml: the mesh's proxy keeps a writable root filesystem, and no container binds a host port\n1 passed, 0 failed\n"
    );
    let (code, stdout, stderr) = sartor(&root, &["test", "examples", "--run", "no such case"], "");
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (2, "", "error: no case name contains \"no such case\"\n")
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
    let (code, stdout, stderr) = sartor(&dir, &["test", path], "");
    assert_eq!(
        (code, stdout.as_str(), stderr),
        (
            2,
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
    let (code, stdout, stderr) = sartor(&dir, &["test", ".", "--format", "junit"], "");
    assert_eq!((code, stderr.as_str()), (1, ""));
    assert_eq!(
        without_times(&stdout),
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
    let (code, stdout, _) = sartor(
        &dir,
        &["test", ".", "--format", "json", "--run", "pulls"],
        "",
    );
    assert_eq!(code, 0);
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["passed"], 1);
    assert_eq!(report["failed"], 0);
    assert_eq!(report["suites"][0]["cases"][0]["name"], "pulls always");
    assert_eq!(report["suites"][0]["cases"][0]["outcome"], "passed");
}

/// A repository: mutators beside the workloads and their Namespace, in one
/// tree and one multi-document file (as `kustomize build` prints it).
fn repository(test: &str) -> Scratch {
    let namespace =
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {env: prod}}\n";
    scratch(
        test,
        &[
            ("repo/policy/pull.yaml", PULL),
            ("repo/policy/tier.yaml", PROD_ONLY),
            ("repo/shop/namespace.yaml", namespace),
            ("repo/shop/pod.yaml", POD),
            (
                "built.yaml",
                &format!("{namespace}---\n{PULL}---\n{PROD_ONLY}---\n{POD}"),
            ),
        ],
    )
}

#[test]
fn mutate_finds_the_mutators_in_a_repository() {
    let dir = repository("repo-mutate");
    let want = "apiVersion: v1\nkind: Namespace\nmetadata:\n  labels:\n    env: prod\n    tier: gold\n  name: shop\n---\n\
                apiVersion: v1\nkind: Pod\nmetadata:\n  labels:\n    tier: gold\n  name: web\n  namespace: shop\n\
                spec:\n  containers:\n  - image: nginx\n    imagePullPolicy: Always\n    name: app\n";
    let (code, stdout, stderr) = sartor(&dir, &["mutate", "repo"], "");
    assert_eq!((code, stdout.as_str(), stderr.as_str()), (0, want, ""));
    // The same from stdin, as `kustomize build | sartor mutate` would.
    let built = std::fs::read_to_string(dir.join("built.yaml")).unwrap();
    let (code, stdout, stderr) = sartor(&dir, &["mutate"], &built);
    assert_eq!((code, stdout.as_str(), stderr.as_str()), (0, want, ""));
    // No mutator anywhere: said, exit 2.
    let (code, stdout, stderr) = sartor(&dir, &["mutate", "repo/shop"], "");
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (
            2,
            "",
            "error: no mutators: give --mutators, or include mutator documents (apiVersion mutations.sartor.dev/v1 or mutations.gatekeeper.sh/...) among the inputs\n"
        )
    );
}

#[test]
fn lint_checks_the_mutators_of_a_repository_and_counts_the_rest() {
    let dir = repository("repo-lint");
    let (code, stdout, stderr) = sartor(&dir, &["lint", "repo"], "");
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (
            0,
            "",
            "2 mutators, no problems (2 other documents skipped)\n"
        )
    );
    let (code, stdout, _) = sartor(&dir, &["lint", "-o", "json", "built.yaml"], "");
    assert_eq!(code, 0);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&stdout).unwrap(),
        serde_json::json!({"mutators": 2, "skipped": 2, "errors": 0, "warnings": 0, "findings": []})
    );
    // A document in a mutation group that is not a valid mutator is an error.
    std::fs::write(
        dir.join("repo/policy/typo.yaml"),
        "apiVersion: mutations.sartor.dev/v1\nkind: Asign\nmetadata: {name: x}\n",
    )
    .unwrap();
    let (code, _, stderr) = sartor(&dir, &["lint", "repo"], "");
    assert_eq!(
        (code, stderr.as_str()),
        (
            2,
            "error: repo/policy/typo.yaml: document 1: Asign x: Asign (mutations.sartor.dev/v1) is not a mutator: expected Assign, AssignImage, AssignMetadata or ModifySet in mutations.sartor.dev/v1 or mutations.gatekeeper.sh/v1, v1beta1, v1alpha1\n"
        )
    );
}

#[test]
fn expand_previews_what_workloads_generate() {
    // Gatekeeper's own documentation example, read as is.
    let template = "apiVersion: expansion.gatekeeper.sh/v1beta1
kind: ExpansionTemplate
metadata:
  name: expand-deployments
spec:
  applyTo:
    - groups: [\"apps\"]
      kinds: [\"Deployment\"]
      versions: [\"v1\"]
  templateSource: \"spec.template\"
  enforcementAction: \"warn\"
  generatedGVK:
    kind: \"Pod\"
    group: \"\"
    version: \"v1\"
";
    // Only objects as written, never generated ones.
    let original_only = "apiVersion: mutations.sartor.dev/v1
kind: AssignMetadata
metadata: {name: reviewed}
spec:
  match: {source: Original}
  location: metadata.labels.reviewed
  parameters: {assign: {value: done}}
";
    let deployment = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: app, image: nginx}]
";
    // Generated objects are admitted by no operation, as in Gatekeeper:
    // a mutator of CREATE alone leaves them alone.
    let create_only = "apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: pin-node}
spec:
  applyTo: [{groups: [\"\"], versions: [v1], kinds: [Pod], operations: [CREATE]}]
  location: spec.nodeName
  parameters: {assign: {value: node-1}}
";
    let dir = scratch(
        "expand",
        &[
            ("repo/template.yaml", template),
            ("repo/pull.yaml", &pull_every_operation()),
            ("repo/reviewed.yaml", original_only),
            ("repo/create-only.yaml", create_only),
            ("repo/web.yaml", deployment),
        ],
    );
    let (code, stdout, stderr) = sartor(&dir, &["mutate", "--expand", "repo"], "");
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert_eq!(
        stdout,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  labels:\n    reviewed: done\n  name: web\n  namespace: shop\n\
         spec:\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      - image: nginx\n        name: app\n\
         ---\n\
         apiVersion: v1\nkind: Pod\nmetadata:\n  labels:\n    app: web\n  name: web-pod\n  namespace: shop\n  ownerReferences:\n  - apiVersion: apps/v1\n    kind: Deployment\n    name: web\n\
         spec:\n  containers:\n  - image: nginx\n    imagePullPolicy: Always\n    name: app\n"
    );
    // --explain names the generated Pod and its template.
    let (code, stdout, _) = sartor(&dir, &["mutate", "--expand", "--explain", "repo"], "");
    assert_eq!(code, 0);
    assert_eq!(
        stdout,
        "repo/web.yaml: document 1 (apps/v1 Deployment shop/web):\n  pass 1  AssignMetadata reviewed  metadata.labels.reviewed\n\
         repo/web.yaml: document 1 > v1 Pod shop/web-pod (generated by expand-deployments):\n  pass 1  Assign pull  spec.containers[name: app].imagePullPolicy\n"
    );
    // Without templates nothing is generated; a lint of the repository
    // checks the template too.
    let (code, stdout, _) = sartor(
        &dir,
        &[
            "mutate",
            "--expand",
            "--no-builtin-templates",
            "-m",
            "repo/pull.yaml",
            "repo/web.yaml",
        ],
        "",
    );
    assert_eq!(code, 0);
    assert!(!stdout.contains("kind: Pod"), "{stdout}");
    std::fs::write(
        dir.join("repo/template.yaml"),
        template.replace("  templateSource: \"spec.template\"\n", ""),
    )
    .unwrap();
    // (PULL for CREATE alone again, as lint's breaks-update asks.)
    std::fs::write(dir.join("repo/pull.yaml"), PULL).unwrap();
    let (code, _, stderr) = sartor(&dir, &["lint", "repo"], "");
    assert_eq!(
        (code, stderr.as_str()),
        (
            2,
            "error: repo/template.yaml: document 1: ExpansionTemplate expand-deployments: spec.templateSource: must be set\n"
        )
    );
}

#[test]
fn the_example_repository_lints_clean() {
    let (code, stdout, stderr) = sartor(&repo_root(), &["lint", "examples/repo"], "");
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (
            0,
            "",
            "2 mutators, no problems (5 other documents skipped)\n"
        )
    );
}

#[test]
fn a_cronjob_expands_twice() {
    let cronjob = "apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly, namespace: shop}
spec:
  schedule: '0 3 * * *'
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers: [{name: run, image: report:1}]
";
    let dir = scratch(
        "cronjob",
        &[
            ("pull.yaml", &pull_every_operation()),
            ("cronjob.yaml", cronjob),
        ],
    );
    let (code, stdout, stderr) = sartor(
        &dir,
        &["mutate", "--expand", "pull.yaml", "cronjob.yaml"],
        "",
    );
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert_eq!(
        stdout,
        "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: nightly\n  namespace: shop\nspec:\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          containers:\n          - image: report:1\n            name: run\n          restartPolicy: Never\n  schedule: 0 3 * * *\n\
         ---\n\
         apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: nightly-job\n  namespace: shop\n  ownerReferences:\n  - apiVersion: batch/v1\n    kind: CronJob\n    name: nightly\nspec:\n  template:\n    spec:\n      containers:\n      - image: report:1\n        name: run\n      restartPolicy: Never\n\
         ---\n\
         apiVersion: v1\nkind: Pod\nmetadata:\n  name: nightly-job-pod\n  namespace: shop\n  ownerReferences:\n  - apiVersion: batch/v1\n    kind: Job\n    name: nightly-job\nspec:\n  containers:\n  - image: report:1\n    imagePullPolicy: Always\n    name: run\n  restartPolicy: Never\n"
    );
}

#[test]
fn a_repository_skips_what_is_not_an_object_and_says_what_is_doubtful() {
    let kustomization = "resources: [pod.yaml]\n";
    let template = |name: &str, from: &str, to: &str| {
        format!(
            "apiVersion: expansion.gatekeeper.sh/v1alpha1\nkind: ExpansionTemplate\nmetadata: {{name: {name}}}\n\
             spec:\n  applyTo: [{{groups: [x.io], versions: [v1], kinds: [{from}]}}]\n  templateSource: spec.t\n  \
             generatedGVK: {{group: x.io, version: v1, kind: {to}}}\n"
        )
    };
    let dir = scratch(
        "skips",
        &[
            ("policy/pull.yaml", PULL),
            ("policy/kustomization.yaml", kustomization),
            ("app/pod.yaml", POD),
            ("app/values.yaml", "replicas: 3\n"),
            ("app/renovate.json", "{\"extends\": [\"config:base\"]}"),
            (
                "app/patch.yaml",
                "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: shop}\n",
            ),
        ],
    );
    // `-m` on a directory kustomize builds; the app dir given twice over.
    let (code, stdout, stderr) =
        sartor(&dir, &["mutate", "-m", "policy", "app", "app/pod.yaml"], "");
    assert_eq!(code, 0);
    assert_eq!(stdout.matches("kind: Pod").count(), 2, "{stdout}");
    assert_eq!(
        stderr,
        "warning: app/renovate.json: skipped what is not a Kubernetes object: document 1: apiVersion not set, kind not set (--strict makes it an error)\n\
         warning: app/values.yaml: skipped what is not a Kubernetes object: document 1: apiVersion not set, kind not set (--strict makes it an error)\n\
         warning: app/pod.yaml: document 1: v1 Pod shop/web is also at app/patch.yaml: document 1 (a kustomize patch? preview the built overlay: kustomize build DIR | sartor mutate)\n"
    );
    let (code, stdout, stderr) = sartor(&dir, &["mutate", "--strict", "-m", "policy", "app"], "");
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (
            2,
            "",
            "error: app/renovate.json: document 1: not a Kubernetes object: apiVersion not set, kind not set\n\
             error: app/values.yaml: document 1: not a Kubernetes object: apiVersion not set, kind not set\n"
        )
    );
    let (code, _, stderr) = sartor(&dir, &["lint", "policy", "app"], "");
    assert_eq!(
        (code, stderr.as_str()),
        (0, "1 mutators, no problems (5 other documents skipped)\n")
    );
    // Templates that generate each other: lint refuses them, naming one.
    std::fs::write(
        dir.join("policy/templates.yaml"),
        format!(
            "{}---\n{}",
            template("a", "A", "B"),
            template("b", "B", "A")
        ),
    )
    .unwrap();
    let (code, _, stderr) = sartor(&dir, &["lint", "policy"], "");
    assert_eq!(
        (code, stderr.as_str()),
        (
            2,
            "error: policy/templates.yaml: document 1: expansion templates a, b form a cycle: each generates a kind another expands\n"
        )
    );
}

#[test]
fn an_input_that_is_not_an_object_is_an_error_from_a_file_and_from_stdin() {
    let cases = [
        (
            "apiVersion",
            "kind: Pod\nmetadata: {name: a}\n",
            "document 1: not a Kubernetes object: apiVersion not set",
        ),
        (
            "kind",
            "apiVersion: v1\nmetadata: {name: a}\n",
            "document 1: not a Kubernetes object: kind not set",
        ),
        (
            "scalar",
            "just a sentence\n",
            "document 1: not a Kubernetes object: the document is a string, not a mapping",
        ),
        (
            "list",
            "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: a}\n- kind: Pod\n  metadata: {name: b}\n",
            "document 1, item 2: not a Kubernetes object: apiVersion not set",
        ),
    ];
    for (name, text, problem) in cases {
        let dir = scratch("not-object", &[("pull.yaml", PULL), ("input.yaml", text)]);
        let (code, stdout, stderr) = sartor(&dir, &["mutate", "-m", "pull.yaml", "input.yaml"], "");
        assert_eq!(
            (code, stdout.as_str(), stderr.as_str()),
            (2, "", format!("error: input.yaml: {problem}\n").as_str()),
            "{name}, from a file"
        );
        let (code, stdout, stderr) = sartor(&dir, &["mutate", "-m", "pull.yaml", "-"], text);
        assert_eq!(
            (code, stdout.as_str(), stderr.as_str()),
            (2, "", format!("error: <stdin>: {problem}\n").as_str()),
            "{name}, from stdin"
        );
    }
    // lint: a mutator file named with a typo is not a document to skip.
    let dir = scratch(
        "not-object-lint",
        &[("m.yaml", "kind: Assign\nmetadata: {name: a}\n")],
    );
    let (code, _, stderr) = sartor(&dir, &["lint", "--mutators", "m.yaml"], "");
    assert_eq!(
        (code, stderr.as_str()),
        (
            2,
            "error: m.yaml: document 1: not a Kubernetes object: apiVersion not set\n"
        )
    );
    // Empty and comment-only documents are nothing, as kubectl has them.
    let dir = scratch("not-object", &[("pull.yaml", PULL)]);
    let text = format!("---\n# only a comment\n---\n{POD}---\n");
    let (code, stdout, stderr) = sartor(&dir, &["mutate", "-m", "pull.yaml", "-"], &text);
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert_eq!(stdout.matches("kind: Pod").count(), 1, "{stdout}");
    // `sartor test`: a case's object that is not one is the case's problem.
    let dir = scratch(
        "not-object-test",
        &[
            ("pull.yaml", PULL),
            ("input.yaml", "kind: Pod\nmetadata: {name: a}\n"),
            (
                "t.sartor-test.yaml",
                "mutators: [pull.yaml]\ncases:\n- name: typo\n  input: input.yaml\n  expected: input.yaml\n",
            ),
        ],
    );
    let (code, stdout, _) = sartor(&dir, &["test", "."], "");
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains("input.yaml: document 1: not a Kubernetes object: apiVersion not set"),
        "{stdout}"
    );
}

#[test]
fn yaml_output_quotes_what_yaml_1_1_reads_as_booleans() {
    // kubectl reads YAML 1.1: a bare `yes`, `on` or `n` would be a boolean
    // and the label invalid when the preview is applied.
    let labels = "apiVersion: mutations.sartor.dev/v1
kind: AssignMetadata
metadata: {name: inject}
spec:
  location: metadata.labels.inject
  parameters: {assign: {value: 'yes'}}
";
    let dir = scratch("yaml11", &[("m.yaml", labels), ("pod.yaml", POD)]);
    let (code, stdout, stderr) = sartor(&dir, &["mutate", "-m", "m.yaml", "pod.yaml"], "");
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert!(stdout.contains("    inject: \"yes\"\n"), "{stdout}");
}

#[test]
fn lint_reports_the_analysis_fails_on_errors_and_with_strict_on_warnings() {
    let proxy = "apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata: {name: b-proxy}
spec:
  applyTo: [{groups: [''], versions: [v1], kinds: [Pod], operations: [CREATE]}]
  location: 'spec.containers[name: proxy]'
  parameters: {assign: {value: {name: proxy, image: 'envoy:1'}}}
";
    let pull = PULL
        .replace("name: pull", "name: a-pull")
        .replace("[name: *]", "[name: proxy]");
    let dir = scratch(
        "lint-analysis",
        &[("m.yaml", &format!("{pull}---\n{proxy}"))],
    );
    let shadowed = "warning: m.yaml: document 1: Assign a-pull: shadowed: it never has an effect: Assign b-proxy comes later in the order and replaces spec.containers[name: proxy] on every object it applies to, so what it writes at spec.containers[name: proxy].imagePullPolicy is undone in every pass\n";
    let (code, stdout, stderr) = sartor(&dir, &["lint", "m.yaml"], "");
    assert_eq!(
        (code, stdout.as_str(), stderr),
        (
            0,
            "",
            format!("{shadowed}2 mutators, no errors, 1 warning\n")
        )
    );
    let (code, _, _) = sartor(&dir, &["lint", "--strict", "m.yaml"], "");
    assert_eq!(code, 2);
    let (code, _, stderr) = sartor(
        &dir,
        &["lint", "--strict", "--allow", "shadowed", "m.yaml"],
        "",
    );
    assert_eq!((code, stderr.as_str()), (0, "2 mutators, no problems\n"));
    let (code, stdout, _) = sartor(&dir, &["lint", "-o", "json", "m.yaml"], "");
    assert_eq!(code, 0);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&stdout).unwrap(),
        serde_json::json!({
            "mutators": 2, "skipped": 0, "errors": 0, "warnings": 1,
            "findings": [{
                "category": "shadowed", "severity": "warning",
                "file": "m.yaml", "document": 1, "item": null, "subject": "Assign a-pull",
                "message": "it never has an effect: Assign b-proxy comes later in the order and replaces spec.containers[name: proxy] on every object it applies to, so what it writes at spec.containers[name: proxy].imagePullPolicy is undone in every pass",
                "mutators": ["Assign a-pull", "Assign b-proxy"],
                "path": "spec.containers[name: proxy]",
                "example": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "example"}, "spec": {"containers": [{"name": "proxy"}]}},
            }],
        })
    );
    // A mutator that never applies is an error.
    let never = proxy.replace("name: b-proxy", "name: c-never").replace(
        "  location:",
        "  match: {kinds: [{apiGroups: [apps], kinds: [Deployment]}]}\n  location:",
    );
    std::fs::write(dir.join("never.yaml"), never).unwrap();
    let (code, _, stderr) = sartor(&dir, &["lint", "never.yaml"], "");
    assert_eq!(
        (code, stderr.as_str()),
        (
            2,
            "error: never.yaml: document 1: Assign c-never: never-applies: no kind in its applyTo (v1 Pod) is allowed by its match.kinds, so it applies to nothing\n"
        )
    );
}

/// Gatekeeper's external data examples (its docs' Provider, Assign and
/// AssignMetadata) load unchanged and mutate with recorded answers; without
/// them, the keys asked are named.
#[test]
fn external_data_uses_recorded_answers_and_names_what_is_missing() {
    let root = repo_root();
    let (code, stdout, stderr) = sartor(
        &root,
        &[
            "mutate",
            "--mutators",
            "examples/external-data/mutators",
            "--provider-answers",
            "examples/external-data/answers.yaml",
            "--username",
            "kubernetes-admin",
            "examples/external-data/pod.yaml",
        ],
        "",
    );
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert_eq!(
        stdout,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  annotations:\n    owner: admin@example.com\n  \
         name: web\n  namespace: shop\nspec:\n  containers:\n  - image: nginx:v1.2.3\n    name: app\n"
    );
    let (code, stdout, stderr) = sartor(
        &root,
        &[
            "mutate",
            "--mutators",
            "examples/external-data/mutators",
            "examples/external-data/pod.yaml",
        ],
        "",
    );
    assert_eq!((code, stdout.as_str()), (1, ""));
    assert_eq!(
        stderr,
        "error: examples/external-data/pod.yaml: document 1: v1 Pod shop/web: external data has no \
         recorded answer for provider my-provider (\"\", \"nginx\"): record them with \
         --provider-answers (or a test case's providers), or pass --call-providers\n"
    );
    let (code, _, stderr) = sartor(
        &root,
        &["lint", "--mutators", "examples/external-data/mutators"],
        "",
    );
    assert_eq!((code, stderr.as_str()), (0, "2 mutators, no problems\n"));

    // A Provider the repository does not define, while it defines others.
    let images =
        std::fs::read_to_string(root.join("examples/external-data/mutators/mutate-images.yaml"))
            .unwrap()
            .replace("provider: my-provider", "provider: other-provider");
    let provider =
        std::fs::read_to_string(root.join("examples/external-data/mutators/provider.yaml"))
            .unwrap();
    let dir = scratch(
        "lint-provider",
        &[("m/images.yaml", &images), ("m/provider.yaml", &provider)],
    );
    let (code, _, stderr) = sartor(&dir, &["lint", "--mutators", "m"], "");
    assert_eq!(
        (code, stderr.as_str()),
        (
            0,
            "warning: m/images.yaml: document 1: Assign mutate-images: \
             spec.parameters.assign.externalData.provider: no Provider \"other-provider\" among those \
             read (my-provider); in a cluster without it, every admission this mutator matches meets \
             an unknown provider and its failurePolicy decides\n1 mutators, no errors, 1 warning\n"
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--call-providers` asks the providers themselves, here a real HTTPS
/// provider on 127.0.0.1.
#[test]
fn call_providers_asks_the_provider_over_https() {
    let provider = sartor_tests::provider::TestProvider::start(None).unwrap();
    let assign = "apiVersion: mutations.gatekeeper.sh/v1\nkind: Assign\nmetadata: {name: pin}\n\
                  spec:\n  applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}]\n  \
                  location: 'spec.containers[name: *].image'\n  \
                  parameters: {assign: {externalData: {provider: tags}}}\n";
    let dir = scratch(
        "call-providers",
        &[
            ("mutators/pin.yaml", assign),
            ("mutators/tags.yaml", &provider.provider_yaml("tags", 2)),
            (
                "pod.json",
                r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                    "spec": {"containers": [{"name": "a", "image": "nginx:1.27"}]}}"#,
            ),
        ],
    );
    let (code, stdout, stderr) = sartor(
        &dir,
        &[
            "mutate",
            "--mutators",
            "mutators",
            "--call-providers",
            "-o",
            "json",
            "pod.json",
        ],
        "",
    );
    assert_eq!((code, stderr.as_str()), (0, ""));
    let mutated: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        mutated["spec"]["containers"][0]["image"],
        sartor_tests::provider::digest("nginx:1.27")
    );
    assert_eq!(provider.seen().len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Mutators with a Gatekeeper apiVersion are compared with Gatekeeper
/// v3.23.1: a warning where it would act otherwise at admission or refuse
/// what sartor accepts, a note after the error where it would accept what
/// sartor refuses. With sartor's apiVersion, the same mutators get none.
#[test]
fn lint_says_where_gatekeeper_would_differ() {
    const FIXTURE: &str = "crates/cli/tests/fixtures/gatekeeper-differences/mutators.yaml";
    let errors = [
        "error: F: document 8: Assign low-priority: spec.parameters.pathTests[0]: missing field `condition`",
        "error: F: document 10: Assign dns-policy: spec.parameters.assignIf: unknown field `assignIf`, expected one of `pathTests`, `assign`, `conditions`",
        "error: F: document 11: Assign any-scope: spec.match.scope: unknown variant `Global`, expected one of `*`, `Cluster`, `Namespaced`",
        "error: F: document 7: Assign run-as-user: spec.parameters.pathTests: pathTest subPath \"spec.securityContext.runAsUser\" is marked MustExist but its parent \"spec.securityContext\" is marked MustNotExist",
        "error: F: document 9: Assign team-scheduler: spec.match.labelSelector: invalid label selector requirement on key \"team\" (In): for 'in', 'notin' operators, values set can't be empty",
    ];
    let notes = [
        "info: F: document 8: Assign low-priority: pathtest-without-condition: Gatekeeper v3.23.1 would accept spec.parameters.pathTests[0] without a condition, and the mutator would never apply; sartor refuses it",
        "info: F: document 10: Assign dns-policy: unknown-fields: with Gatekeeper v3.23.1, the API server would prune spec.parameters.assignIf (not in the CRD) unless the object is applied with strict field validation, and the mutator would work without it; sartor refuses it, as kubectl apply's default (strict) field validation does",
        "info: F: document 11: Assign any-scope: match-scope: Gatekeeper v3.23.1 would accept match.scope \"Global\" and read it as \"*\" (cluster-scoped and namespaced objects alike); sartor refuses it",
        "info: F: document 7: Assign run-as-user: pathtests-child-first: Gatekeeper v3.23.1 would accept these pathTests, since MustExist on spec.securityContext.runAsUser is listed before MustNotExist on its parent spec.securityContext (it compares positions in the list), and the mutator would never apply; sartor refuses it",
        "info: F: document 9: Assign team-scheduler: malformed-selector: Gatekeeper v3.23.1 would accept this match.labelSelector (In on key \"team\" without values) and then fail every admission of an object it is asked to match with a match error; sartor refuses it",
    ];
    let warnings = [
        "warning: F: document 1: Assign context-for-all: glob-aliasing: Gatekeeper v3.23.1 would store one shared copy of its value at spec.containers[name: *].securityContext in every element spec.containers[name: *] matches, so what Assign no-privilege-for-app writes at spec.containers[name: app].securityContext.privileged would show in all of them; sartor gives each element its own copy",
        "warning: F: document 4: ModifySet tolerate-maintenance: number-types: Gatekeeper v3.23.1 would merge {\"effect\":\"NoExecute\",\"key\":\"maintenance\",\"operator\":\"Exists\",\"tolerationSeconds\":300} into spec.tolerations a second time where Assign tolerate-maintenance has put it: it reads Assign values' numbers as float64 and ModifySet values' as int64 and compares them type-strictly; sartor adds it once",
        "warning: F: document 5: Assign long-deadline: big-integers: Gatekeeper v3.23.1 would store the integer 9007199254740993 of its value at spec.activeDeadlineSeconds as 9007199254740992: it decodes Assign values as float64, exact only up to 2^53; sartor stores it exactly",
        "warning: F: document 6: Assign init-non-root: pathtests-parent-first: Gatekeeper v3.23.1 would refuse this mutator (\"conflicting path test conditions: path <nil> is marked MustExist but parent <nil> MustNotExist\"): it compares pathTests by their positions in the list, and MustNotExist on spec.initContainers[name: setup].securityContext.runAsNonRoot comes before MustExist on its ancestor spec.initContainers[name: setup]; sartor accepts it and enforces both",
    ];
    let lines = |file: &str, lines: &[&str]| -> String {
        lines
            .iter()
            .map(|line| format!("{}\n", line.replacen(": F: ", &format!(": {file}: "), 1)))
            .collect()
    };
    // Each note right after the error it explains, then the warnings.
    let mut expected: Vec<&str> = Vec::new();
    for (error, note) in errors.iter().zip(&notes) {
        expected.extend([*error, *note]);
    }
    expected.extend(warnings);
    let (code, stdout, stderr) = sartor(&repo_root(), &["lint", "-m", FIXTURE], "");
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert_eq!(stderr, lines(FIXTURE, &expected));

    // --allow leaves the category (or one class) out; errors stay.
    let (code, _, stderr) = sartor(
        &repo_root(),
        &["lint", "-m", FIXTURE, "--allow", "gatekeeper"],
        "",
    );
    assert_eq!((code, stderr), (2, lines(FIXTURE, &errors)));
    let (_, _, stderr) = sartor(
        &repo_root(),
        &[
            "lint",
            "-m",
            FIXTURE,
            "--allow",
            "big-integers,unknown-fields",
        ],
        "",
    );
    assert!(!stderr.contains("big-integers") && !stderr.contains("unknown-fields"));
    assert_eq!(stderr.lines().count(), expected.len() - 2);

    // JSON names the category and the class.
    let (_, stdout, _) = sartor(&repo_root(), &["lint", "-m", FIXTURE, "-o", "json"], "");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let glob = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["class"] == "glob-aliasing")
        .unwrap();
    assert_eq!(
        (&glob["category"], &glob["severity"], &glob["subject"]),
        (
            &serde_json::json!("gatekeeper"),
            &serde_json::json!("warning"),
            &serde_json::json!("Assign context-for-all")
        )
    );

    // The same mutators with sartor's apiVersion: the errors alone.
    let text = std::fs::read_to_string(repo_root().join(FIXTURE))
        .unwrap()
        .replace("mutations.gatekeeper.sh/v1", "mutations.sartor.dev/v1");
    let dir = scratch("lint-gatekeeper", &[("sartor.yaml", &text)]);
    let (code, _, stderr) = sartor(&dir, &["lint", "-m", "sartor.yaml"], "");
    assert_eq!((code, stderr), (2, lines("sartor.yaml", &errors)));
    let _ = std::fs::remove_dir_all(&dir);
}

// === scope and namespace of manifests without metadata.namespace ===

/// The namespace-less Pod and Deployment of `fixtures/namespace-less`, with
/// mutators limited to namespaced objects (also proven on a real API server:
/// the cluster suite's `scope::namespace_less_manifests_...`).
fn namespace_less(name: &str) -> String {
    fixture(&format!("namespace-less/{name}"))
}

#[test]
fn a_namespace_less_pod_is_mutated_as_namespaced_in_the_default_namespace() {
    let dir = scratch("ns-less-pod", &[]);
    let mutators = namespace_less("mutators.yaml");
    let pod = namespace_less("pod.yaml");
    let (code, stdout, stderr) = sartor(&dir, &["mutate", "-m", &mutators, &pod], "");
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert_eq!(
        stdout,
        "apiVersion: v1
kind: Pod
metadata:
  labels:
    team: platform
  name: web
spec:
  containers:
  - image: nginx:1.27
    imagePullPolicy: Always
    name: app
  - args:
    - --config=/fluent-bit/etc/fluent-bit.conf
    image: fluent/fluent-bit:3.0
    imagePullPolicy: Always
    name: log-shipper
"
    );
    // -n as kubectl takes it: kube-system is excluded by always-pull, and
    // team-label is for `default` only.
    let (code, stdout, stderr) = sartor(
        &dir,
        &["mutate", "-n", "kube-system", "-m", &mutators, &pod],
        "",
    );
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert_eq!(
        stdout,
        "apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - image: nginx:1.27
    name: app
  - args:
    - --config=/fluent-bit/etc/fluent-bit.conf
    image: fluent/fluent-bit:3.0
    name: log-shipper
"
    );
}

#[test]
fn a_namespace_less_deployment_expands_into_a_pod_of_its_assumed_namespace() {
    let dir = scratch("ns-less-expand", &[]);
    let (code, stdout, stderr) = sartor(
        &dir,
        &[
            "mutate",
            "--expand",
            "-m",
            &namespace_less("mutators.yaml"),
            &namespace_less("deployment.yaml"),
        ],
        "",
    );
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert_eq!(
        stdout,
        "apiVersion: apps/v1
kind: Deployment
metadata:
  labels:
    team: platform
  name: cart
spec:
  selector:
    matchLabels:
      app: cart
  template:
    metadata:
      labels:
        app: cart
    spec:
      containers:
      - image: shop/cart:1.4
        name: app
---
apiVersion: v1
kind: Pod
metadata:
  labels:
    app: cart
    team: platform
  name: cart-pod
  ownerReferences:
  - apiVersion: apps/v1
    kind: Deployment
    name: cart
spec:
  containers:
  - image: shop/cart:1.4
    imagePullPolicy: Always
    name: app
  - args:
    - --config=/fluent-bit/etc/fluent-bit.conf
    image: fluent/fluent-bit:3.0
    imagePullPolicy: Always
    name: log-shipper
"
    );
}

#[test]
fn explain_says_which_namespace_was_assumed() {
    let pod = std::fs::read_to_string(namespace_less("pod.yaml")).unwrap();
    let placed = pod.replace("  name: web\n", "  name: placed\n  namespace: shop\n");
    let dir = scratch(
        "ns-less-explain",
        &[("pod.yaml", pod.as_str()), ("placed.yaml", placed.as_str())],
    );
    let mutators = namespace_less("mutators.yaml");
    let (code, stdout, stderr) = sartor(
        &dir,
        &[
            "mutate",
            "--explain",
            "-n",
            "prod",
            "-m",
            &mutators,
            "pod.yaml",
            "placed.yaml",
        ],
        "",
    );
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert_eq!(
        stdout,
        "pod.yaml: document 1 (v1 Pod web):
  mutated in namespace prod (assumed: namespaced kind without metadata.namespace; -n sets it)
  pass 1  Assign always-pull  spec.containers[name: app].imagePullPolicy
  pass 1  Assign log-shipper-args  spec.containers[name: log-shipper].args
  pass 1  Assign log-shipper-image  spec.containers[name: log-shipper].image
  pass 2  Assign always-pull  spec.containers[name: log-shipper].imagePullPolicy
placed.yaml: document 1 (v1 Pod shop/placed):
  pass 1  Assign always-pull  spec.containers[name: app].imagePullPolicy
  pass 1  Assign log-shipper-args  spec.containers[name: log-shipper].args
  pass 1  Assign log-shipper-image  spec.containers[name: log-shipper].image
  pass 2  Assign always-pull  spec.containers[name: log-shipper].imagePullPolicy
"
    );
}

const WIDGET: &str = "apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
spec:
  size: 1
";

const WIDGET_SIZE: &str = "apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata:
  name: widget-size
spec:
  applyTo:
  - groups: [example.com]
    kinds: [Widget]
    versions: [v1]
  match:
    scope: Namespaced
  location: spec.size
  parameters:
    assign:
      value: 3
";

#[test]
fn a_custom_kind_is_scoped_by_its_crd_or_api_resources_and_else_warned_about() {
    let crd = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets}
  versions: [{name: v1, served: true, storage: true}]
";
    let resources = "NAME      SHORTNAMES   APIVERSION       NAMESPACED   KIND
widgets   wd           example.com/v1   true         Widget
";
    let broken = "pods   po   v1   true   Pod\n";
    let dir = scratch(
        "custom-scope",
        &[
            ("m.yaml", WIDGET_SIZE),
            ("widget.yaml", WIDGET),
            ("repo/crd.yaml", crd),
            ("repo/widget.yaml", WIDGET),
            ("api-resources.txt", resources),
            ("broken.txt", broken),
        ],
    );
    let mutated = WIDGET.replace("size: 1", "size: 3");
    // Unknown: mutated as cluster-scoped, with a warning.
    let (code, stdout, stderr) = sartor(&dir, &["mutate", "-m", "m.yaml", "widget.yaml"], "");
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (
            0,
            WIDGET,
            "warning: widget.yaml: document 1: the scope of kind Widget.example.com is unknown (not built in, no CRD among the inputs, not in --api-resources): objects of it without metadata.namespace are mutated as cluster-scoped\n"
        )
    );
    // Its CRD among the inputs (printed unchanged, as an object).
    let (code, stdout, stderr) = sartor(&dir, &["mutate", "-m", "m.yaml", "repo"], "");
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert!(stdout.ends_with(&format!("---\n{mutated}")), "{stdout}");
    // `kubectl api-resources` output.
    let (code, stdout, stderr) = sartor(
        &dir,
        &[
            "mutate",
            "-m",
            "m.yaml",
            "--api-resources",
            "api-resources.txt",
            "widget.yaml",
        ],
        "",
    );
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (0, mutated.as_str(), "")
    );
    // What is not that output is refused, naming the file and the line.
    let (code, stdout, stderr) = sartor(
        &dir,
        &[
            "mutate",
            "-m",
            "m.yaml",
            "--api-resources",
            "broken.txt",
            "widget.yaml",
        ],
        "",
    );
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (
            2,
            "",
            "error: broken.txt: not `kubectl api-resources` output: line 1: expected the header of `kubectl api-resources` (with APIVERSION, NAMESPACED and KIND columns); run it without --no-headers\n"
        )
    );
    // lint lists it among its findings.
    let (code, _, stderr) = sartor(
        &dir,
        &["lint", "--api-resources", "broken.txt", "m.yaml"],
        "",
    );
    assert_eq!(
        (code, stderr.as_str()),
        (
            2,
            "error: broken.txt: not `kubectl api-resources` output: line 1: expected the header of `kubectl api-resources` (with APIVERSION, NAMESPACED and KIND columns); run it without --no-headers\n"
        )
    );
}

#[test]
fn lint_refuses_a_mutator_name_the_api_server_refuses_in_its_words() {
    let dir = scratch(
        "invalid-name",
        &[("m.yaml", &WIDGET_SIZE.replace("widget-size", "widgetSize"))],
    );
    let (code, stdout, stderr) = sartor(&dir, &["lint", "m.yaml"], "");
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (
            2,
            "",
            "error: m.yaml: document 1: Assign widgetSize: metadata.name: Invalid value: \"widgetSize\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')\n"
        )
    );
}

#[test]
fn never_applies_is_a_warning_for_a_mutator_gatekeeper_installs() {
    // As in a published Gatekeeper example: scope Cluster on Pods.
    let sartors = "apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata:
  name: fsgroup
spec:
  applyTo:
  - groups: ['']
    kinds: [Pod]
    versions: [v1]
    operations: [CREATE]
  match:
    scope: Cluster
  location: spec.securityContext.fsGroup
  parameters:
    assign:
      value: 1000
";
    let gatekeepers = sartors.replace("mutations.sartor.dev/v1", "mutations.gatekeeper.sh/v1");
    let dir = scratch(
        "never-applies-gk",
        &[("sartor.yaml", sartors), ("gatekeeper.yaml", &gatekeepers)],
    );
    let (code, _, stderr) = sartor(&dir, &["lint", "sartor.yaml"], "");
    assert_eq!(
        (code, stderr.as_str()),
        (
            2,
            "error: sartor.yaml: document 1: Assign fsgroup: never-applies: its scope is Cluster but the kinds it applies to (v1 Pod are namespaced), so it matches no object in a cluster\n"
        )
    );
    let (code, _, stderr) = sartor(&dir, &["lint", "gatekeeper.yaml"], "");
    assert_eq!(
        (code, stderr.as_str()),
        (
            0,
            "warning: gatekeeper.yaml: document 1: Assign fsgroup: never-applies: its scope is Cluster but the kinds it applies to (v1 Pod are namespaced), so it matches no object in a cluster; a warning, not an error, because Gatekeeper v3.23.1 installs it as it is (its apiVersion is mutations.gatekeeper.sh)\n1 mutators, no errors, 1 warning\n"
        )
    );
    let (code, _, _) = sartor(&dir, &["lint", "--strict", "gatekeeper.yaml"], "");
    assert_eq!(code, 2);
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
    let (code, stdout, stderr) = sartor(&dir, &["test", "s.sartor-test.yaml"], "");
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (
            0,
            "PASS s.sartor-test.yaml: in the suite's namespace, neither pulled nor labelled\nPASS s.sartor-test.yaml: in the case's namespace, labelled\n2 passed, 0 failed\n",
            ""
        )
    );
}

#[test]
fn a_cluster_scoped_object_with_a_namespace_is_mutated_as_cluster_scoped() {
    // The API server clears the field before a webhook sees it; the object
    // is printed as written.
    let role = "apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: reader
  namespace: shop
rules: []
";
    let mutators = "apiVersion: mutations.sartor.dev/v1
kind: AssignMetadata
metadata: {name: namespaced-only}
spec:
  match: {scope: Namespaced}
  location: metadata.labels.namespaced
  parameters: {assign: {value: 'yes'}}
---
apiVersion: mutations.sartor.dev/v1
kind: AssignMetadata
metadata: {name: cluster-only}
spec:
  match: {scope: Cluster}
  location: metadata.labels.cluster
  parameters: {assign: {value: 'yes'}}
";
    let dir = scratch(
        "stray-namespace",
        &[("role.yaml", role), ("m.yaml", mutators)],
    );
    let (code, stdout, stderr) = sartor(&dir, &["mutate", "-m", "m.yaml", "role.yaml"], "");
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (
            0,
            "apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  labels:
    cluster: \"yes\"
  name: reader
  namespace: shop
rules: []
",
            ""
        )
    );
}

#[test]
fn the_namespace_of_n_is_checked_and_names_objects_without_one() {
    let pod = std::fs::read_to_string(namespace_less("pod.yaml")).unwrap();
    let placed = pod.replace("  name: web\n", "  name: web\n  namespace: default\n");
    let dir = scratch(
        "n-checked",
        &[("pod.yaml", pod.as_str()), ("placed.yaml", placed.as_str())],
    );
    let mutators = namespace_less("mutators.yaml");
    let (code, stdout, stderr) = sartor(
        &dir,
        &["mutate", "-n", "Bad_NS", "-m", &mutators, "pod.yaml"],
        "",
    );
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (
            2,
            "",
            "error: -n/--namespace: Invalid value: \"Bad_NS\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')\n"
        )
    );
    // The namespace-less Pod is `default/web`, as the placed one.
    let (code, _, stderr) = sartor(
        &dir,
        &["mutate", "-m", &mutators, "pod.yaml", "placed.yaml"],
        "",
    );
    assert_eq!(
        (code, stderr.as_str()),
        (
            0,
            "warning: placed.yaml: document 1: v1 Pod default/web is also at pod.yaml: document 1 (a kustomize patch? preview the built overlay: kustomize build DIR | sartor mutate)\n"
        )
    );
}

#[test]
fn export_map_prints_the_policy_and_names_what_it_leaves_out() {
    let dir = repo_root();
    let (code, stdout, stderr) = sartor(&dir, &["export", "map", "examples/mutators"], "");
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        stderr,
        "Assign/read-only-root: not exported: its pathTest spec.containers[name notin (istio-proxy)].securityContext.readOnlyRootFilesystem tests elements a glob or notin selects, which is not exported yet\n\
         9 of 10 mutators exported\n"
    );
    let documents: Vec<serde_json::Value> = stdout
        .split("---\n")
        .map(|document| serde_yaml::from_str(document).unwrap())
        .collect();
    let kinds: Vec<&str> = documents
        .iter()
        .map(|d| d["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"]
    );
    assert_eq!(
        documents[0]["metadata"]["annotations"]["mutations.sartor.dev/exported"],
        "Assign/always-pull-deployments, Assign/always-pull-pods, Assign/log-sidecar, Assign/no-host-ports, Assign/seccomp-runtime-default, AssignImage/pin-registry, AssignMetadata/owner-from-namespace, AssignMetadata/team-from-namespace, ModifySet/no-debug-flag"
    );
    // Every mutator exported: 0; invalid input: 2, saying why.
    let (code, _, _) = sartor(
        &dir,
        &["export", "map", "examples/mutators/pin-registry.yaml"],
        "",
    );
    assert_eq!(code, 0);
    let scratch_dir = scratch(
        "export-invalid",
        &[
            (
                "m.yaml",
                "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {name: a}\n",
            ),
            (
                "none.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
            ),
        ],
    );
    let (code, stdout, stderr) = sartor(&scratch_dir, &["export", "map", "m.yaml"], "");
    assert_eq!((code, stdout.as_str()), (2, ""), "{stderr}");
    assert!(stderr.starts_with("error: m.yaml: document 1:"), "{stderr}");
    let (code, stdout, stderr) = sartor(&scratch_dir, &["export", "map", "none.yaml"], "");
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (
            2,
            "",
            "error: no mutators in none.yaml (documents whose apiVersion is mutations.sartor.dev or mutations.gatekeeper.sh)\n"
        )
    );
}

#[test]
fn audit_rbac_prints_the_role_and_names_a_kind_it_cannot_resolve() {
    let widgets = "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {name: size}\nspec:\n  applyTo: [{groups: [example.com], versions: [v1], kinds: [Widget]}]\n  location: spec.size\n  parameters: {assign: {value: 3}}\n";
    let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\nspec:\n  group: example.com\n  scope: Namespaced\n  names: {kind: Widget, plural: widgets}\n  versions: []\n";
    let dir = scratch(
        "audit-rbac",
        &[("m.yaml", widgets), ("crds/widget.yaml", crd)],
    );
    let (code, stdout, stderr) = sartor(dir.as_ref(), &["audit", "rbac", "-m", "m.yaml"], "");
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (
            2,
            "",
            "error: m.yaml: document 1: Widget.example.com/*, which Assign/size applies to, has no resource (plural) known offline: give its CRD among the mutator paths, or `kubectl api-resources` output with --api-resources\n"
        )
    );
    // With the CRD, Widgets are granted, and in the chart's values too.
    let (code, stdout, stderr) = sartor(
        dir.as_ref(),
        &[
            "audit",
            "rbac",
            "-m",
            "m.yaml",
            "-m",
            "crds",
            "-o",
            "helm-values",
        ],
        "",
    );
    assert_eq!((code, stderr.as_str()), (0, ""));
    let values: serde_json::Value = serde_yaml::from_str(&stdout).unwrap();
    assert_eq!(
        values,
        serde_json::json!({"audit": {"rules": [
            {"apiGroups": [""], "resources": ["namespaces"]},
            {"apiGroups": ["example.com"], "resources": ["widgets"]},
        ]}})
    );
}

#[test]
fn lint_export_map_warns_of_what_export_leaves_out() {
    let dir = repo_root();
    let (code, stdout, stderr) = sartor(&dir, &["lint", "--export-map", "examples/mutators"], "");
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (
            0,
            "",
            "warning: examples/mutators/read-only-root.yaml: document 1: Assign read-only-root: not exported as a MutatingAdmissionPolicy: its pathTest spec.containers[name notin (istio-proxy)].securityContext.readOnlyRootFilesystem tests elements a glob or notin selects, which is not exported yet\n\
             10 mutators, no errors, 1 warning\n"
        )
    );
    // Without the flag, no export findings.
    let (code, _, stderr) = sartor(&dir, &["lint", "examples/mutators"], "");
    assert_eq!((code, stderr.as_str()), (0, "10 mutators, no problems\n"));
}

/// A reader that goes away (`sartor crds | head -1`) is an error said on
/// stderr, not a panic. The CRDs (77 kB) do not fit in a pipe's 64 KiB
/// buffer, so a write waits for the reader, which is gone.
#[test]
fn a_closed_stdout_is_an_error_not_a_panic() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sartor"))
        .arg("crds")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "error: writing to stdout: Broken pipe (os error 32)\n"
    );
    assert_eq!(output.status.code(), Some(2));
}
