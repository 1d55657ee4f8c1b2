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
        plane.wait_established(Some(&name))?;
    }
    Ok(())
}

/// One invalid object per kind, refused by the CRD's own rules with the
/// message the rule declares (no webhook is involved yet).
pub fn cel_rules_reject_invalid_mutators(suite: &mut Suite) -> Result<(), String> {
    ensure_crds(suite)?;
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
    // The API server's wording around the rule's own message changed
    // between versions: v1.34 names the type (`Invalid value: "object": `),
    // v1.37 the value of a string (`Invalid value: "spec.replicas": `) or
    // nothing. The field path and the rule's message are exact either way.
    let expected = [
        (
            "The Assign \"invalid-assign\" is invalid: spec.parameters.assign",
            "set only one of value, fromMetadata, fromNamespace, externalData and remove",
        ),
        (
            "The AssignImage \"invalid-assignimage\" is invalid: spec.parameters",
            "assignTag must start with ':' (a tag) or '@' (a digest)",
        ),
        (
            "The AssignMetadata \"invalid-assignmetadata\" is invalid: spec.location",
            "location must be metadata.labels.<key> or metadata.annotations.<key>",
        ),
        (
            "The ModifySet \"invalid-modifyset\" is invalid: spec.parameters.operation",
            "supported values: \"merge\", \"prune\"",
        ),
    ];
    for (message, (field, rule)) in messages.iter().zip(expected) {
        let prefix = format!("kubectl create -f -: {field}: ");
        let middle = message
            .strip_prefix(&prefix)
            .and_then(|rest| rest.strip_suffix(rule));
        let well_formed = middle.is_some_and(|m| {
            m == "Invalid value: "
                || (m.starts_with("Invalid value: \"") || m.starts_with("Unsupported value: \""))
                    && m.ends_with("\": ")
                    && m.matches('"').count() == 2
        });
        if !well_formed {
            return Err(format!(
                "expected {prefix}Invalid value: [\"...\": ]{rule}\n     got {message}"
            ));
        }
    }
    same("messages", messages.len(), expected.len())
}

/// sartor's CRDs installed from crds/ (server-side, so re-applying is a
/// no-op), for trials that need nothing else and may run alone.
pub fn ensure_crds(suite: &Suite) -> Result<(), String> {
    suite
        .plane
        .kubectl(&["apply", "--server-side", "-f", &repo_path("crds")])?;
    suite.plane.wait_established(None)
}

/// `kubectl explain` shows the field's doc comment from the types, as
/// published in the CRD's schema.
pub fn kubectl_explain_shows_the_docs(suite: &mut Suite) -> Result<(), String> {
    ensure_crds(suite)?;
    let out = eventually("explain", Duration::from_secs(20), || {
        suite.plane.kubectl(&["explain", "assign.spec.location"])
    })?;
    let expected = [
        "GROUP:      mutations.sartor.dev",
        "KIND:       Assign",
        "VERSION:    v1",
        "FIELD: location <string>",
        "DESCRIPTION:",
        "    The field to set (or remove), e.g.",
        "    `spec.containers[name: *].imagePullPolicy`; sartor also accepts",
        "    `[name notin (istio-proxy)]`, every element but those.",
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
