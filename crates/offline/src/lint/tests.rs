//! `sartor lint` on files, as the binary runs it in a directory: the whole
//! report on `err` (text) or `out` (JSON), and how it ends.

use std::path::Path;

use super::{LintArgs, run};
use crate::Exit;
use crate::testing::{
    PROD_ONLY, PULL, Ran, WIDGET_SIZE, parse, rebase, repo_root, repository, run_in, scratch,
};

/// `sartor lint ARGS` run in `dir`.
pub(crate) fn run_lint(dir: &Path, args: &[&str]) -> Ran {
    let mut args: LintArgs = parse(args);
    rebase(dir, &mut args.mutators);
    rebase(dir, &mut args.paths);
    rebase(dir, &mut args.api_resources);
    run_in(dir, "", |io| run(&args, io))
}

#[test]
fn lint_lists_every_problem_and_fails() {
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
    let Ran { exit, out, err } = run_lint(&dir, &["-m", "m"]);
    assert_eq!((exit, out.as_str()), (Exit::InvalidInput, ""));
    assert_eq!(
        err,
        "error: m/b.yaml: document 1: ConfigMap c: ConfigMap (v1) is not a mutator: expected Assign, AssignImage, AssignMetadata or ModifySet in mutations.sartor.dev/v1 or mutations.gatekeeper.sh/v1, v1beta1, v1alpha1\n\
         error: m/a.yaml: document 2: Assign broken: spec.location: Assign cannot change metadata; use AssignMetadata for labels and annotations\n"
    );
    let Ran { exit, out, .. } = run_lint(&dir, &["-m", "m", "-o", "json"]);
    assert_eq!(exit, Exit::InvalidInput);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        report,
        serde_json::json!({
            "mutators": 1,
            "skipped": 0,
            "errors": 2,
            "warnings": 0,
            "findings": [
                {"category": "load", "severity": "error", "file": "m/b.yaml", "document": 1, "item": null, "line": 1, "subject": "ConfigMap c",
                 "message": "ConfigMap (v1) is not a mutator: expected Assign, AssignImage, AssignMetadata or ModifySet in mutations.sartor.dev/v1 or mutations.gatekeeper.sh/v1, v1beta1, v1alpha1"},
                {"category": "compile", "severity": "error", "file": "m/a.yaml", "document": 2, "item": null, "line": 14, "subject": "Assign broken",
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
    let Ran { exit, out, err } = run_lint(&dir, &["-m", "m.yaml"]);
    assert_eq!((exit, out.as_str()), (Exit::InvalidInput, ""));
    assert_eq!(
        err,
        "error: m.yaml: document 2: Assign gold-priority: its condition on metadata.labels.tier reads what AssignMetadata tier writes (metadata.labels.tier) (v1 Pod CREATE and 1 more)\n"
    );
    let Ran { exit, out, .. } = run_lint(&dir, &["-m", "m.yaml", "-o", "json"]);
    assert_eq!(exit, Exit::InvalidInput);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&out).unwrap(),
        serde_json::json!({
            "mutators": 2,
            "skipped": 0,
            "errors": 1,
            "warnings": 0,
            "findings": [
                {"category": "conflict", "severity": "error", "file": "m.yaml", "document": 2, "item": null, "line": 9, "subject": "Assign gold-priority",
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
    let Ran { exit, out, err } = run_lint(&dir, &["-m", "m.yaml"]);
    assert_eq!(
        (exit, out.as_str(), err.as_str()),
        (Exit::Ok, "", "2 mutators, no problems\n")
    );
    let Ran { exit, out, .. } = run_lint(&dir, &["-m", "m.yaml", "-o", "json"]);
    assert_eq!(exit, Exit::Ok);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&out).unwrap(),
        serde_json::json!({"mutators": 2, "skipped": 0, "errors": 0, "warnings": 0, "findings": []})
    );
}

#[test]
fn lint_checks_the_mutators_of_a_repository_and_counts_the_rest() {
    let dir = repository("repo-lint");
    let Ran { exit, out, err } = run_lint(&dir, &["repo"]);
    assert_eq!(
        (exit, out.as_str(), err.as_str()),
        (
            Exit::Ok,
            "",
            "2 mutators, no problems (2 other documents skipped)\n"
        )
    );
    let Ran { exit, out, .. } = run_lint(&dir, &["-o", "json", "built.yaml"]);
    assert_eq!(exit, Exit::Ok);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&out).unwrap(),
        serde_json::json!({"mutators": 2, "skipped": 2, "errors": 0, "warnings": 0, "findings": []})
    );
    // A document in a mutation group that is not a valid mutator is an error.
    std::fs::write(
        dir.join("repo/policy/typo.yaml"),
        "apiVersion: mutations.sartor.dev/v1\nkind: Asign\nmetadata: {name: x}\n",
    )
    .unwrap();
    let Ran { exit, err, .. } = run_lint(&dir, &["repo"]);
    assert_eq!(
        (exit, err.as_str()),
        (
            Exit::InvalidInput,
            "error: repo/policy/typo.yaml: document 1: Asign x: Asign (mutations.sartor.dev/v1) is not a mutator: expected Assign, AssignImage, AssignMetadata or ModifySet in mutations.sartor.dev/v1 or mutations.gatekeeper.sh/v1, v1beta1, v1alpha1\n"
        )
    );
}

#[test]
fn the_example_repository_lints_clean() {
    let Ran { exit, out, err } = run_lint(&repo_root(), &["examples/repo"]);
    assert_eq!(
        (exit, out.as_str(), err.as_str()),
        (
            Exit::Ok,
            "",
            "2 mutators, no problems (5 other documents skipped)\n"
        )
    );
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
    let Ran { exit, out, err } = run_lint(&dir, &["m.yaml"]);
    assert_eq!(
        (exit, out.as_str(), err),
        (
            Exit::Ok,
            "",
            format!("{shadowed}2 mutators, no errors, 1 warning\n")
        )
    );
    let Ran { exit, .. } = run_lint(&dir, &["--strict", "m.yaml"]);
    assert_eq!(exit, Exit::InvalidInput);
    let Ran { exit, err, .. } = run_lint(&dir, &["--strict", "--allow", "shadowed", "m.yaml"]);
    assert_eq!(
        (exit, err.as_str()),
        (Exit::Ok, "2 mutators, no problems\n")
    );
    let Ran { exit, out, .. } = run_lint(&dir, &["-o", "json", "m.yaml"]);
    assert_eq!(exit, Exit::Ok);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&out).unwrap(),
        serde_json::json!({
            "mutators": 2, "skipped": 0, "errors": 0, "warnings": 1,
            "findings": [{
                "category": "shadowed", "severity": "warning",
                "file": "m.yaml", "document": 1, "item": null, "line": 1, "subject": "Assign a-pull",
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
    let Ran { exit, err, .. } = run_lint(&dir, &["never.yaml"]);
    assert_eq!(
        (exit, err.as_str()),
        (
            Exit::InvalidInput,
            "error: never.yaml: document 1: Assign c-never: never-applies: no kind in its applyTo (v1 Pod) is allowed by its match.kinds, so it applies to nothing\n"
        )
    );
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
    let Ran { exit, out, err } = run_lint(&repo_root(), &["-m", FIXTURE]);
    assert_eq!((exit, out.as_str()), (Exit::InvalidInput, ""));
    assert_eq!(err, lines(FIXTURE, &expected));

    // --allow leaves the category (or one class) out; errors stay.
    let Ran { exit, err, .. } = run_lint(&repo_root(), &["-m", FIXTURE, "--allow", "gatekeeper"]);
    assert_eq!((exit, err), (Exit::InvalidInput, lines(FIXTURE, &errors)));
    let Ran { err, .. } = run_lint(
        &repo_root(),
        &["-m", FIXTURE, "--allow", "big-integers,unknown-fields"],
    );
    assert!(!err.contains("big-integers") && !err.contains("unknown-fields"));
    assert_eq!(err.lines().count(), expected.len() - 2);

    // JSON names the category and the class.
    let Ran { out, .. } = run_lint(&repo_root(), &["-m", FIXTURE, "-o", "json"]);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
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
    let Ran { exit, err, .. } = run_lint(&dir, &["-m", "sartor.yaml"]);
    assert_eq!(
        (exit, err),
        (Exit::InvalidInput, lines("sartor.yaml", &errors))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn lint_refuses_a_mutator_name_the_api_server_refuses_in_its_words() {
    let dir = scratch(
        "invalid-name",
        &[("m.yaml", &WIDGET_SIZE.replace("widget-size", "widgetSize"))],
    );
    let Ran { exit, out, err } = run_lint(&dir, &["m.yaml"]);
    assert_eq!(
        (exit, out.as_str(), err.as_str()),
        (
            Exit::InvalidInput,
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
    let Ran { exit, err, .. } = run_lint(&dir, &["sartor.yaml"]);
    assert_eq!(
        (exit, err.as_str()),
        (
            Exit::InvalidInput,
            "error: sartor.yaml: document 1: Assign fsgroup: never-applies: its scope is Cluster but the kinds it applies to (v1 Pod are namespaced), so it matches no object in a cluster\n"
        )
    );
    let Ran { exit, err, .. } = run_lint(&dir, &["gatekeeper.yaml"]);
    assert_eq!(
        (exit, err.as_str()),
        (
            Exit::Ok,
            "warning: gatekeeper.yaml: document 1: Assign fsgroup: never-applies: its scope is Cluster but the kinds it applies to (v1 Pod are namespaced), so it matches no object in a cluster; a warning, not an error, because Gatekeeper v3.23.1 installs it as it is (its apiVersion is mutations.gatekeeper.sh)\n1 mutators, no errors, 1 warning\n"
        )
    );
    let Ran { exit, .. } = run_lint(&dir, &["--strict", "gatekeeper.yaml"]);
    assert_eq!(exit, Exit::InvalidInput);
}

#[test]
fn lint_export_map_warns_of_what_export_leaves_out() {
    let dir = repo_root();
    let external = "crates/api/tests/fixtures/gatekeeper-docs/externaldata-md-04.yaml";
    let Ran { exit, out, err } = run_lint(&dir, &["--export-map", external]);
    assert_eq!(
        (exit, out.as_str(), err.as_str()),
        (
            Exit::Ok,
            "",
            "warning: crates/api/tests/fixtures/gatekeeper-docs/externaldata-md-04.yaml: document 1: Assign mutate-images: not exported as a MutatingAdmissionPolicy: its value comes from externalData (the API server cannot ask a provider), which is not exported\n\
             1 mutators, no errors, 1 warning\n"
        )
    );
    // Every example exports.
    let Ran { exit, err, .. } = run_lint(&dir, &["--export-map", "examples/mutators"]);
    assert_eq!(
        (exit, err.as_str()),
        (Exit::Ok, "10 mutators, no problems\n")
    );
    // Without the flag, no export findings.
    let Ran { exit, err, .. } = run_lint(&dir, &["examples/mutators"]);
    assert_eq!(
        (exit, err.as_str()),
        (Exit::Ok, "10 mutators, no problems\n")
    );
}
