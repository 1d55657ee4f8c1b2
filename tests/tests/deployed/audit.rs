//! The in-cluster audit's leader election, across the replicas.

use std::time::{Duration, Instant};

use crate::install::{NAMESPACE, available, overlay, replica_names};
use crate::{Suite, eventually, same};

/// The replica holding the Lease `sartor-audit`.
fn holder(node: &sartor_tests::node::Node) -> Result<String, String> {
    let holder = node.kubectl(&[
        "get",
        "lease",
        "sartor-audit",
        "-n",
        NAMESPACE,
        "-o",
        "jsonpath={.spec.holderIdentity}",
    ])?;
    if holder.trim().is_empty() {
        return Err("the Lease has no holder".to_string());
    }
    Ok(holder.trim().to_string())
}

/// With the audit component applied (kustomize, as documented), one
/// replica holds the Lease and says so in `sartor_audit_leader`; deleting
/// its Pod hands the Lease to another running replica within the
/// documented 15 s (the holder gives it up at SIGTERM; the time taken is
/// printed).
pub fn the_lease_moves_when_its_holder_is_deleted(suite: &mut Suite) -> Result<(), String> {
    crate::install::ensure(suite)?;
    let dir = overlay(
        suite,
        &suite.node()?.dir().join("overlay-audit"),
        &["manifests/optional/audit"],
    )?;
    // Over the running install, as docs/operations.md says for a
    // server-side re-apply: the replicas own the webhook's derived rules.
    suite.node()?.kubectl(&[
        "apply",
        "--server-side",
        "--force-conflicts",
        "-k",
        &dir.display().to_string(),
    ])?;
    // From now on the audit's overlay is the install to delete.
    suite.overlay = Some(dir);
    let node = suite.node()?;
    let pods = available(node, "sartor", &suite.image)?;
    let first = eventually("a Lease holder", Duration::from_secs(60), || holder(node))?;
    if !pods.contains(&first) {
        return Err(format!(
            "the Lease is held by {first}, not a replica of {pods:?}"
        ));
    }
    let leaders: Vec<(String, bool)> = pods
        .iter()
        .map(|pod| {
            let metrics = node
                .kubectl(&[
                    "get",
                    "--raw",
                    &format!("/api/v1/namespaces/{NAMESPACE}/pods/http:{pod}:8888/proxy/metrics"),
                ])
                .unwrap_or_default();
            (
                pod.clone(),
                metrics.lines().any(|l| l == "sartor_audit_leader 1"),
            )
        })
        .collect();
    let mut want: Vec<(String, bool)> = pods.iter().map(|p| (p.clone(), *p == first)).collect();
    want.sort();
    let mut leaders = leaders;
    leaders.sort();
    same("sartor_audit_leader by replica", leaders, want)?;

    let deleted = Instant::now();
    node.kubectl(&["delete", "pod", &first, "-n", NAMESPACE, "--wait=false"])?;
    let next = eventually(
        "another replica holding the Lease",
        Duration::from_secs(60),
        || {
            let now = holder(node)?;
            if now == first {
                Err(format!("still {first}"))
            } else {
                Ok(now)
            }
        },
    )?;
    let took = deleted.elapsed();
    eprintln!("deployed: the Lease moved from {first} to {next} {took:?} after the delete");
    let survivors = replica_names(node, "sartor")?;
    // Another running replica: one that was there, or the one the
    // ReplicaSet started in the deleted one's place.
    if !survivors.contains(&next) {
        return Err(format!(
            "the Lease went to {next}, not one of the running replicas {survivors:?}"
        ));
    }
    if took > Duration::from_secs(15) {
        return Err(format!(
            "the Lease took {took:?} to move; the docs say 15 s"
        ));
    }
    Ok(())
}
