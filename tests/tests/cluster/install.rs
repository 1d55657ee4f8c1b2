//! The documented install (manifests/, kustomize) on a real API server.

use sartor_tests::cluster::{free_port, relative_to};

use crate::{Install, Suite, json, repo_path, same};

/// The local overlay every install test uses: manifests/ as documented, with
/// the webhook's Service made an ExternalName for `localhost` (no kubelet or
/// kube-proxy runs here; the API server resolves an ExternalName itself and
/// still verifies the certificate for `sartor-webhook.sartor-system.svc`), and
/// the webhooks' port set to where the test's sartor listens.
fn overlay(suite: &Suite, port: u16) -> Result<std::path::PathBuf, String> {
    let dir = suite.plane.dir().join("overlay");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let port_patch =
        format!("- op: replace\n  path: /webhooks/0/clientConfig/service/port\n  value: {port}\n");
    let kustomization = format!(
        r#"apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- {manifests}
patches:
- target: {{kind: Service, name: sartor-webhook}}
  patch: |-
    - op: replace
      path: /spec
      value:
        type: ExternalName
        externalName: localhost
- target: {{kind: MutatingWebhookConfiguration, name: sartor-mutating}}
  patch: |-
{mutating}- target: {{kind: ValidatingWebhookConfiguration, name: sartor-validating}}
  patch: |-
{validating}"#,
        manifests = relative_to(&dir, &crate::repo().join("manifests")),
        mutating = indent(&port_patch, 4),
        // The mutator check and the exemption-label guard.
        validating = indent(
            &format!(
                "{port_patch}{}",
                port_patch.replace("/webhooks/0/", "/webhooks/1/")
            ),
            4
        ),
    );
    std::fs::write(dir.join("kustomization.yaml"), kustomization).map_err(|e| e.to_string())?;
    Ok(dir)
}

fn indent(text: &str, by: usize) -> String {
    text.lines()
        .map(|l| format!("{}{l}\n", " ".repeat(by)))
        .collect()
}

/// The install, applied (server-side) unless an earlier trial did: for
/// trials run alone (`cargo test -p sartor-tests --test cluster NAME`).
pub fn ensure(suite: &mut Suite) -> Result<&Install, String> {
    if suite.install.is_none() {
        let port = free_port()?;
        let dir = overlay(suite, port)?;
        suite
            .plane
            .kubectl(&["apply", "--server-side", "-k", &dir.display().to_string()])?;
        suite.plane.wait_established(None)?;
        suite.install = Some(Install {
            webhook_port: port,
            overlay: dir,
        });
    }
    suite
        .install
        .as_ref()
        .ok_or_else(|| "no install".to_string())
}

/// `kubectl apply -k` of the install, client-side, then again server-side
/// over it (what an admin moving to server-side apply does): both succeed,
/// and the objects are there with what manifests/ says.
pub fn kustomize_client_side_then_server_side(suite: &mut Suite) -> Result<(), String> {
    let port = free_port()?;
    let dir = overlay(suite, port)?;
    let dir_arg = dir.display().to_string();
    let plane = &suite.plane;
    let client_side = plane.kubectl(&["apply", "-k", &dir_arg])?;
    let out = plane.kubectl(&["apply", "--server-side", "-k", &dir_arg])?;
    let mut applied: Vec<&str> = out.lines().collect();
    applied.sort_unstable();
    // Client-side: the same objects (created, or configured where the CRDs
    // were applied before).
    let mut objects: Vec<&str> = client_side
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    objects.sort_unstable();
    same(
        "objects applied client-side",
        objects,
        applied
            .iter()
            .filter_map(|l| l.split_whitespace().next())
            .collect(),
    )?;
    same(
        "objects applied",
        applied,
        vec![
            "clusterrole.rbac.authorization.k8s.io/sartor serverside-applied",
            "clusterrolebinding.rbac.authorization.k8s.io/sartor serverside-applied",
            "customresourcedefinition.apiextensions.k8s.io/assign.mutations.sartor.dev serverside-applied",
            "customresourcedefinition.apiextensions.k8s.io/assignimage.mutations.sartor.dev serverside-applied",
            "customresourcedefinition.apiextensions.k8s.io/assignmetadata.mutations.sartor.dev serverside-applied",
            "customresourcedefinition.apiextensions.k8s.io/modifyset.mutations.sartor.dev serverside-applied",
            "deployment.apps/sartor serverside-applied",
            "mutatingwebhookconfiguration.admissionregistration.k8s.io/sartor-mutating serverside-applied",
            "namespace/sartor-system serverside-applied",
            "poddisruptionbudget.policy/sartor serverside-applied",
            "role.rbac.authorization.k8s.io/sartor serverside-applied",
            "rolebinding.rbac.authorization.k8s.io/sartor serverside-applied",
            "service/sartor-webhook serverside-applied",
            "serviceaccount/sartor serverside-applied",
            "validatingwebhookconfiguration.admissionregistration.k8s.io/sartor-validating serverside-applied",
        ],
    )?;
    // What is stored is what the install says, field for field.
    let diff = plane.kubectl(&["diff", "--server-side", "-k", &dir_arg])?;
    same("kubectl diff after the install", diff.as_str(), "")?;
    let mutating = json(&plane.kubectl(&[
        "get",
        "mutatingwebhookconfiguration",
        "sartor-mutating",
        "-o",
        "json",
    ])?)?;
    let webhook = &mutating["webhooks"][0];
    same(
        "mutating webhook",
        (
            webhook["failurePolicy"].as_str(),
            webhook["timeoutSeconds"].as_i64(),
            webhook["reinvocationPolicy"].as_str(),
            webhook["clientConfig"]["service"]["name"].as_str(),
            webhook["clientConfig"]["service"]["port"].as_i64(),
        ),
        (
            Some("Ignore"),
            Some(1),
            Some("IfNeeded"),
            Some("sartor-webhook"),
            Some(i64::from(port)),
        ),
    )?;
    suite.install = Some(Install {
        webhook_port: port,
        overlay: dir,
    });
    Ok(())
}

/// Everything under examples/mutators applies (server-side dry run) to a
/// cluster that has sartor's CRDs: sartor's apiVersion throughout.
pub fn examples_apply_with_only_sartors_crds(suite: &mut Suite) -> Result<(), String> {
    crate::crds::ensure_crds(suite)?;
    let plane = &suite.plane;
    let out = plane.kubectl(&[
        "apply",
        "--dry-run=server",
        "-f",
        &repo_path("examples/mutators"),
    ])?;
    let mut applied: Vec<&str> = out.lines().collect();
    applied.sort_unstable();
    same(
        "examples applied (server dry run)",
        applied,
        vec![
            "assign.mutations.sartor.dev/always-pull-deployments created (server dry run)",
            "assign.mutations.sartor.dev/always-pull-pods created (server dry run)",
            "assign.mutations.sartor.dev/log-sidecar created (server dry run)",
            "assign.mutations.sartor.dev/no-host-ports created (server dry run)",
            "assign.mutations.sartor.dev/read-only-root created (server dry run)",
            "assign.mutations.sartor.dev/seccomp-runtime-default created (server dry run)",
            "assignimage.mutations.sartor.dev/pin-registry created (server dry run)",
            "assignmetadata.mutations.sartor.dev/owner-from-namespace created (server dry run)",
            "assignmetadata.mutations.sartor.dev/team-from-namespace created (server dry run)",
            "modifyset.mutations.sartor.dev/no-debug-flag created (server dry run)",
        ],
    )
}
