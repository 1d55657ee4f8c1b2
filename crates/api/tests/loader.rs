//! The loader: what it reads, how Gatekeeper's documents round-trip, and the
//! exact message of every problem it reports.

// Test code: a panic here is a failed test, not a crash on user input.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::path::{Path, PathBuf};

use sartor_api::{
    Input, LoadedMutator, MutatorKind, MutatorObject, SetOperation, load_mutators,
    mutator_from_document, read_documents_from_str,
};

fn fixtures() -> PathBuf {
    sartor_tests::manifest_dir(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Loads `text` as the file `file`, expecting no problem.
fn load_ok(file: &str, text: &str) -> Vec<LoadedMutator> {
    let (documents, errors) = read_documents_from_str(file, text, false);
    assert!(errors.is_empty(), "{errors:?}");
    documents
        .iter()
        .map(|d| mutator_from_document(d).unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

/// Every problem found loading `text` as `file`, rendered.
fn problems(file: &str, text: &str) -> Vec<String> {
    let (documents, errors) = read_documents_from_str(file, text, file.ends_with(".json"));
    let mut out: Vec<String> = errors.iter().map(ToString::to_string).collect();
    out.extend(
        documents
            .iter()
            .filter_map(|d| mutator_from_document(d).err())
            .map(|e| e.to_string()),
    );
    out
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

#[test]
fn documented_examples_load_and_round_trip() {
    let mut count = 0;
    for dir in ["gatekeeper-docs", "seed-001"] {
        for file in yaml_files(&fixtures().join(dir)) {
            let loaded = load_mutators(&[Input::Path(file.clone())]);
            assert!(
                loaded.errors.is_empty(),
                "{}: {:?}",
                file.display(),
                loaded.errors
            );
            assert!(!loaded.mutators.is_empty(), "{}", file.display());
            for mutator in loaded.mutators {
                let yaml = serde_yaml::to_string(&mutator.object.to_value().unwrap()).unwrap();
                let again = load_ok("round-trip.yaml", &yaml);
                assert_eq!(again.len(), 1);
                assert_eq!(again[0].api_version, "mutations.sartor.dev/v1");
                assert_eq!(
                    again[0].object,
                    mutator.object,
                    "{}:\n{yaml}",
                    file.display()
                );
                count += 1;
            }
        }
    }
    assert_eq!(count, 20);
}

#[test]
fn a_gatekeeper_document_reads_field_by_field() {
    let loaded = load_ok(
        "modifyset.yaml",
        r#"
apiVersion: mutations.gatekeeper.sh/v1
kind: ModifySet
metadata:
  name: remove-err-logging
spec:
  applyTo:
  - groups: [""]
    kinds: ["Pod"]
    versions: ["v1"]
    operations: ["CREATE", "*"]
  match:
    namespaces: ["kube-*", "*-prod"]
  location: "spec.containers[name: *].args"
  parameters:
    values:
      fromList: ["--alsologtostderr", {"a": 1}, 3]
"#,
    );
    let MutatorObject::ModifySet(set) = &loaded[0].object else {
        panic!("{loaded:?}")
    };
    assert_eq!(loaded[0].api_version, "mutations.gatekeeper.sh/v1");
    assert_eq!(set.metadata.name.as_deref(), Some("remove-err-logging"));
    // An omitted operation is merge, as the CRD defaults it.
    assert_eq!(set.spec.parameters.operation, SetOperation::Merge);
    assert_eq!(
        serde_json::to_value(&set.spec).unwrap(),
        serde_json::json!({
            "applyTo": [{"groups": [""], "kinds": ["Pod"], "versions": ["v1"], "operations": ["CREATE", "*"]}],
            "match": {"namespaces": ["kube-*", "*-prod"]},
            "location": "spec.containers[name: *].args",
            "parameters": {"operation": "merge", "values": {"fromList": ["--alsologtostderr", {"a": 1}, 3]}},
        })
    );
}

#[test]
fn directories_are_read_recursively_in_byte_order() {
    let loaded = load_mutators(&[Input::Path(fixtures().join("tree"))]);
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    let read: Vec<(String, String)> = loaded
        .mutators
        .iter()
        .map(|m| {
            let file = Path::new(&m.origin.file)
                .strip_prefix(fixtures().join("tree"))
                .unwrap()
                .display()
                .to_string();
            (
                format!("{file}: document {}", m.origin.document.unwrap()),
                m.object.to_string(),
            )
        })
        .collect();
    let expected = [
        ("10-first.yaml: document 1", "Assign default-priority"),
        ("9-second.yml: document 1", "ModifySet no-logtostderr"),
        (
            "nested/deeper/metadata.yaml: document 2",
            "AssignMetadata owner-label",
        ),
        ("nested/image.json: document 1", "AssignImage pin-registry"),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(read, expected);
}

#[test]
fn lists_are_read_as_their_items() {
    let loaded = load_ok(
        "kubectl-get.yaml",
        r#"
apiVersion: v1
kind: List
items:
- apiVersion: mutations.sartor.dev/v1
  kind: Assign
  metadata: {name: a}
  spec: {location: spec.x, parameters: {assign: {value: 1}}}
- apiVersion: mutations.sartor.dev/v1
  kind: Assign
  metadata: {name: b}
  spec: {location: spec.y, parameters: {assign: {value: 2}}}
"#,
    );
    let names: Vec<String> = loaded
        .iter()
        .map(|m| format!("{} {}", m.origin, m.object))
        .collect();
    assert_eq!(
        names,
        [
            "kubectl-get.yaml: document 1, item 1 Assign a",
            "kubectl-get.yaml: document 1, item 2 Assign b"
        ]
    );
}

#[test]
fn empty_documents_and_separators_are_fine() {
    assert!(load_ok("empty.yaml", "").is_empty());
    assert!(load_ok("empty.yaml", "---\n---\n# only a comment\n---\n").is_empty());
}

#[test]
fn unknown_fields_are_errors_with_their_path() {
    let text = r#"
apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata: {name: first}
spec: {location: spec.x, parameters: {assign: {value: 1}}}
---
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata:
  name: always-pull
spec:
  location: "spec.containers[name: *].imagePullPolicy"
  parameters:
    pathTest:
    - subPath: "spec.containers[name: *].imagePullPolicy"
      condition: MustNotExist
    assign:
      value: Always
"#;
    assert_eq!(
        problems("mutators/pull.yaml", text),
        [
            "mutators/pull.yaml: document 2 (Assign always-pull): spec.parameters.pathTest: unknown field `pathTest`, expected one of `pathTests`, `assign`, `conditions`"
        ]
    );
}

#[test]
fn invalid_fields_name_the_field_and_the_reason() {
    let doc = |spec: &str| {
        format!(
            "apiVersion: mutations.sartor.dev/v1\nkind: ModifySet\nmetadata: {{name: m}}\nspec: {spec}\n"
        )
    };
    let cases = [
        (
            "{parameters: {}}",
            "m.yaml: document 1 (ModifySet m): spec: missing field `location`",
        ),
        (
            "{location: [a], parameters: {}}",
            "m.yaml: document 1 (ModifySet m): spec.location: invalid type: sequence, expected a string",
        ),
        (
            "{location: spec.args, parameters: {operation: replace}}",
            "m.yaml: document 1 (ModifySet m): spec.parameters.operation: unknown variant `replace`, expected `merge` or `prune`",
        ),
        (
            "{location: spec.args, match: {namespaces: [Prod*]}, parameters: {}}",
            r#"m.yaml: document 1 (ModifySet m): spec.match.namespaces[0]: invalid glob "Prod*": only lowercase letters, digits, '-' and ':', with an optional '*' at the start and/or end"#,
        ),
        (
            "{location: spec.args, match: {scope: namespaced}, parameters: {}}",
            "m.yaml: document 1 (ModifySet m): spec.match.scope: unknown variant `namespaced`, expected one of `*`, `Cluster`, `Namespaced`",
        ),
        (
            "{location: spec.args, applyTo: [{kinds: [Pod], operations: [DELETE]}], parameters: {}}",
            "m.yaml: document 1 (ModifySet m): spec.applyTo[0].operations[0]: unknown variant `DELETE`, expected one of `CREATE`, `UPDATE`, `*`",
        ),
        (
            "{location: spec.args, match: {labelSelector: {matchExpressions: [{key: a, operator: Equals}]}}, parameters: {}}",
            "m.yaml: document 1 (ModifySet m): spec.match.labelSelector.matchExpressions[0].operator: unknown variant `Equals`, expected one of `In`, `NotIn`, `Exists`, `DoesNotExist`",
        ),
    ];
    for (spec, want) in cases {
        assert_eq!(problems("m.yaml", &doc(spec)), [want], "spec: {spec}");
    }
    assert_eq!(
        problems(
            "m.yaml",
            "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {name: a}\n"
        ),
        ["m.yaml: document 1 (Assign a): (object): missing field `spec`"]
    );
}

#[test]
fn other_objects_and_versions_are_reported() {
    let cases = [
        (
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n",
            "x.yaml: document 1 (Deployment web): Deployment (apps/v1) is not a mutator: expected Assign, AssignImage, AssignMetadata or ModifySet in mutations.sartor.dev/v1 or mutations.gatekeeper.sh/v1, v1beta1, v1alpha1",
        ),
        (
            "apiVersion: mutations.gatekeeper.sh/v1\nkind: Mystery\nmetadata: {name: q}\n",
            "x.yaml: document 1 (Mystery q): Mystery (mutations.gatekeeper.sh/v1) is not a mutator: expected Assign, AssignImage, AssignMetadata or ModifySet in mutations.sartor.dev/v1 or mutations.gatekeeper.sh/v1, v1beta1, v1alpha1",
        ),
        (
            "apiVersion: mutations.gatekeeper.sh/v2\nkind: Assign\nmetadata: {name: a}\n",
            "x.yaml: document 1 (Assign a): apiVersion mutations.gatekeeper.sh/v2 does not serve Assign: use mutations.sartor.dev/v1 or mutations.gatekeeper.sh/v1 or mutations.gatekeeper.sh/v1beta1 or mutations.gatekeeper.sh/v1alpha1",
        ),
        (
            "apiVersion: mutations.gatekeeper.sh/v1\nkind: AssignImage\nmetadata: {name: i}\n",
            "x.yaml: document 1 (AssignImage i): apiVersion mutations.gatekeeper.sh/v1 does not serve AssignImage: use mutations.sartor.dev/v1 or mutations.gatekeeper.sh/v1alpha1",
        ),
        (
            "apiVersion: mutations.sartor.dev/v1beta1\nkind: Assign\nmetadata: {name: a}\n",
            "x.yaml: document 1 (Assign a): apiVersion mutations.sartor.dev/v1beta1 does not serve Assign: use mutations.sartor.dev/v1 or mutations.gatekeeper.sh/v1 or mutations.gatekeeper.sh/v1beta1 or mutations.gatekeeper.sh/v1alpha1",
        ),
        (
            "kind: Assign\nmetadata: {name: a}\n",
            "x.yaml: document 1 (Assign a): apiVersion: missing or not a string",
        ),
        (
            "apiVersion: mutations.sartor.dev/v1\nmetadata: {name: a}\n",
            "x.yaml: document 1: kind: missing or not a string",
        ),
        (
            "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {}\n",
            "x.yaml: document 1 (Assign): metadata.name: missing or not a string",
        ),
        (
            "just a string\n",
            "x.yaml: document 1: expected a Kubernetes object, found a string",
        ),
        (
            "- a\n- b\n",
            "x.yaml: document 1: expected a Kubernetes object, found a list",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(problems("x.yaml", text), [want], "for {text:?}");
    }
}

#[test]
fn unreadable_input_is_reported() {
    assert_eq!(
        problems("bad.yaml", "kind: Assign\nmetadata: {name: [unclosed\n"),
        [
            "bad.yaml: document 1: invalid YAML: did not find expected ',' or ']' at line 3 column 1, while parsing a flow sequence at line 2 column 18 (the rest of the file is not read)"
        ]
    );
    assert_eq!(
        problems("bad.json", "{\"kind\": \"Assign\",}"),
        ["bad.json: document 1: invalid JSON: trailing comma at line 1 column 19"]
    );
    let missing = fixtures().join("no-such-file.yaml");
    let loaded = load_mutators(&[Input::Path(missing.clone())]);
    assert_eq!(loaded.errors.len(), 1);
    assert_eq!(
        loaded.errors[0].to_string(),
        format!(
            "{}: cannot read: No such file or directory (os error 2)",
            missing.display()
        )
    );
}

#[test]
fn a_kind_and_name_is_defined_once_across_groups() {
    let dir = fixtures().join("gatekeeper-docs");
    let loaded = load_mutators(&[
        Input::Path(dir.join("mutation-md-01.yaml")),
        Input::Path(dir.join("mutation-md-08.yaml")),
    ]);
    assert_eq!(loaded.mutators.len(), 1);
    let errors: Vec<String> = loaded.errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        errors,
        [format!(
            "{}: document 1 (AssignMetadata demo-annotation-owner): also defined at {}: document 1; a kind and name can be defined once (sartor's and Gatekeeper's groups count as one)",
            dir.join("mutation-md-08.yaml").display(),
            dir.join("mutation-md-01.yaml").display()
        )]
    );
}

#[test]
fn every_problem_is_listed_not_just_the_first() {
    let text = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\n---\n\
                apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {name: ok}\n\
                spec: {location: spec.x, parameters: {assign: {value: 1}}}\n---\n\
                apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {name: bad}\nspec: {location: [spec.x]}\n";
    assert_eq!(
        problems("all.yaml", text),
        [
            "all.yaml: document 1 (Deployment a): Deployment (apps/v1) is not a mutator: expected Assign, AssignImage, AssignMetadata or ModifySet in mutations.sartor.dev/v1 or mutations.gatekeeper.sh/v1, v1beta1, v1alpha1",
            "all.yaml: document 3 (Assign bad): spec.location: invalid type: sequence, expected a string",
        ]
    );
}

#[test]
fn kinds_sort_as_their_names() {
    let mut kinds = MutatorKind::ALL.to_vec();
    kinds.sort_by_key(|k| k.as_str());
    assert_eq!(kinds, MutatorKind::ALL);
    assert_eq!("ModifySet".parse(), Ok(MutatorKind::ModifySet));
    assert_eq!(
        "Modifyset".parse::<MutatorKind>().unwrap_err().to_string(),
        r#""Modifyset" is not a mutator kind (Assign, AssignImage, AssignMetadata, ModifySet)"#
    );
}

#[test]
fn stdin_is_read_as_yaml_among_other_inputs() {
    let mut stdin = std::io::Cursor::new(
        "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {name: from-stdin}\n\
         spec: {location: spec.x, parameters: {assign: {value: 1}}}\n",
    );
    let inputs = [
        Input::from_arg("-"),
        Input::from_arg(fixtures().join("tree/10-first.yaml").to_str().unwrap()),
    ];
    let (documents, errors) = sartor_api::read_documents_with_stdin(&inputs, &mut stdin);
    let loaded = sartor_api::mutators_from_documents(&documents, errors);
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    let read: Vec<String> = loaded
        .mutators
        .iter()
        .map(|m| format!("{}: {}", m.origin.document.unwrap(), m.object))
        .collect();
    assert_eq!(read, ["1: Assign from-stdin", "1: Assign default-priority"]);
    assert_eq!(loaded.mutators[0].origin.file, "<stdin>");
}

#[test]
fn yaml_reads_as_kubectl_reads_it() {
    // Merge keys resolve, a byte-order mark is fine.
    let loaded = load_ok(
        "merge.yaml",
        "\u{feff}apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {name: a}\n\
         spec:\n  location: spec.x\n  parameters:\n    assign:\n      value:\n        <<: {a: 1, b: 2}\n        b: 3\n",
    );
    let MutatorObject::Assign(assign) = &loaded[0].object else {
        panic!()
    };
    assert_eq!(
        assign.spec.parameters.assign.value,
        Some(serde_json::json!({"a": 1, "b": 3}))
    );

    let doc = |spec: &str| {
        format!(
            "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {{name: a}}\nspec: {spec}\n"
        )
    };
    assert_eq!(
        problems("dup.yaml", &doc("{location: a, location: b}")),
        [
            "dup.yaml: document 1: invalid YAML: spec: duplicate entry with key \"location\" at line 4 column 7 (the rest of the file is not read)"
        ]
    );
    assert_eq!(
        problems(
            "inf.yaml",
            &doc("{location: a, parameters: {assign: {value: .inf}}}")
        ),
        ["inf.yaml: document 1: spec.parameters.assign.value: .inf is not a JSON number"]
    );
    // A whole number written as a float is an integer, as kubectl sends it
    // and the API server stores it; past int64 it stays a float. JSON input
    // reads the same.
    let value = "[1.0, 1e3, -0.0, 1.5, 4503599627370497.0, 1e19, -9223372036854775808.0]";
    let expected = serde_json::json!([1, 1000, 0, 1.5, 4503599627370497_i64, 1e19, i64::MIN]);
    for (file, text, json) in [
        (
            "numbers.yaml",
            doc(&format!(
                "{{location: a, parameters: {{assign: {{value: {value}}}}}}}"
            )),
            false,
        ),
        (
            "numbers.json",
            format!(
                r#"{{"apiVersion": "mutations.sartor.dev/v1", "kind": "Assign", "metadata": {{"name": "a"}},
                    "spec": {{"location": "a", "parameters": {{"assign": {{"value": {value}}}}}}}}}"#
            ),
            true,
        ),
    ] {
        let (documents, errors) = read_documents_from_str(file, &text, json);
        assert!(errors.is_empty(), "{file}: {errors:?}");
        assert_eq!(
            documents[0].value["spec"]["parameters"]["assign"]["value"], expected,
            "{file}"
        );
        assert_eq!(
            documents[0].value["spec"]["parameters"]["assign"]["value"].to_string(),
            "[1,1000,0,1.5,4503599627370497,1e+19,-9223372036854775808]",
            "{file}"
        );
    }
    // A tag is an error for its document only; the next document is still read.
    let text = format!(
        "{}---\n{}",
        doc("{location: !secret a}"),
        doc("{location: b, parameters: {assign: {value: 1}}}")
    );
    assert_eq!(
        problems("tag.yaml", &text),
        ["tag.yaml: document 1: spec.location: YAML tag !secret is not supported"]
    );
    let (documents, _) = read_documents_from_str("tag.yaml", &text, false);
    assert_eq!(documents.len(), 1);
    assert_eq!(documents[0].origin.document, Some(2));
}

#[test]
fn nulls_are_dropped_as_the_api_server_drops_them() {
    let loaded = load_ok(
        "nulls.yaml",
        concat!(
            "apiVersion: mutations.gatekeeper.sh/v1\nkind: ModifySet\nmetadata: {name: m}\n",
            "spec:\n  applyTo: null\n  match: null\n  location: spec.args\n",
            "  parameters:\n    pathTests: null\n    operation: null\n    values: {fromList: [null, a]}\n",
            "status:\n  byPod:\n  - enforced: true\n",
        ),
    );
    let MutatorObject::ModifySet(set) = &loaded[0].object else {
        panic!()
    };
    assert_eq!(
        serde_json::to_value(&set.spec).unwrap(),
        serde_json::json!({
            "location": "spec.args",
            "parameters": {"operation": "merge", "values": {"fromList": [null, "a"]}},
        })
    );
    // Status is the cluster's report: ignored when read from a file.
    assert_eq!(set.status, None);
    // An omitted parameters block is valid, as in Gatekeeper.
    let loaded = load_ok(
        "bare.yaml",
        "apiVersion: mutations.sartor.dev/v1\nkind: ModifySet\nmetadata: {name: m}\nspec: {location: spec.args}\n",
    );
    assert_eq!(loaded.len(), 1);
}

#[test]
fn unknown_top_level_and_metadata_fields_are_errors() {
    assert_eq!(
        problems(
            "x.yaml",
            "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {name: a}\nspecc: {}\n"
        ),
        [
            "x.yaml: document 1 (Assign a): specc: unknown field, expected one of apiVersion, kind, metadata, spec, status"
        ]
    );
    assert_eq!(
        problems(
            "x.yaml",
            "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {name: a, lables: {x: y}}\nspec: {}\n"
        ),
        [
            "x.yaml: document 1 (Assign a): metadata.lables: unknown field, expected one of name, generateName, namespace, selfLink, uid, resourceVersion, generation, creationTimestamp, deletionTimestamp, deletionGracePeriodSeconds, labels, annotations, ownerReferences, finalizers, managedFields"
        ]
    );
}

#[cfg(unix)]
#[test]
fn a_bad_entry_does_not_stop_the_directory_walk() {
    let dir = std::env::temp_dir().join(format!("sartor-loader-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(dir.join("nowhere"), dir.join("a-dangling.yaml")).unwrap();
    std::os::unix::fs::symlink(dir.join("nowhere"), dir.join("b-dangling-other")).unwrap();
    std::fs::copy(
        fixtures().join("tree/10-first.yaml"),
        dir.join("c-good.yaml"),
    )
    .unwrap();
    let loaded = load_mutators(&[Input::Path(dir.clone())]);
    let errors: Vec<String> = loaded.errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        errors,
        [format!(
            "{}: cannot read: No such file or directory (os error 2)",
            dir.join("a-dangling.yaml").display()
        )]
    );
    assert_eq!(loaded.mutators.len(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sartor_extensions_need_sartors_api_version() {
    let assign_metadata = |api_version: &str| {
        format!(
            "apiVersion: {api_version}\nkind: AssignMetadata\nmetadata: {{name: team}}\n\
             spec:\n  location: metadata.labels.team\n  \
             parameters: {{assign: {{fromNamespace: {{label: team}}}}}}\n"
        )
    };
    assert_eq!(
        problems("m.yaml", &assign_metadata("mutations.gatekeeper.sh/v1")),
        [
            "m.yaml: document 1 (AssignMetadata team): spec.parameters.assign.fromNamespace: a value from the Namespace is a sartor extension, not part of Gatekeeper's API (mutations.gatekeeper.sh/v1); use apiVersion mutations.sartor.dev/v1 for this mutator"
        ]
    );
    assert_eq!(
        problems("m.yaml", &assign_metadata("mutations.sartor.dev/v1")),
        Vec::<String>::new()
    );
    let assign = |api_version: &str, location: &str, assign: &str| {
        format!(
            "apiVersion: {api_version}\nkind: Assign\nmetadata: {{name: a}}\n\
             spec:\n  applyTo: [{{groups: [''], versions: [v1], kinds: [Pod]}}]\n  \
             location: '{location}'\n  parameters: {{assign: {assign}}}\n"
        )
    };
    assert_eq!(
        problems(
            "m.yaml",
            &assign(
                "mutations.gatekeeper.sh/v1",
                "spec.containers[name notin (istio-proxy)].imagePullPolicy",
                "{value: Always}"
            )
        ),
        [
            "m.yaml: document 1 (Assign a): spec.location: an exclusion ([key notin (...)]) is a sartor extension, not part of Gatekeeper's API (mutations.gatekeeper.sh/v1); use apiVersion mutations.sartor.dev/v1 for this mutator"
        ]
    );
    // Even `remove: false`: Gatekeeper's schema has no such field.
    assert_eq!(
        problems(
            "m.yaml",
            &assign(
                "mutations.gatekeeper.sh/v1",
                "spec.hostNetwork",
                "{value: true, remove: false}"
            )
        ),
        [
            "m.yaml: document 1 (Assign a): spec.parameters.assign.remove: removal is a sartor extension, not part of Gatekeeper's API (mutations.gatekeeper.sh/v1); use apiVersion mutations.sartor.dev/v1 for this mutator"
        ]
    );
    assert_eq!(
        problems(
            "m.yaml",
            &assign(
                "mutations.gatekeeper.sh/v1beta1",
                "spec.hostNetwork",
                "{remove: true}"
            )
        ),
        [
            "m.yaml: document 1 (Assign a): spec.parameters.assign.remove: removal is a sartor extension, not part of Gatekeeper's API (mutations.gatekeeper.sh/v1beta1); use apiVersion mutations.sartor.dev/v1 for this mutator"
        ]
    );
    assert_eq!(
        problems(
            "m.yaml",
            &assign(
                "mutations.sartor.dev/v1",
                "spec.containers[name notin (istio-proxy)].imagePullPolicy",
                "{value: Always}"
            )
        ),
        Vec::<String>::new()
    );
}

#[test]
fn value_conditions_need_sartors_api_version() {
    let modify_set = |api_version: &str| {
        format!(
            "apiVersion: {api_version}\nkind: ModifySet\nmetadata: {{name: s}}\n\
             spec:\n  applyTo: [{{groups: [''], versions: [v1], kinds: [Pod]}}]\n  \
             location: spec.finalizers\n  parameters:\n    values: {{fromList: [x]}}\n    \
             conditions: [{{path: spec.type, operator: In, values: [a]}}]\n"
        )
    };
    assert_eq!(
        problems("m.yaml", &modify_set("mutations.gatekeeper.sh/v1")),
        [
            "m.yaml: document 1 (ModifySet s): spec.parameters.conditions: a value condition is a sartor extension, not part of Gatekeeper's API (mutations.gatekeeper.sh/v1); use apiVersion mutations.sartor.dev/v1 for this mutator"
        ]
    );
    assert_eq!(
        problems("m.yaml", &modify_set("mutations.sartor.dev/v1")),
        Vec::<String>::new()
    );
}
