//! The API server going away under a running replica: the webhook keeps
//! answering from the last snapshot it has, and once the API server is back
//! (its watch cache starts afresh, so the replica's watches resume or relist
//! after `410 Gone`), new mutators come into force and status is written.

use std::time::Duration;

use base64::Engine as _;
use sartor_tests::https;
use serde_json::{Value, json};

use crate::admission::examples_enforced;
use crate::{Suite, eventually, http_get, json as parse, same};

const AFTER_RESTART: &str = r#"
apiVersion: mutations.sartor.dev/v1
kind: AssignMetadata
metadata:
  name: after-restart
spec:
  match:
    namespaces: [default]
  location: metadata.labels.restarted
  parameters:
    assign:
      value: "yes"
"#;

/// The patch the replica at `addr` answers for a Pod in `default`, asked
/// directly over TLS (the API server is not needed), trusting `ca_pem`.
fn patch_from(addr: std::net::SocketAddr, ca_pem: &str) -> Result<Value, String> {
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "direct", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "namespace": "default", "name": "direct", "operation": "CREATE",
            "object": {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "direct", "namespace": "default"},
                "spec": {"containers": [{"name": "app", "image": "shop/app:1.0"}]},
            },
        },
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let options = https::Options {
            ca_pem: ca_pem.to_string(),
            server_name: Some("sartor-webhook.sartor-system.svc".to_string()),
            ..https::Options::default()
        };
        let mut client = https::connect_with(addr, &options).await?;
        let answer = client.post("/v1/mutate", review.to_string()).await?;
        let answer = parse(&answer.body)?;
        let patch = answer["response"]["patch"]
            .as_str()
            .ok_or_else(|| format!("no patch in {answer}"))?;
        let patch = base64::engine::general_purpose::STANDARD
            .decode(patch)
            .map_err(|e| e.to_string())?;
        serde_json::from_slice(&patch).map_err(|e| e.to_string())
    })
}

/// With the API server stopped, the replica stays ready and mutates what it
/// is sent as before; with it back, a mutator created then is enforced (its
/// status written by the replica) and applied to a Pod the API server admits.
pub fn the_webhook_answers_while_the_api_server_is_down_and_catches_up_after(
    suite: &mut Suite,
) -> Result<(), String> {
    let pod = examples_enforced(suite)?;
    let (addr, metrics) = match &suite.replica {
        Some(replica) => (replica.addr, replica.metrics),
        None => return Err("no replica".to_string()),
    };
    let ca_pem = std::fs::read_to_string(suite.plane.dir().join(format!("certs-{pod}/ca.crt")))
        .map_err(|e| e.to_string())?;
    let before = patch_from(addr, &ca_pem)?;

    suite.plane.stop_apiserver();
    // Long enough for the replica's watches to fail and start backing off.
    std::thread::sleep(Duration::from_secs(5));
    same(
        "/readyz with the API server down",
        http_get(metrics, "/readyz")?.0,
        200,
    )?;
    same(
        "the patch with the API server down",
        patch_from(addr, &ca_pem)?,
        before,
    )?;

    suite.plane.start_apiserver()?;
    let plane = &suite.plane;
    plane.kubectl_with_input(&["apply", "-f", "-"], Some(AFTER_RESTART))?;
    crate::admission::wait_enforced(
        suite,
        "assignmetadata.mutations.sartor.dev",
        &["after-restart"],
        &pod,
    )?;
    eventually(
        "the new label on the probe",
        Duration::from_secs(30),
        || {
            let labels = crate::probe_pod(suite)?["metadata"]["labels"].clone();
            same("restarted label", labels["restarted"].clone(), json!("yes"))
        },
    )?;
    suite.plane.kubectl(&[
        "delete",
        "assignmetadata.mutations.sartor.dev",
        "after-restart",
    ])?;
    Ok(())
}
