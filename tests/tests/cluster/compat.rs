//! Gatekeeper's mutators next to sartor's, and a cluster missing one of
//! sartor's CRDs.

use std::time::Duration;

use sartor_api::{GATEKEEPER_GROUP, MutatorKind};
use serde_json::Value;

use crate::admission::examples_enforced;
use crate::{Sartor, Suite, eventually, http_get, repo_path, same};

/// Gatekeeper's CRD of `kind`, generated from sartor's (same spec; sartor's
/// schema is Gatekeeper's): its group, its name, the versions Gatekeeper
/// serves the kind in, the first one stored.
fn gatekeeper_crd(kind: MutatorKind) -> Result<Value, String> {
    let mut crd = serde_json::to_value(sartor_api::crd::crd(kind)).map_err(|e| e.to_string())?;
    let plural = crd["spec"]["names"]["plural"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    crd["metadata"]["name"] = Value::from(format!("{plural}.{GATEKEEPER_GROUP}"));
    crd["spec"]["group"] = Value::from(GATEKEEPER_GROUP);
    let template = crd["spec"]["versions"][0].clone();
    let versions: Vec<Value> = kind
        .gatekeeper_versions()
        .iter()
        .enumerate()
        .map(|(index, version)| {
            let mut served = template.clone();
            served["name"] = Value::from(*version);
            served["storage"] = Value::from(index == 0);
            served
        })
        .collect();
    crd["spec"]["versions"] = Value::from(versions);
    Ok(crd)
}

/// The labels of the probe Pod in `default`, as the API server would store it.
fn probe_labels(suite: &Suite) -> Result<Value, String> {
    let pod = crate::probe_pod(suite)?;
    Ok(pod["metadata"]["labels"].clone())
}

/// With Gatekeeper's mutation CRDs installed (generated for its group, in
/// the versions it serves), `--gatekeeper-compat` enforces the Gatekeeper-
/// apiVersion examples as they are, and never writes their status.
pub fn gatekeeper_mutators_are_enforced_with_gatekeeper_compat(
    suite: &mut Suite,
) -> Result<(), String> {
    examples_enforced(suite)?;
    let plane = &suite.plane;
    for kind in MutatorKind::ALL {
        let crd = gatekeeper_crd(kind)?;
        plane.kubectl_with_input(
            &["apply", "--server-side", "-f", "-"],
            Some(&crd.to_string()),
        )?;
        let name = crd["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        plane.wait_established(Some(&name))?;
    }
    plane.kubectl(&["apply", "-f", &repo_path("examples/gatekeeper")])?;
    // sartor's own owner label would hide Gatekeeper's (sartor's wins).
    plane.kubectl(&[
        "delete",
        "assignmetadata.mutations.sartor.dev",
        "owner-from-namespace",
    ])?;
    eventually(
        "no owner label without compat",
        Duration::from_secs(10),
        || same("probe labels", probe_labels(suite)?, Value::Null),
    )?;

    if let Some(old) = suite.replica.take() {
        let _ = old.stop();
    }
    let port = suite.applied()?.webhook_port;
    suite.replica = Some(Sartor::start(
        suite,
        "replica-gk",
        port,
        &["--gatekeeper-compat"],
    )?);
    let plane = &suite.plane;
    eventually("Gatekeeper's owner label", Duration::from_secs(20), || {
        same(
            "probe labels",
            probe_labels(suite)?,
            serde_json::json!({"owner": "default"}),
        )
    })?;
    // Once replica-gk has written its status to sartor's own objects, it
    // would have written Gatekeeper's too.
    crate::admission::wait_enforced(
        suite,
        "assign.mutations.sartor.dev",
        &["always-pull-pods"],
        "replica-gk",
    )?;
    let status = plane.kubectl(&[
        "get",
        "assignmetadata.mutations.gatekeeper.sh",
        "owner-from-namespace",
        "-o",
        "jsonpath={.status}",
    ])?;
    same("Gatekeeper object's status", status.as_str(), "")?;
    plane.kubectl(&[
        "apply",
        "-f",
        &repo_path("examples/mutators/owner-label.yaml"),
    ])?;
    Ok(())
}

/// A replica started while one of sartor's CRDs is missing turns ready and
/// serves the kinds that are there; /readyz, the metric and one log line
/// name the missing CRD. Once it is installed, its mutators come into force.
pub fn a_missing_crd_is_named_and_the_other_kinds_served(suite: &mut Suite) -> Result<(), String> {
    examples_enforced(suite)?;
    if let Some(old) = suite.replica.take() {
        let _ = old.stop();
    }
    let plane = &suite.plane;
    plane.kubectl(&[
        "delete",
        "crd",
        "assignimage.mutations.sartor.dev",
        "--wait=true",
    ])?;
    let port = suite.applied()?.webhook_port;
    let sartor = Sartor::start(suite, "replica-c", port, &[])?;
    let readyz = http_get(sartor.metrics, "/readyz")?;
    let metric = |sartor: &Sartor| -> Result<Vec<String>, String> {
        let (_, body) = http_get(sartor.metrics, "/metrics")?;
        Ok(body
            .lines()
            .filter(|l| {
                l.starts_with("sartor_mutator_crd_installed{") && l.contains("mutations.sartor.dev")
            })
            .map(str::to_string)
            .collect())
    };
    let log = sartor.log();
    let warned: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("mutator CRD not installed"))
        .collect();
    suite.replica = Some(sartor);
    same(
        "/readyz",
        readyz,
        (
            200,
            "ok; not installed: assignimage.mutations.sartor.dev (AssignImage mutators are not enforced)\n".to_string(),
        ),
    )?;
    let sartor = suite.replica.as_ref().ok_or("no replica")?;
    let mut lines = metric(sartor)?;
    lines.sort();
    same(
        "sartor_mutator_crd_installed",
        lines,
        vec![
            r#"sartor_mutator_crd_installed{group="mutations.sartor.dev",kind="Assign"} 1"#
                .to_string(),
            r#"sartor_mutator_crd_installed{group="mutations.sartor.dev",kind="AssignImage"} 0"#
                .to_string(),
            r#"sartor_mutator_crd_installed{group="mutations.sartor.dev",kind="AssignMetadata"} 1"#
                .to_string(),
            r#"sartor_mutator_crd_installed{group="mutations.sartor.dev",kind="ModifySet"} 1"#
                .to_string(),
        ],
    )?;
    same("warnings naming the CRD", warned.len(), 1)?;
    let line = warned.first().copied().unwrap_or_default();
    for part in [
        "kind=AssignImage",
        "crd=assignimage.mutations.sartor.dev",
        "install=\"kubectl apply --server-side -k manifests/ (or: kubectl apply --server-side -f crds/)\"",
    ] {
        if !line.contains(part) {
            return Err(format!("the warning lacks {part:?}: {line}"));
        }
    }
    // The other kinds are served: pull policy set, registry not.
    eventually("the other kinds enforced", Duration::from_secs(10), || {
        same(
            "probe",
            crate::lifecycle::probe(suite)?,
            ("shop/app:1.0".to_string(), "Always".to_string()),
        )
    })?;

    let plane = &suite.plane;
    plane.kubectl(&[
        "apply",
        "--server-side",
        "-f",
        &repo_path("crds/assignimage.yaml"),
    ])?;
    plane.wait_established(Some("assignimage.mutations.sartor.dev"))?;
    plane.kubectl(&[
        "apply",
        "-f",
        &repo_path("examples/mutators/pin-registry.yaml"),
    ])?;
    let installed = std::time::Instant::now();
    eventually("the CRD installed", Duration::from_secs(60), || {
        same(
            "/readyz",
            http_get(sartor.metrics, "/readyz")?,
            (200, "ok\n".to_string()),
        )?;
        same(
            "probe",
            crate::lifecycle::probe(suite)?,
            crate::lifecycle::mutated(),
        )
    })?;
    eprintln!(
        "missing CRD installed: readyz ok and its mutator enforced {:?} after it was applied",
        installed.elapsed()
    );
    if !sartor.log().contains("mutator CRD installed") {
        return Err(format!(
            "no 'mutator CRD installed' line:\n{}",
            sartor.log()
        ));
    }
    Ok(())
}

/// With none of sartor's CRDs served (a wrong install, or the wrong API
/// server), a replica does not turn ready: it would enforce nothing. Its
/// `/readyz` names the CRDs; it turns ready once they are installed.
pub fn no_crd_of_sartors_keeps_the_replica_not_ready(suite: &mut Suite) -> Result<(), String> {
    crate::install::ensure(suite)?;
    if let Some(old) = suite.replica.take() {
        let _ = old.stop();
    }
    let crds: Vec<String> = MutatorKind::ALL
        .iter()
        .map(|kind| format!("{}.mutations.sartor.dev", kind.as_str().to_lowercase()))
        .collect();
    let mut delete = vec!["delete", "crd", "--wait=true", "--ignore-not-found"];
    delete.extend(crds.iter().map(String::as_str));
    suite.plane.kubectl(&delete)?;
    let port = crate::install::ensure(suite)?.webhook_port;
    let sartor = Sartor::spawn(suite, "replica-d", port, &[])?;
    let not_ready = eventually("the CRDs named", Duration::from_secs(20), || {
        same(
            "/readyz",
            http_get(sartor.metrics, "/readyz")?,
            (
                503,
                format!(
                    "not ready: no mutator snapshot loaded yet; not installed: {}\n",
                    crds.join(", ")
                ),
            ),
        )
    });
    let reinstalled = not_ready.and_then(|()| {
        crate::crds::ensure_crds(suite)?;
        eventually("ready once installed", Duration::from_secs(30), || {
            same(
                "/readyz",
                http_get(sartor.metrics, "/readyz")?,
                (200, "ok\n".to_string()),
            )
        })
    });
    let log = sartor.log();
    suite.replica = Some(sartor);
    reinstalled?;
    let warned = log
        .lines()
        .filter(|l| l.contains("none of sartor's mutator CRDs is served; not ready until one is"))
        .count();
    same("warnings that no CRD is served", warned, 1)
}
