//! Everything `Mutator::compile` rejects, with the exact message.

use super::{assign, compile, compile_error};

fn modify_set(location: &str) -> String {
    format!(
        "apiVersion: mutations.sartor.dev/v1\nkind: ModifySet\nmetadata: {{name: m}}\n\
         spec:\n  applyTo: [{{groups: [\"\"], versions: [v1], kinds: [Pod]}}]\n  \
         location: '{location}'\n  parameters: {{values: {{fromList: [a]}}}}\n"
    )
}

fn assign_image(location: &str, parameters: &str) -> String {
    format!(
        "apiVersion: mutations.gatekeeper.sh/v1alpha1\nkind: AssignImage\nmetadata: {{name: i}}\n\
         spec:\n  applyTo: [{{groups: [\"\"], versions: [v1], kinds: [Pod]}}]\n  \
         location: '{location}'\n  parameters: {parameters}\n"
    )
}

fn assign_metadata(location: &str, assign: &str) -> String {
    format!(
        "apiVersion: mutations.sartor.dev/v1\nkind: AssignMetadata\nmetadata: {{name: md}}\n\
         spec:\n  location: '{location}'\n  parameters: {{assign: {assign}}}\n"
    )
}

#[test]
fn valid_mutators_of_every_kind_compile() {
    compile(&assign(
        "a",
        "spec.containers[name: *].imagePullPolicy",
        "{assign: {value: Always}}",
    ));
    compile(&assign(
        "a",
        "spec.template.metadata.labels.x",
        "{assign: {value: y}}",
    ));
    compile(&modify_set("spec.containers[name: *].args"));
    compile(&assign_image(
        "spec.containers[name: *].image",
        "{assignDomain: registry.example.com}",
    ));
    compile(&assign_metadata("metadata.labels.owner", "{value: team-a}"));
}

#[test]
fn assign_rejects_what_gatekeeper_rejects() {
    let cases = [
        (
            assign("a", "metadata.labels.x", "{assign: {value: y}}"),
            "Assign a: spec.location: Assign cannot change metadata; use AssignMetadata for labels and annotations",
        ),
        (
            assign("a", "\"metadata\".name", "{assign: {value: y}}"),
            "Assign a: spec.location: Assign cannot change metadata; use AssignMetadata for labels and annotations",
        ),
        (
            assign(
                "a",
                "spec.containers[name: foo].name",
                "{assign: {value: bar}}",
            ),
            "Assign a: spec.location: spec.containers[name: foo].name would change the key field \"name\" of a list element, which identifies it",
        ),
        (
            assign("a", "spec.containers[name: foo]", "{assign: {value: text}}"),
            "Assign a: spec.parameters.assign.value: spec.containers[name: foo] is a keyed-list element, so the value must be an object, got a string",
        ),
        (
            assign(
                "a",
                "spec.containers[name: foo]",
                "{assign: {value: {name: bar}}}",
            ),
            "Assign a: spec.parameters.assign.value: the element for spec.containers[name: foo] must have name: foo, got \"bar\"",
        ),
        (
            assign(
                "a",
                "spec.containers[name: foo]",
                "{assign: {value: {image: x}}}",
            ),
            "Assign a: spec.parameters.assign.value: the element for spec.containers[name: foo] must have name: foo, got nothing",
        ),
        (
            assign(
                "a",
                "spec.ports[port: 80]",
                "{assign: {value: {port: \"80\"}}}",
            ),
            "Assign a: spec.parameters.assign.value: the element for spec.ports[port: 80] must have port: 80, got \"80\"",
        ),
        (
            assign(
                "a",
                "spec.containers[name: *]",
                "{assign: {value: {name: x}}}",
            ),
            "Assign a: spec.location: spec.containers[name: *] ends in a glob; there is no single list element to set",
        ),
        (
            assign(
                "a",
                "spec.containers[name: foo]",
                "{assign: {fromMetadata: {field: name}}}",
            ),
            "Assign a: spec.parameters.assign.fromMetadata: spec.containers[name: foo] is a keyed-list element; fromMetadata gives a string",
        ),
        (
            assign("a", "spec.x", "{assign: {}}"),
            "Assign a: spec.parameters.assign: set exactly one of value, fromMetadata and externalData",
        ),
        (
            assign(
                "a",
                "spec.x",
                "{assign: {value: 1, fromMetadata: {field: name}}}",
            ),
            "Assign a: spec.parameters.assign: set exactly one of value, fromMetadata and externalData",
        ),
        (
            assign(
                "a",
                "spec.containers[name: foo]",
                "{assign: {externalData: {provider: p}}}",
            ),
            "Assign a: spec.location: spec.containers[name: foo] is a keyed-list element; cannot assign external data response to a list",
        ),
        (
            assign(
                "a",
                "spec.x",
                "{assign: {externalData: {provider: p, failurePolicy: UseDefault}}}",
            ),
            "Assign a: spec.parameters.assign.externalData.default: must not be empty when failurePolicy is UseDefault",
        ),
        (
            assign(
                "a",
                "spec.x",
                "{assign: {value: x, externalData: {provider: p}}}",
            ),
            "Assign a: spec.parameters.assign: set exactly one of value, fromMetadata and externalData",
        ),
        (
            assign("a", "spec.containers[name: foo", "{assign: {value: 1}}"),
            "Assign a: spec.location: invalid location \"spec.containers[name: foo\": expected ']' at 25, found end of location\n  spec.containers[name: foo\n                           ^",
        ),
        (
            assign(
                "a",
                "spec.x.y",
                "{assign: {value: 1}, pathTests: [{subPath: spec.y, condition: MustExist}]}",
            ),
            "Assign a: spec.parameters.pathTests: pathTest subPath \"spec.y\" is not a prefix of location \"spec.x.y\"",
        ),
        (
            assign(
                "a",
                "spec.x.y",
                "{assign: {value: 1}, pathTests: [{subPath: 'spec.', condition: MustExist}]}",
            ),
            "Assign a: spec.parameters.pathTests[0].subPath: invalid location \"spec.\": trailing '.' at 4\n  spec.\n      ^",
        ),
        (
            assign(
                "a",
                "spec.x.y",
                "{assign: {value: 1}, pathTests: [{subPath: spec, condition: MustNotExist}, {subPath: spec.x, condition: MustExist}]}",
            ),
            "Assign a: spec.parameters.pathTests: pathTest subPath \"spec.x\" is marked MustExist but its parent \"spec\" is marked MustNotExist",
        ),
    ];
    for (yaml, want) in cases {
        assert_eq!(compile_error(&yaml), want, "{yaml}");
    }
}

#[test]
fn apply_to_must_name_real_kinds() {
    let with_apply_to = |apply_to: &str| {
        format!(
            "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {{name: a}}\n\
             spec:\n  {apply_to}\n  location: spec.x\n  parameters: {{assign: {{value: 1}}}}\n"
        )
    };
    let cases = [
        (
            "match: {}",
            "Assign a: spec.applyTo: required; list the groups, versions and kinds this mutator applies to",
        ),
        (
            "applyTo: [{groups: [''], kinds: [Pod]}]",
            "Assign a: spec.applyTo[0]: groups, versions and kinds must all be set",
        ),
        (
            "applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}, {groups: ['*'], versions: ['*'], kinds: ['*']}]",
            "Assign a: spec.applyTo[1].groups: \"*\" is not a wildcard here and would match nothing; list the groups",
        ),
        (
            "applyTo: [{groups: [apps], versions: [v1], kinds: ['*']}]",
            "Assign a: spec.applyTo[0].kinds: \"*\" is not a wildcard here and would match nothing; list the kinds",
        ),
        (
            "applyTo: [{groups: [''], versions: [v1], kinds: [Pod], operations: [CREATE, CREATE]}]",
            "Assign a: spec.applyTo[0].operations: an operation is listed twice",
        ),
        (
            "applyTo: [{groups: [''], versions: [v1], kinds: [Pod], operations: ['*', UPDATE]}]",
            "Assign a: spec.applyTo[0].operations: \"*\" must not be combined with other operations",
        ),
    ];
    for (apply_to, want) in cases {
        assert_eq!(compile_error(&with_apply_to(apply_to)), want, "{apply_to}");
    }
}

#[test]
fn assign_metadata_only_adds_string_labels_and_annotations() {
    let cases = [
        (
            assign_metadata("metadata.name", "{value: x}"),
            "AssignMetadata md: spec.location: \"metadata.name\" must be metadata.labels.<key> or metadata.annotations.<key>",
        ),
        (
            assign_metadata("metadata.labels", "{value: x}"),
            "AssignMetadata md: spec.location: \"metadata.labels\" must be metadata.labels.<key> or metadata.annotations.<key>",
        ),
        (
            assign_metadata("spec.labels.x", "{value: x}"),
            "AssignMetadata md: spec.location: \"spec.labels.x\" must be metadata.labels.<key> or metadata.annotations.<key>",
        ),
        (
            assign_metadata("metadata.labels.x", "{value: 3}"),
            "AssignMetadata md: spec.parameters.assign.value: labels and annotations are strings, got a number",
        ),
        (
            assign_metadata("metadata.labels.x", "{value: {a: b}}"),
            "AssignMetadata md: spec.parameters.assign.value: labels and annotations are strings, got an object",
        ),
        (
            assign_metadata(
                &format!("metadata.labels.\"{}\"", "x".repeat(520)),
                "{value: x}",
            ),
            "AssignMetadata md: spec.location: 538 characters is longer than the maximum of 512",
        ),
    ];
    for (yaml, want) in cases {
        assert_eq!(compile_error(&yaml), want, "{yaml}");
    }
}

#[test]
fn modify_set_and_assign_image_work_on_fields() {
    assert_eq!(
        compile_error(&modify_set("spec.containers[name: foo]")),
        "ModifySet m: spec.location: ModifySet cannot end at a keyed-list element (spec.containers[name: foo])"
    );
    assert_eq!(
        compile_error(&modify_set("metadata.finalizers")),
        "ModifySet m: spec.location: ModifySet cannot change metadata; use AssignMetadata for labels and annotations"
    );
    let cases = [
        (
            assign_image("spec.containers[name: *]", "{assignTag: ':v1'}"),
            "AssignImage i: spec.location: AssignImage cannot end at a keyed-list element (spec.containers[name: *])",
        ),
        (
            assign_image("spec.image", "{}"),
            "AssignImage i: spec.parameters: at least one of assignDomain, assignPath and assignTag must be set",
        ),
        (
            assign_image("spec.image", "{assignTag: v1}"),
            "AssignImage i: spec.parameters: assignTag \"v1\" must be a valid image tag (\":tag\") or digest (\"@algorithm:hex\")",
        ),
        (
            assign_image("spec.image", "{assignPath: gcr.io/repo}"),
            "AssignImage i: spec.parameters: assignDomain must be set if the first part of assignPath \"gcr.io/repo\" can be interpreted as part of a domain",
        ),
        (
            assign_image("spec.image", "{assignDomain: 'not a domain'}"),
            "AssignImage i: spec.parameters: assignDomain \"not a domain\" must be a fully-qualified domain name or localhost",
        ),
        (
            assign_image("metadata.x", "{assignTag: ':v1'}"),
            "AssignImage i: spec.location: AssignImage cannot change metadata; use AssignMetadata for labels and annotations",
        ),
    ];
    for (yaml, want) in cases {
        assert_eq!(compile_error(&yaml), want, "{yaml}");
    }
}

#[test]
fn names_and_selectors_are_checked() {
    let long = "n".repeat(64);
    assert_eq!(
        compile_error(&assign(&long, "spec.x", "{assign: {value: 1}}")),
        format!("Assign {long}: metadata.name: 64 characters is longer than the maximum of 63")
    );
    let with_match = |criteria: &str| {
        format!(
            "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {{name: a}}\n\
             spec:\n  applyTo: [{{groups: [\"\"], versions: [v1], kinds: [Pod]}}]\n  \
             match: {criteria}\n  location: spec.x\n  parameters: {{assign: {{value: 1}}}}\n"
        )
    };
    assert_eq!(
        compile_error(&with_match(
            "{labelSelector: {matchExpressions: [{key: app, operator: In}]}}"
        )),
        "Assign a: spec.match.labelSelector: invalid label selector requirement on key \"app\" (In): for 'in', 'notin' operators, values set can't be empty"
    );
    assert_eq!(
        compile_error(&with_match(
            "{namespaceSelector: {matchLabels: {'Bad Key': x}}}"
        )),
        "Assign a: spec.match.namespaceSelector: invalid label selector key \"Bad Key\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
    );
}

#[test]
fn locations_deeper_than_any_object_are_rejected() {
    let deep = vec!["spec"; 129].join(".");
    assert_eq!(
        compile_error(&assign("a", &deep, "{assign: {value: 1}}")),
        "Assign a: spec.location: 129 fields and list selectors is deeper than the maximum of 128 (no object nests that deep)"
    );
    // Far deeper input is rejected the same way, without exhausting the stack.
    let huge = vec!["a"; 200_000].join(".");
    assert!(compile_error(&assign("a", &huge, "{assign: {value: 1}}")).contains("200000 fields"));
    compile(&assign(
        "a",
        &vec!["spec"; 128].join("."),
        "{assign: {value: 1}}",
    ));
}
