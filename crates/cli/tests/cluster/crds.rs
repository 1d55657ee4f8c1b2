//! sartor's CRDs on a real API server: accepted, established, validating,
//! documented.

use std::time::Duration;

use sartor_api::MutatorKind;
use sartor_api::crd::crd_file_name;

use crate::{Suite, eventually, repo_path, same};

/// Each CRD under crds/ is accepted (server-side apply, one file at a time so
/// a refusal names its file) and becomes Established. AssignImage's used to
/// be refused: its `parameters` defaulted to `{}`, which its own CEL rule
/// rejects, and the real API server checks defaults against validation.
pub fn apply_to_the_real_api_server(suite: &mut Suite) -> Result<(), String> {
    let plane = &suite.plane;
    for kind in MutatorKind::ALL {
        let file = repo_path(&format!("crds/{}", crd_file_name(kind)));
        let out = plane.kubectl(&["apply", "--server-side", "-f", &file])?;
        let name = format!("{}.mutations.sartor.dev", kind.as_str().to_lowercase());
        same(
            "kubectl apply output",
            out.trim().to_string(),
            format!("customresourcedefinition.apiextensions.k8s.io/{name} serverside-applied"),
        )?;
        plane.kubectl(&[
            "wait",
            "--for=condition=Established",
            "--timeout=30s",
            &format!("crd/{name}"),
        ])?;
    }
    Ok(())
}

/// One invalid object per kind, refused by the CRD's own rules with the
/// message the rule declares (no webhook is involved yet).
pub fn cel_rules_reject_invalid_mutators(suite: &mut Suite) -> Result<(), String> {
    let cases = [
        (
            "Assign",
            "spec: {applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}], location: spec.x, parameters: {assign: {fromMetadata: {field: name}, externalData: {provider: p}}}}",
        ),
        (
            "AssignImage",
            "spec: {location: 'spec.containers[name: *].image', parameters: {assignTag: latest}}",
        ),
        (
            "AssignMetadata",
            "spec: {location: spec.replicas, parameters: {assign: {value: x}}}",
        ),
        (
            "ModifySet",
            "spec: {location: spec.x, parameters: {operation: replace, values: {fromList: [a]}}}",
        ),
    ];
    let mut messages = Vec::new();
    for (kind, spec) in cases {
        let object = format!(
            "apiVersion: mutations.sartor.dev/v1\nkind: {kind}\nmetadata:\n  name: invalid-{}\n{spec}\n",
            kind.to_lowercase()
        );
        match suite
            .plane
            .kubectl_with_input(&["create", "-f", "-"], Some(&object))
        {
            Ok(out) => return Err(format!("{kind}: accepted: {out}")),
            Err(error) => messages.push(error),
        }
    }
    same(
        "the API server's messages",
        messages,
        vec![
            "kubectl create -f -: The Assign \"invalid-assign\" is invalid: spec.parameters.assign: Invalid value: set only one of value, fromMetadata and externalData".to_string(),
            "kubectl create -f -: The AssignImage \"invalid-assignimage\" is invalid: spec.parameters: Invalid value: assignTag must start with ':' (a tag) or '@' (a digest)".to_string(),
            "kubectl create -f -: The AssignMetadata \"invalid-assignmetadata\" is invalid: spec.location: Invalid value: \"spec.replicas\": location must be metadata.labels.<key> or metadata.annotations.<key>".to_string(),
            "kubectl create -f -: The ModifySet \"invalid-modifyset\" is invalid: spec.parameters.operation: Unsupported value: \"replace\": supported values: \"merge\", \"prune\"".to_string(),
        ],
    )
}

/// `kubectl explain` reads the field docs from the published schema.
pub fn kubectl_explain_shows_the_docs(suite: &mut Suite) -> Result<(), String> {
    let out = eventually("explain", Duration::from_secs(20), || {
        suite.plane.kubectl(&["explain", "assign.spec.location"])
    })?;
    let expected = [
        "GROUP:      mutations.sartor.dev",
        "KIND:       Assign",
        "VERSION:    v1",
        "FIELD: location <string>",
    ];
    for line in expected {
        if !out.lines().any(|l| l.trim_end() == line) {
            return Err(format!(
                "`kubectl explain assign.spec.location` lacks {line:?}:\n{out}"
            ));
        }
    }
    Ok(())
}
