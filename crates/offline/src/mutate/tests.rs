//! `sartor mutate` on files and standard input, as the binary runs it in a
//! directory: the objects, explanations or diffs on `out`, the problems on
//! `err`, and how it ends.

use std::path::Path;

use super::{MutateArgs, run};
use crate::Exit;
use crate::lint::tests::run_lint;
use crate::test::tests::run_test;
use crate::testing::{
    MUTATED_POD, POD, PROD_ONLY, PULL, Ran, WIDGET_SIZE, fixture, namespace_less, parse,
    pull_every_operation, rebase, repo_root, repository, run_in, scratch,
};

/// `sartor mutate ARGS` run in `dir`, with `stdin`.
fn run_mutate(dir: &Path, args: &[&str], stdin: &str) -> Ran {
    let mut args: MutateArgs = parse(args);
    rebase(dir, &mut args.mutators);
    rebase(dir, &mut args.namespaces);
    rebase(dir, &mut args.api_resources);
    rebase(dir, &mut args.provider_answers);
    rebase(dir, &mut args.inputs);
    run_in(dir, stdin, |io| run(&args, io))
}

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
    let Ran { exit, out, err } = run_mutate(&dir, &["--mutators", "mutators", "objects"], "");
    assert_eq!((exit, err.as_str()), (Exit::Ok, ""));
    assert_eq!(
        out,
        format!("{MUTATED_POD}---\n{}", MUTATED_POD.replace("web", "api"))
    );
}

#[test]
fn reads_stdin_and_prints_json() {
    let dir = scratch("json", &[("pull.yaml", PULL)]);
    let Ran { exit, out, .. } = run_mutate(&dir, &["-m", "pull.yaml", "-o", "json"], POD);
    assert_eq!(exit, Exit::Ok);
    let one: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(one["spec"]["containers"][0]["imagePullPolicy"], "Always");
    assert_eq!(one["kind"], "Pod");
    // Several objects: a v1 List.
    let two = format!("{POD}---\n{POD}");
    let Ran { exit, out, .. } = run_mutate(&dir, &["-m", "pull.yaml", "-o", "json", "-"], &two);
    assert_eq!(exit, Exit::Ok);
    let list: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(list["kind"], "List");
    assert_eq!(list["apiVersion"], "v1");
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
}

#[test]
fn invalid_mutators_are_refused_naming_file_document_and_field() {
    let broken = PULL.replace(
        "'spec.containers[name: *].imagePullPolicy'",
        "'spec.containers[name: *'",
    );
    let dir = scratch("invalid", &[("pull.yaml", &broken), ("pod.yaml", POD)]);
    let Ran { exit, out, err } = run_mutate(&dir, &["-m", "pull.yaml", "pod.yaml"], "");
    assert_eq!((exit, out.as_str()), (Exit::InvalidInput, ""));
    assert_eq!(
        err,
        "error: pull.yaml: document 1: Assign pull: spec.location: invalid location \"spec.containers[name: *\": expected ']' at 23, found end of location\n  spec.containers[name: *\n                         ^\n"
    );
    let Ran { exit, err, .. } = run_mutate(&dir, &["-m", "missing.yaml", "pod.yaml"], "");
    assert_eq!(exit, Exit::InvalidInput);
    assert!(
        err.starts_with("error: missing.yaml: cannot read: "),
        "{err}"
    );
}

#[test]
fn schema_conflicts_are_refused() {
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
    let Ran { exit, out, err } = run_mutate(&dir, &["-m", "m.yaml", "pod.yaml"], "");
    assert_eq!((exit, out.as_str()), (Exit::InvalidInput, ""));
    assert_eq!(
        err,
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
    let Ran { exit, out, err } = run_mutate(&dir, &["-m", "tier.yaml", "pod.yaml"], "");
    assert_eq!((exit, out.as_str()), (Exit::MutationFailed, ""));
    assert_eq!(
        err,
        "error: pod.yaml: document 1: v1 Pod shop/web: AssignMetadata tier: its namespaceSelector needs the labels of Namespace \"shop\", which was not provided; pass the Namespace object with --namespaces\n"
    );
    let Ran { exit, out, err } = run_mutate(
        &dir,
        &["-m", "tier.yaml", "--namespaces", "ns.yaml", "pod.yaml"],
        "",
    );
    assert_eq!((exit, err.as_str()), (Exit::Ok, ""));
    assert!(out.contains("labels:\n    tier: gold\n"), "{out}");
    // A Namespace among the inputs counts too.
    let Ran { exit, out, .. } = run_mutate(&dir, &["-m", "tier.yaml", "ns.yaml", "pod.yaml"], "");
    assert_eq!(exit, Exit::Ok);
    assert_eq!(out.matches("tier: gold").count(), 2);
}

/// `--namespaces -` reads the Namespaces from standard input, as the
/// objects' `-` does.
#[test]
fn namespaces_are_read_from_stdin_at_a_dash() {
    let namespace =
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {env: prod}}\n";
    let dir = scratch(
        "namespaces-stdin",
        &[("tier.yaml", PROD_ONLY), ("pod.yaml", POD)],
    );
    let Ran { exit, out, err } = run_mutate(
        &dir,
        &["-m", "tier.yaml", "--namespaces", "-", "pod.yaml"],
        namespace,
    );
    assert_eq!((exit, err.as_str()), (Exit::Ok, ""));
    assert!(out.contains("labels:\n    tier: gold\n"), "{out}");
}

#[test]
fn update_applies_only_update_mutators() {
    let dir = scratch("update", &[("m.yaml", PULL), ("pod.yaml", POD)]);
    let Ran { exit, out, .. } = run_mutate(
        &dir,
        &["-m", "m.yaml", "--operation", "UPDATE", "pod.yaml"],
        "",
    );
    assert_eq!(exit, Exit::Ok);
    assert!(!out.contains("imagePullPolicy"), "{out}");
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
    let Ran { exit, out, err } = run_mutate(&dir, &["-m", "m.yaml", "--explain", "o.yaml"], "");
    assert_eq!((exit, err.as_str()), (Exit::Ok, ""));
    assert_eq!(
        out,
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
    let Ran { exit, out, err } = run_mutate(&dir, &["-m", &mutator, "o.yaml"], "");
    // SyncSet is mutated: no CRD says it is cluster-scoped, and none is needed
    // here (the mutator has no namespace criteria), but sartor says so.
    assert_eq!(
        (exit, err.as_str()),
        (
            Exit::Ok,
            "warning: o.yaml: document 4: the scope of kind SyncSet.syncset.gatekeeper.sh is unknown (not built in, no CRD among the inputs, not in --api-resources): objects of it without metadata.namespace are mutated as cluster-scoped\n"
        )
    );
    assert_eq!(
        out,
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
    let Ran { exit, out, err } = run_mutate(&dir, &["-m", &mutator, "--explain", "o.yaml"], "");
    assert_eq!(exit, Exit::Ok);
    assert!(err.starts_with("warning: o.yaml: document 4: the scope of kind SyncSet"));
    assert_eq!(
        out,
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
    let Ran { exit, out, err } = run_mutate(&dir, &["-m", "pull.yaml", "--diff", "pod.yaml"], "");
    assert_eq!((exit, err.as_str()), (Exit::Ok, ""));
    assert_eq!(
        out,
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
    let Ran { exit, out, .. } = run_mutate(
        &dir,
        &["-m", "pull.yaml", "--diff", "-"],
        "apiVersion: v1\nkind: Secret\n",
    );
    assert_eq!((exit, out.as_str()), (Exit::Ok, ""));
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
    let Ran { exit, out, err } = run_mutate(
        &root,
        &["--mutators", "examples/mutators", "examples/objects"],
        "",
    );
    assert_eq!((exit, err.as_str()), (Exit::Ok, ""));
    assert_eq!(out, shown);
    // The examples' Pod mutators follow lint's breaks-update advice (CREATE
    // only): the set lints clean.
    let Ran { exit, err, .. } = run_lint(&root, &["--mutators", "examples/mutators"]);
    assert_eq!(
        (exit, err.as_str()),
        (Exit::Ok, "10 mutators, no problems\n")
    );
}

#[test]
fn the_gatekeeper_examples_mutate_exactly_as_their_sartor_twins() {
    let root = repo_root();
    let mutate = |mutators: &[&str]| {
        let mut args: Vec<&str> = Vec::new();
        for m in mutators {
            args.extend(["--mutators", m]);
        }
        args.extend(["--namespaces", "examples/objects/namespace.yaml"]);
        args.push("examples/objects/pod.yaml");
        run_mutate(&root, &args, "")
    };
    let gatekeeper = mutate(&["examples/gatekeeper"]);
    let sartor_twins = mutate(&[
        "examples/mutators/owner-label.yaml",
        "examples/mutators/always-pull.yaml",
    ]);
    assert_eq!((gatekeeper.exit, gatekeeper.err.as_str()), (Exit::Ok, ""));
    assert_eq!(gatekeeper, sartor_twins);
    assert!(
        gatekeeper.out.contains("imagePullPolicy: Always"),
        "{}",
        gatekeeper.out
    );
    assert!(
        gatekeeper.out.contains("owner: prod-shop"),
        "{}",
        gatekeeper.out
    );
}

#[test]
fn exit_code_says_whether_anything_would_change() {
    let root = repo_root();
    let mutators = ["--mutators", "examples/mutators"];
    let args = |extra: &[&'static str]| -> Vec<&'static str> {
        mutators
            .iter()
            .copied()
            .chain(extra.iter().copied())
            .collect()
    };
    // The example Pod is not mutated yet: exit 1, with the diff.
    let Ran { exit, out, err } = run_mutate(
        &root,
        &args(&[
            "--diff",
            "--exit-code",
            "examples/objects/pod.yaml",
            "examples/objects/namespace.yaml",
        ]),
        "",
    );
    assert_eq!((exit, err.as_str()), (Exit::Changed, ""));
    assert!(out.contains("+      readOnlyRootFilesystem: true"), "{out}");
    // Its expected output already is: exit 0, and no diff.
    let Ran { exit, out, err } = run_mutate(
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
    assert_eq!((exit, out.as_str(), err.as_str()), (Exit::Ok, "", ""));
    // Without the flag a change is no failure.
    let Ran { exit, .. } = run_mutate(
        &root,
        &args(&[
            "--diff",
            "examples/objects/pod.yaml",
            "examples/objects/namespace.yaml",
        ]),
        "",
    );
    assert_eq!(exit, Exit::Ok);
}

#[test]
fn mutate_finds_the_mutators_in_a_repository() {
    let dir = repository("repo-mutate");
    let want = "apiVersion: v1\nkind: Namespace\nmetadata:\n  labels:\n    env: prod\n    tier: gold\n  name: shop\n---\n\
                apiVersion: v1\nkind: Pod\nmetadata:\n  labels:\n    tier: gold\n  name: web\n  namespace: shop\n\
                spec:\n  containers:\n  - image: nginx\n    imagePullPolicy: Always\n    name: app\n";
    let Ran { exit, out, err } = run_mutate(&dir, &["repo"], "");
    assert_eq!((exit, out.as_str(), err.as_str()), (Exit::Ok, want, ""));
    // The same from stdin, as `kustomize build | sartor mutate` would.
    let built = std::fs::read_to_string(dir.join("built.yaml")).unwrap();
    let Ran { exit, out, err } = run_mutate(&dir, &[], &built);
    assert_eq!((exit, out.as_str(), err.as_str()), (Exit::Ok, want, ""));
    // No mutator anywhere: said, exit 2.
    let Ran { exit, out, err } = run_mutate(&dir, &["repo/shop"], "");
    assert_eq!(
        (exit, out.as_str(), err.as_str()),
        (
            Exit::InvalidInput,
            "",
            "error: no mutators: give --mutators, or include mutator documents (apiVersion mutations.sartor.dev/v1 or mutations.gatekeeper.sh/...) among the inputs\n"
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
    let Ran { exit, out, err } = run_mutate(&dir, &["--expand", "repo"], "");
    assert_eq!((exit, err.as_str()), (Exit::Ok, ""));
    assert_eq!(
        out,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  labels:\n    reviewed: done\n  name: web\n  namespace: shop\n\
         spec:\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      - image: nginx\n        name: app\n\
         ---\n\
         apiVersion: v1\nkind: Pod\nmetadata:\n  labels:\n    app: web\n  name: web-pod\n  namespace: shop\n  ownerReferences:\n  - apiVersion: apps/v1\n    kind: Deployment\n    name: web\n\
         spec:\n  containers:\n  - image: nginx\n    imagePullPolicy: Always\n    name: app\n"
    );
    // --explain names the generated Pod and its template.
    let Ran { exit, out, .. } = run_mutate(&dir, &["--expand", "--explain", "repo"], "");
    assert_eq!(exit, Exit::Ok);
    assert_eq!(
        out,
        "repo/web.yaml: document 1 (apps/v1 Deployment shop/web):\n  pass 1  AssignMetadata reviewed  metadata.labels.reviewed\n\
         repo/web.yaml: document 1 > v1 Pod shop/web-pod (generated by expand-deployments):\n  pass 1  Assign pull  spec.containers[name: app].imagePullPolicy\n"
    );
    // Without templates nothing is generated; a lint of the repository
    // checks the template too.
    let Ran { exit, out, .. } = run_mutate(
        &dir,
        &[
            "--expand",
            "--no-builtin-templates",
            "-m",
            "repo/pull.yaml",
            "repo/web.yaml",
        ],
        "",
    );
    assert_eq!(exit, Exit::Ok);
    assert!(!out.contains("kind: Pod"), "{out}");
    std::fs::write(
        dir.join("repo/template.yaml"),
        template.replace("  templateSource: \"spec.template\"\n", ""),
    )
    .unwrap();
    // (PULL for CREATE alone again, as lint's breaks-update asks.)
    std::fs::write(dir.join("repo/pull.yaml"), PULL).unwrap();
    let Ran { exit, err, .. } = run_lint(&dir, &["repo"]);
    assert_eq!(
        (exit, err.as_str()),
        (
            Exit::InvalidInput,
            "error: repo/template.yaml: document 1: ExpansionTemplate expand-deployments: spec.templateSource: must be set\n"
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
    let Ran { exit, out, err } = run_mutate(&dir, &["--expand", "pull.yaml", "cronjob.yaml"], "");
    assert_eq!((exit, err.as_str()), (Exit::Ok, ""));
    assert_eq!(
        out,
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
    let Ran { exit, out, err } = run_mutate(&dir, &["-m", "policy", "app", "app/pod.yaml"], "");
    assert_eq!(exit, Exit::Ok);
    assert_eq!(out.matches("kind: Pod").count(), 2, "{out}");
    assert_eq!(
        err,
        "warning: app/renovate.json: skipped what is not a Kubernetes object: document 1: apiVersion not set, kind not set (--strict makes it an error)\n\
         warning: app/values.yaml: skipped what is not a Kubernetes object: document 1: apiVersion not set, kind not set (--strict makes it an error)\n\
         warning: app/pod.yaml: document 1: v1 Pod shop/web is also at app/patch.yaml: document 1 (a kustomize patch? preview the built overlay: kustomize build DIR | sartor mutate)\n"
    );
    let Ran { exit, out, err } = run_mutate(&dir, &["--strict", "-m", "policy", "app"], "");
    assert_eq!(
        (exit, out.as_str(), err.as_str()),
        (
            Exit::InvalidInput,
            "",
            "error: app/renovate.json: document 1: not a Kubernetes object: apiVersion not set, kind not set\n\
             error: app/values.yaml: document 1: not a Kubernetes object: apiVersion not set, kind not set\n"
        )
    );
    let Ran { exit, err, .. } = run_lint(&dir, &["policy", "app"]);
    assert_eq!(
        (exit, err.as_str()),
        (
            Exit::Ok,
            "1 mutators, no problems (5 other documents skipped)\n"
        )
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
    let Ran { exit, err, .. } = run_lint(&dir, &["policy"]);
    assert_eq!(
        (exit, err.as_str()),
        (
            Exit::InvalidInput,
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
        let Ran { exit, out, err } = run_mutate(&dir, &["-m", "pull.yaml", "input.yaml"], "");
        assert_eq!(
            (exit, out.as_str(), err.as_str()),
            (
                Exit::InvalidInput,
                "",
                format!("error: input.yaml: {problem}\n").as_str()
            ),
            "{name}, from a file"
        );
        let Ran { exit, out, err } = run_mutate(&dir, &["-m", "pull.yaml", "-"], text);
        assert_eq!(
            (exit, out.as_str(), err.as_str()),
            (
                Exit::InvalidInput,
                "",
                format!("error: <stdin>: {problem}\n").as_str()
            ),
            "{name}, from stdin"
        );
    }
    // lint: a mutator file named with a typo is not a document to skip.
    let dir = scratch(
        "not-object-lint",
        &[("m.yaml", "kind: Assign\nmetadata: {name: a}\n")],
    );
    let Ran { exit, err, .. } = run_lint(&dir, &["--mutators", "m.yaml"]);
    assert_eq!(
        (exit, err.as_str()),
        (
            Exit::InvalidInput,
            "error: m.yaml: document 1: not a Kubernetes object: apiVersion not set\n"
        )
    );
    // Empty and comment-only documents are nothing, as kubectl has them.
    let dir = scratch("not-object", &[("pull.yaml", PULL)]);
    let text = format!("---\n# only a comment\n---\n{POD}---\n");
    let Ran { exit, out, err } = run_mutate(&dir, &["-m", "pull.yaml", "-"], &text);
    assert_eq!((exit, err.as_str()), (Exit::Ok, ""));
    assert_eq!(out.matches("kind: Pod").count(), 1, "{out}");
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
    let Ran { exit, out, .. } = run_test(&dir, &["."]);
    assert_eq!(exit, Exit::MutationFailed, "{out}");
    assert!(
        out.contains("input.yaml: document 1: not a Kubernetes object: apiVersion not set"),
        "{out}"
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
    let Ran { exit, out, err } = run_mutate(&dir, &["-m", "m.yaml", "pod.yaml"], "");
    assert_eq!((exit, err.as_str()), (Exit::Ok, ""));
    assert!(out.contains("    inject: \"yes\"\n"), "{out}");
}

#[test]
fn a_whole_number_written_as_a_float_is_previewed_as_the_cluster_stores_it() {
    // kubectl sends `2e3` and `1.0` as `2000` and `1`, and the API server
    // stores the mutator and the Pod so: the preview writes what the
    // webhook would.
    let assign = "apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata: {name: priority}
spec:
  applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}]
  location: spec.priority
  parameters: {assign: {value: 2e3}}
";
    let pod = POD.replace(
        "image: nginx}",
        "image: nginx}]\n  overhead: {cpu: 1.0}\n  x: [1.5",
    );
    let dir = scratch("numbers", &[("m.yaml", assign), ("pod.yaml", &pod)]);
    let Ran { exit, out, err } = run_mutate(&dir, &["-m", "m.yaml", "pod.yaml"], "");
    assert_eq!((exit, err.as_str()), (Exit::Ok, ""));
    assert_eq!(
        out,
        "apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: shop
spec:
  containers:
  - image: nginx
    name: app
  overhead:
    cpu: 1
  priority: 2000
  x:
  - 1.5
"
    );
}

/// Gatekeeper's external data examples (its docs' Provider, Assign and
/// AssignMetadata) load unchanged and mutate with recorded answers; without
/// them, the keys asked are named.
#[test]
fn external_data_uses_recorded_answers_and_names_what_is_missing() {
    let root = repo_root();
    let Ran { exit, out, err } = run_mutate(
        &root,
        &[
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
    assert_eq!((exit, err.as_str()), (Exit::Ok, ""));
    assert_eq!(
        out,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  annotations:\n    owner: admin@example.com\n  \
         name: web\n  namespace: shop\nspec:\n  containers:\n  - image: nginx:v1.2.3\n    name: app\n"
    );
    let Ran { exit, out, err } = run_mutate(
        &root,
        &[
            "--mutators",
            "examples/external-data/mutators",
            "examples/external-data/pod.yaml",
        ],
        "",
    );
    assert_eq!((exit, out.as_str()), (Exit::MutationFailed, ""));
    assert_eq!(
        err,
        "error: examples/external-data/pod.yaml: document 1: v1 Pod shop/web: external data has no \
         recorded answer for provider my-provider (\"\", \"nginx\"): record them with \
         --provider-answers (or a test case's providers), or pass --call-providers\n"
    );
    let Ran { exit, err, .. } = run_lint(&root, &["--mutators", "examples/external-data/mutators"]);
    assert_eq!(
        (exit, err.as_str()),
        (Exit::Ok, "2 mutators, no problems\n")
    );

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
    let Ran { exit, err, .. } = run_lint(&dir, &["--mutators", "m"]);
    assert_eq!(
        (exit, err.as_str()),
        (
            Exit::Ok,
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
    let Ran { exit, out, err } = run_mutate(
        &dir,
        &[
            "--mutators",
            "mutators",
            "--call-providers",
            "-o",
            "json",
            "pod.json",
        ],
        "",
    );
    assert_eq!((exit, err.as_str()), (Exit::Ok, ""));
    let mutated: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        mutated["spec"]["containers"][0]["image"],
        sartor_tests::provider::digest("nginx:1.27")
    );
    assert_eq!(provider.seen().len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_namespace_less_pod_is_mutated_as_namespaced_in_the_default_namespace() {
    let dir = scratch("ns-less-pod", &[]);
    let mutators = namespace_less("mutators.yaml");
    let pod = namespace_less("pod.yaml");
    let Ran { exit, out, err } = run_mutate(&dir, &["-m", &mutators, &pod], "");
    assert_eq!((exit, err.as_str()), (Exit::Ok, ""));
    assert_eq!(
        out,
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
    let Ran { exit, out, err } =
        run_mutate(&dir, &["-n", "kube-system", "-m", &mutators, &pod], "");
    assert_eq!((exit, err.as_str()), (Exit::Ok, ""));
    assert_eq!(
        out,
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
    let Ran { exit, out, err } = run_mutate(
        &dir,
        &[
            "--expand",
            "-m",
            &namespace_less("mutators.yaml"),
            &namespace_less("deployment.yaml"),
        ],
        "",
    );
    assert_eq!((exit, err.as_str()), (Exit::Ok, ""));
    assert_eq!(
        out,
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
    let Ran { exit, out, err } = run_mutate(
        &dir,
        &[
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
    assert_eq!((exit, err.as_str()), (Exit::Ok, ""));
    assert_eq!(
        out,
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
    let Ran { exit, out, err } = run_mutate(&dir, &["-m", "m.yaml", "widget.yaml"], "");
    assert_eq!(
        (exit, out.as_str(), err.as_str()),
        (
            Exit::Ok,
            WIDGET,
            "warning: widget.yaml: document 1: the scope of kind Widget.example.com is unknown (not built in, no CRD among the inputs, not in --api-resources): objects of it without metadata.namespace are mutated as cluster-scoped\n"
        )
    );
    // Its CRD among the inputs (printed unchanged, as an object).
    let Ran { exit, out, err } = run_mutate(&dir, &["-m", "m.yaml", "repo"], "");
    assert_eq!((exit, err.as_str()), (Exit::Ok, ""));
    assert!(out.ends_with(&format!("---\n{mutated}")), "{out}");
    // `kubectl api-resources` output.
    let Ran { exit, out, err } = run_mutate(
        &dir,
        &[
            "-m",
            "m.yaml",
            "--api-resources",
            "api-resources.txt",
            "widget.yaml",
        ],
        "",
    );
    assert_eq!(
        (exit, out.as_str(), err.as_str()),
        (Exit::Ok, mutated.as_str(), "")
    );
    // What is not that output is refused, naming the file and the line.
    let Ran { exit, out, err } = run_mutate(
        &dir,
        &[
            "-m",
            "m.yaml",
            "--api-resources",
            "broken.txt",
            "widget.yaml",
        ],
        "",
    );
    assert_eq!(
        (exit, out.as_str(), err.as_str()),
        (
            Exit::InvalidInput,
            "",
            "error: broken.txt: not `kubectl api-resources` output: line 1: expected the header of `kubectl api-resources` (with APIVERSION, NAMESPACED and KIND columns); run it without --no-headers\n"
        )
    );
    // lint lists it among its findings.
    let Ran { exit, err, .. } = run_lint(&dir, &["--api-resources", "broken.txt", "m.yaml"]);
    assert_eq!(
        (exit, err.as_str()),
        (
            Exit::InvalidInput,
            "error: broken.txt: not `kubectl api-resources` output: line 1: expected the header of `kubectl api-resources` (with APIVERSION, NAMESPACED and KIND columns); run it without --no-headers\n"
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
    let Ran { exit, out, err } = run_mutate(&dir, &["-m", "m.yaml", "role.yaml"], "");
    assert_eq!(
        (exit, out.as_str(), err.as_str()),
        (
            Exit::Ok,
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
    let Ran { exit, out, err } =
        run_mutate(&dir, &["-n", "Bad_NS", "-m", &mutators, "pod.yaml"], "");
    assert_eq!(
        (exit, out.as_str(), err.as_str()),
        (
            Exit::InvalidInput,
            "",
            "error: -n/--namespace: Invalid value: \"Bad_NS\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')\n"
        )
    );
    // The namespace-less Pod is `default/web`, as the placed one.
    let Ran { exit, err, .. } = run_mutate(&dir, &["-m", &mutators, "pod.yaml", "placed.yaml"], "");
    assert_eq!(
        (exit, err.as_str()),
        (
            Exit::Ok,
            "warning: placed.yaml: document 1: v1 Pod default/web is also at pod.yaml: document 1 (a kustomize patch? preview the built overlay: kustomize build DIR | sartor mutate)\n"
        )
    );
}

#[test]
fn suite_output_is_a_test_suite_of_what_was_previewed() {
    let namespace =
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {env: prod}}\n";
    let elsewhere = POD.replace("namespace: shop", "namespace: other");
    let dir = scratch(
        "suite-output",
        &[
            ("mutators/pull.yaml", PULL),
            ("mutators/tier.yaml", PROD_ONLY),
            (
                "objects.yaml",
                &format!("{namespace}---\n{POD}---\n{elsewhere}"),
            ),
        ],
    );
    let Ran { exit, out, err } =
        run_mutate(&dir, &["-m", "mutators", "-o", "suite", "objects.yaml"], "");
    // The Pod of an undescribed namespace fails, as without -o suite; its
    // case expects that error.
    let failure = "v1 Pod other/web: AssignMetadata tier: its namespaceSelector needs the labels of Namespace \"other\", which was not provided; pass the Namespace object with --namespaces";
    assert_eq!(
        (exit, err),
        (
            Exit::MutationFailed,
            format!("error: objects.yaml: document 3: {failure}\n")
        )
    );
    assert_eq!(
        out,
        format!(
            "\
# A sartor test suite written by `sartor mutate -o suite`: each case is an
# input object and what sartor mutate made of it. Paths are as sartor mutate
# was given them: save this file in the directory it ran in, with a name
# ending in .sartor-test.yaml, and run `sartor test` on it there.
mutators:
- mutators
- objects.yaml
namespaces:
- apiVersion: v1
  kind: Namespace
  metadata:
    labels:
      env: prod
    name: shop
namespace: default
cases:
- name: \"v1 Namespace shop (objects.yaml: document 1)\"
  operation: CREATE
  input:
    apiVersion: v1
    kind: Namespace
    metadata:
      labels:
        env: prod
      name: shop
  expected:
    apiVersion: v1
    kind: Namespace
    metadata:
      labels:
        env: prod
        tier: gold
      name: shop
- name: \"v1 Pod shop/web (objects.yaml: document 2)\"
  operation: CREATE
  input:
    apiVersion: v1
    kind: Pod
    metadata:
      name: web
      namespace: shop
    spec:
      containers:
      - image: nginx
        name: app
  expected:
    apiVersion: v1
    kind: Pod
    metadata:
      labels:
        tier: gold
      name: web
      namespace: shop
    spec:
      containers:
      - image: nginx
        imagePullPolicy: Always
        name: app
- name: \"v1 Pod other/web (objects.yaml: document 3)\"
  operation: CREATE
  input:
    apiVersion: v1
    kind: Pod
    metadata:
      name: web
      namespace: other
    spec:
      containers:
      - image: nginx
        name: app
  expectedError: \"{}\"
",
            failure.replace('"', "\\\"")
        )
    );
    // Kept as a suite beside the files, it passes.
    std::fs::write(dir.join("kept.sartor-test.yaml"), &out).unwrap();
    let Ran { exit, out, err } = run_test(&dir, &["kept.sartor-test.yaml"]);
    assert_eq!((exit, err.as_str()), (Exit::Ok, ""), "{out}");
    assert!(out.ends_with("3 passed, 0 failed\n"), "{out}");
}

#[test]
fn suite_output_refuses_what_a_suite_cannot_name() {
    let dir = scratch("suite-refusals", &[("pull.yaml", PULL), ("pod.yaml", POD)]);
    for (args, stdin, message) in [
        (
            &["-m", "pull.yaml", "-o", "suite", "--diff", "pod.yaml"][..],
            "",
            "-o suite writes the objects as a test suite; it cannot be combined with --diff or --explain",
        ),
        (
            &["-m", "-", "-o", "suite", "pod.yaml"][..],
            PULL,
            "-o suite names the mutators by path: a suite cannot name standard input; put the mutators, ExpansionTemplates and Providers in a file",
        ),
        (
            &["-o", "suite", "-"][..],
            &format!("{PULL}---\n{POD}"),
            "-o suite names the mutators by path: a suite cannot name standard input; put the mutators, ExpansionTemplates and Providers in a file",
        ),
        (
            &[
                "-m",
                "pull.yaml",
                "-o",
                "suite",
                "--expand",
                "--no-builtin-templates",
                "pod.yaml",
            ][..],
            "",
            "-o suite: a test suite always expands with the built-in templates; leave out --no-builtin-templates",
        ),
    ] {
        let ran = run_mutate(&dir, args, stdin);
        assert_eq!(
            ran,
            Ran {
                exit: Exit::InvalidInput,
                out: String::new(),
                err: format!("error: {message}\n"),
            },
            "{args:?}"
        );
    }
    // Objects on standard input are written inline.
    let Ran { exit, out, .. } = run_mutate(&dir, &["-m", "pull.yaml", "-o", "suite"], POD);
    assert_eq!(exit, Exit::Ok);
    assert!(
        out.contains("mutators:\n- pull.yaml\nnamespace: default\ncases:\n- name: \"v1 Pod shop/web (<stdin>: document 1)\"\n"),
        "{out}"
    );
}
