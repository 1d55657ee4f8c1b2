//! The checked-in CRDs under `crds/` are what the types generate, and each is a
//! valid apiextensions.k8s.io/v1 CustomResourceDefinition of the right shape.

// Test code: a panic here is a failed test, not a crash on user input.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use sartor_api::MutatorKind;
use sartor_api::crd::{crd_file_name, crd_yaml};

fn crds_dir() -> std::path::PathBuf {
    sartor_tests::manifest_dir(env!("CARGO_MANIFEST_DIR")).join("../../crds")
}

#[test]
fn checked_in_crds_match_the_types() {
    let update = std::env::var_os("SARTOR_UPDATE_CRDS").is_some();
    let mut stale = Vec::new();
    for kind in MutatorKind::ALL {
        let path = crds_dir().join(crd_file_name(kind));
        let generated = crd_yaml(kind).unwrap();
        if update {
            std::fs::write(&path, &generated).unwrap();
            continue;
        }
        let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
        if checked_in != generated {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "CRDs differ from the types: {}\nregenerate them with: SARTOR_UPDATE_CRDS=1 cargo test -p sartor-api --test crds",
        stale.join(", ")
    );
}

#[test]
fn every_crd_is_a_cluster_scoped_v1_crd_with_status() {
    let plurals = [
        (MutatorKind::Assign, "assign"),
        (MutatorKind::AssignImage, "assignimage"),
        (MutatorKind::AssignMetadata, "assignmetadata"),
        (MutatorKind::ModifySet, "modifyset"),
    ];
    for (kind, plural) in plurals {
        let text = std::fs::read_to_string(crds_dir().join(crd_file_name(kind))).unwrap();
        let crd: CustomResourceDefinition = serde_yaml::from_str(&text).unwrap();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some(format!("{plural}.mutations.sartor.dev").as_str())
        );
        assert_eq!(crd.spec.group, "mutations.sartor.dev");
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(crd.spec.names.kind, kind.as_str());
        assert_eq!(crd.spec.names.plural, plural);
        assert_eq!(crd.spec.versions.len(), 1);
        let version = &crd.spec.versions[0];
        assert_eq!(version.name, "v1");
        assert!(version.served && version.storage);
        assert!(
            version.subresources.as_ref().unwrap().status.is_some(),
            "{kind}: status subresource"
        );
        let columns: Vec<&str> = version
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.as_str())
            .collect();
        assert!(
            columns.contains(&"Enforced") && columns.contains(&"Age"),
            "{kind}: {columns:?}"
        );
    }
}

/// The CEL rules' messages for `yaml`, evaluated client-side as the API server would.
fn cel_errors(yaml: &str) -> Vec<String> {
    let (documents, errors) = sartor_api::read_documents_from_str("cel.yaml", yaml, false);
    assert!(errors.is_empty(), "{errors:?}");
    let mutator = sartor_api::parse_mutator(&documents[0].value).unwrap_or_else(|e| panic!("{e}"));
    let result = match &mutator {
        sartor_api::MutatorObject::Assign(m) => kube::core::cel::validate_cel(m),
        sartor_api::MutatorObject::AssignImage(m) => kube::core::cel::validate_cel(m),
        sartor_api::MutatorObject::AssignMetadata(m) => kube::core::cel::validate_cel(m),
        sartor_api::MutatorObject::ModifySet(m) => kube::core::cel::validate_cel(m),
    };
    match result {
        Ok(()) => Vec::new(),
        Err(errors) => errors.into_vec().iter().map(ToString::to_string).collect(),
    }
}

fn assign_metadata(location: &str, assign: &str) -> String {
    format!(
        "apiVersion: mutations.sartor.dev/v1\nkind: AssignMetadata\nmetadata: {{name: m}}\n\
         spec:\n  location: {location}\n  parameters:\n    assign: {assign}\n"
    )
}

#[test]
fn assign_metadata_location_rule_accepts_what_gatekeeper_accepts() {
    for location in [
        "metadata.labels.owner",
        "metadata.annotations.owner",
        r#"'metadata.annotations."example.com/owner"'"#,
    ] {
        assert_eq!(
            cel_errors(&assign_metadata(location, "{value: x}")),
            Vec::<String>::new(),
            "{location}"
        );
    }
    // Whitespace and quotes that the location syntax allows pass too.
    for location in [
        r#"" metadata . labels . owner""#,
        r#"'"metadata".''annotations''.x'"#,
        "\"\\tmetadata\\n.labels.x\"",
    ] {
        assert_eq!(
            cel_errors(&assign_metadata(location, "{value: x}")),
            Vec::<String>::new(),
            "{location}"
        );
    }
    for location in [
        "spec.labels.owner",
        "metadata.labelsx.y",
        "metadata.name",
        "labels.owner",
    ] {
        assert_eq!(
            cel_errors(&assign_metadata(location, "{value: x}")),
            ["spec.location: location must be metadata.labels.<key> or metadata.annotations.<key>"],
            "{location}"
        );
    }
}

#[test]
fn assign_metadata_location_rule_agrees_with_the_parser() {
    let rule = sartor_api::crd::METADATA_LOCATION_RULE;
    let pattern = rule
        .strip_prefix("self.matches('")
        .and_then(|r| r.strip_suffix("')"))
        .unwrap()
        .replace("\\\\", "\\")
        .replace("\\'", "'");
    let re = regex::Regex::new(&pattern).unwrap();
    let cases = [
        "metadata.labels.a",
        "metadata . labels . a",
        "'metadata'.\"annotations\".\"a/b\"",
        "\tmetadata\n.labels.a",
        "spec.labels.a",
        "metadata.label.a",
        "metadata.labels",
        "metadatalabels.a",
        "\"meta data\".labels.a",
    ];
    for location in cases {
        let parsed = sartor_location::Path::parse(location).ok();
        let starts_right = parsed.is_some_and(|p| {
            use sartor_location::Node::Field;
            matches!(p.nodes(), [Field(m), Field(l), _, ..] if m == "metadata" && (l == "labels" || l == "annotations"))
        });
        assert_eq!(re.is_match(location), starts_right, "{location:?}");
    }
}

#[test]
fn assign_keeps_metadata_and_external_data_apart() {
    // CEL cannot see `value` (untyped), so "exactly one source" is the engine's
    // check; the schema rejects the one pair it can see.
    let cases = [
        ("{value: x}", vec![]),
        ("{fromMetadata: {field: name}}", vec![]),
        ("{externalData: {provider: p}}", vec![]),
        ("{fromNamespace: {label: team}}", vec![]),
        (
            "{fromMetadata: {field: name}, externalData: {provider: p}}",
            vec![
                "spec.parameters.assign: set only one of value, fromMetadata, fromNamespace, externalData and remove",
            ],
        ),
        (
            "{fromMetadata: {field: name}, fromNamespace: {label: team}}",
            vec![
                "spec.parameters.assign: set only one of value, fromMetadata, fromNamespace, externalData and remove",
            ],
        ),
        (
            "{fromNamespace: {label: team, annotation: team}}",
            vec!["spec.parameters.assign.fromNamespace: set exactly one of label and annotation"],
        ),
        (
            "{fromNamespace: {default: x}}",
            vec!["spec.parameters.assign.fromNamespace: set exactly one of label and annotation"],
        ),
    ];
    for (assign, want) in cases {
        assert_eq!(
            cel_errors(&assign_metadata("metadata.labels.a", assign)),
            want,
            "{assign}"
        );
    }
}

#[test]
fn assign_image_needs_something_to_assign_and_a_marked_tag() {
    let image = |parameters: &str| {
        format!(
            "apiVersion: mutations.sartor.dev/v1\nkind: AssignImage\nmetadata: {{name: i}}\n\
             spec:\n  location: \"spec.containers[name: *].image\"\n  parameters: {parameters}\n"
        )
    };
    let cases = [
        ("{assignDomain: my.registry.io}", vec![]),
        ("{assignTag: ':v1'}", vec![]),
        ("{assignTag: '@sha256:abc'}", vec![]),
        (
            "{}",
            vec!["spec.parameters: set at least one of assignDomain, assignPath and assignTag"],
        ),
        (
            "{assignTag: v1}",
            vec!["spec.parameters: assignTag must start with ':' (a tag) or '@' (a digest)"],
        ),
    ];
    for (parameters, want) in cases {
        assert_eq!(cel_errors(&image(parameters)), want, "{parameters}");
    }
}

/// Structural-schema rules a real API server enforces, checked on the JSON of
/// every node of `schema` (`at` names it in failures).
fn check_structural(
    schema: &serde_json::Value,
    at: &str,
    under_spec: bool,
    problems: &mut Vec<String>,
) {
    let preserve =
        schema.get("x-kubernetes-preserve-unknown-fields") == Some(&serde_json::Value::Bool(true));
    if schema.get("type").is_none() && !preserve {
        problems.push(format!("{at}: no type"));
    }
    if under_spec && schema.get("nullable").is_some() {
        problems.push(format!("{at}: nullable under spec"));
    }
    if schema
        .get("x-kubernetes-list-type")
        .and_then(|t| t.as_str())
        == Some("map")
    {
        let required = schema["items"]["required"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for key in schema["x-kubernetes-list-map-keys"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if !required.contains(key) {
                problems.push(format!("{at}: list-map key {key} is not required"));
            }
        }
    }
    // CEL sees only typed properties: every `self.<field>` a rule reads must have a type.
    for rule in schema["x-kubernetes-validations"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let text = rule["rule"].as_str().unwrap_or_default();
        for (i, _) in text.match_indices("self.") {
            let field: String = text[i + 5..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            if ["matches", "startsWith", "size"].contains(&field.as_str()) {
                continue;
            }
            // A list of untyped items is not declared to CEL either.
            let property = &schema["properties"][&field];
            let untyped_items =
                property["type"] == "array" && property["items"].get("type").is_none();
            if property.get("type").is_none() || untyped_items {
                problems.push(format!(
                    "{at}: rule {text:?} reads untyped or unknown field {field}"
                ));
            }
        }
    }
    for (name, property) in schema["properties"].as_object().into_iter().flatten() {
        check_structural(
            property,
            &format!("{at}.{name}"),
            under_spec || name == "spec",
            problems,
        );
    }
    if let Some(items) = schema.get("items") {
        check_structural(items, &format!("{at}[]"), under_spec, problems);
    }
    if let Some(values) = schema.get("additionalProperties").filter(|v| v.is_object()) {
        check_structural(values, &format!("{at}{{}}"), under_spec, problems);
    }
}

#[test]
fn every_schema_is_structural() {
    let mut problems = Vec::new();
    for kind in MutatorKind::ALL {
        let crd = serde_json::to_value(sartor_api::crd::crd(kind)).unwrap();
        let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        check_structural(schema, kind.as_str(), false, &mut problems);
    }
    assert_eq!(problems, Vec::<String>::new());
}
