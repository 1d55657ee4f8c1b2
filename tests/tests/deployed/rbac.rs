//! What the install's service account may do, asked of the API server.

use crate::install::{NAMESPACE, ensure};
use crate::{Suite, same};

/// The service account, as RBAC names it.
const ACCOUNT: &str = "system:serviceaccount:sartor-system:sartor";

/// `kubectl auth can-i --list --as USER -n NAMESPACE`, one row a line
/// (resource, non-resource URLs, resource names, verbs), whitespace
/// squeezed, sorted.
fn may(
    node: &sartor_tests::node::Node,
    user: &str,
    namespace: &str,
) -> Result<Vec<String>, String> {
    let list = node.kubectl(&["auth", "can-i", "--list", "--as", user, "-n", namespace])?;
    let mut rows: Vec<String> = list
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|l| !l.is_empty())
        .collect();
    rows.sort();
    Ok(rows)
}

/// What `user` may do in `namespace` beyond what every service account may
/// (discovery, self reviews: asked of `default/default`, which nothing binds).
fn granted(
    node: &sartor_tests::node::Node,
    user: &str,
    namespace: &str,
) -> Result<Vec<String>, String> {
    let everyone = may(node, "system:serviceaccount:default:default", namespace)?;
    Ok(may(node, user, namespace)?
        .into_iter()
        .filter(|row| !everyone.contains(row))
        .collect())
}

fn sorted(rows: &[&[&str]]) -> Vec<String> {
    let mut rows: Vec<String> = rows
        .iter()
        .flat_map(|r| r.iter())
        .map(|r| (*r).to_string())
        .collect();
    rows.sort();
    rows
}

/// The service account may do exactly what docs/operations.md's table
/// "What sartor may do" lists, cluster-wide and in its namespace, beyond
/// what every service account may; a write outside it is refused.
pub fn the_service_account_may_do_what_the_docs_list(suite: &mut Suite) -> Result<(), String> {
    ensure(suite)?;
    let node = suite.node()?;
    same(
        "granted anywhere (asked in default)",
        granted(node, ACCOUNT, "default")?,
        sorted(&[CLUSTER]),
    )?;
    same(
        "granted in sartor-system",
        granted(node, ACCOUNT, NAMESPACE)?,
        sorted(&[CLUSTER, OWN_NAMESPACE]),
    )?;
    match node.kubectl(&[
        "create",
        "configmap",
        "not-sartors",
        "-n",
        "default",
        "--as",
        ACCOUNT,
    ]) {
        Ok(out) => Err(format!("the service account created a ConfigMap: {out}")),
        Err(e) if e.contains("is forbidden") => Ok(()),
        Err(e) => Err(format!("refused, but not by RBAC: {e}")),
    }?;
    match node.kubectl(&["get", "secrets", "-n", NAMESPACE, "--as", ACCOUNT]) {
        Ok(out) => Err(format!("the service account listed Secrets: {out}")),
        Err(e) if e.contains("is forbidden") => Ok(()),
        Err(e) => Err(format!("refused, but not by RBAC: {e}")),
    }
}

/// docs/operations.md, "What sartor may do", the cluster rows, as
/// `kubectl auth can-i --list` prints them.
const CLUSTER: &[&str] = &[
    "assign.mutations.sartor.dev [] [] [get list watch]",
    "assignimage.mutations.sartor.dev [] [] [get list watch]",
    "assignmetadata.mutations.sartor.dev [] [] [get list watch]",
    "modifyset.mutations.sartor.dev [] [] [get list watch]",
    "assign.mutations.sartor.dev/status [] [] [patch]",
    "assignimage.mutations.sartor.dev/status [] [] [patch]",
    "assignmetadata.mutations.sartor.dev/status [] [] [patch]",
    "modifyset.mutations.sartor.dev/status [] [] [patch]",
    "assign.mutations.gatekeeper.sh [] [] [get list watch]",
    "assignimage.mutations.gatekeeper.sh [] [] [get list watch]",
    "assignmetadata.mutations.gatekeeper.sh [] [] [get list watch]",
    "modifyset.mutations.gatekeeper.sh [] [] [get list watch]",
    "namespaces [] [] [get list watch]",
    "providers.externaldata.gatekeeper.sh [] [] [get list watch]",
    "mutatingwebhookconfigurations.admissionregistration.k8s.io [] [sartor-mutating] [get update]",
    "validatingwebhookconfigurations.admissionregistration.k8s.io [] [sartor-validating] [get update]",
];

/// The same table's rows for `sartor-system`.
const OWN_NAMESPACE: &[&str] = &[
    "secrets [] [] [create]",
    "secrets [] [sartor-webhook-server-cert] [get update]",
];
