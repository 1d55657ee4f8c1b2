//! The deployed suite: sartor as users run it. The image is built here
//! (`image/build`, no registry), a real kubelet runs it on a one-node
//! cluster (`tests/k8s/node`: kubelet, containerd, kube-proxy, the
//! controller-manager and scheduler, in namespaces of their own), and the
//! install is applied as documented, with kustomize and with Helm; the API
//! server calls the webhook through its Service.
//!
//! Where the node cannot run (not root, packages missing and not
//! installable, no Go), every trial is reported as ignored with the reason;
//! with `SARTOR_REQUIRE_CLUSTER` set (CI) that is a failure instead.
//!
//! Run it alone: `cargo test -p sartor-tests --test deployed` (as root). The
//! image is built from the binary the test profile builds, or taken from
//! `SARTOR_IMAGE` (an OCI archive from `image/build`, as `.ci/run` does with
//! the release binary).

// Test code: a panic here is a failed test, not a crash on user input.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

mod audit;
mod faults;
mod harness;
mod install;
mod pod;
mod rbac;
mod writes;

use std::path::PathBuf;
use std::process::{Command, ExitCode};

use sartor_tests::cluster::{TempDir, Tools, run};
use sartor_tests::node::{HostState, Node};
use sartor_tests::suite::Check;
pub use sartor_tests::suite::{eventually, json, same};

/// Every trial, in the order they run.
const TRIALS: &[Check<Suite>] = sartor_tests::trials![
    install::kustomize_install_comes_up_from_the_image,
    install::examples_are_enforced_through_the_service,
    pod::replicas_run_restricted_read_only_as_65532_with_the_projected_token,
    rbac::the_service_account_may_do_what_the_docs_list,
    audit::the_lease_moves_when_its_holder_is_deleted,
    faults::a_rollout_loses_no_write,
    faults::a_deleted_replica_loses_no_write,
    faults::a_killed_replica_loses_only_what_reached_it,
    faults::an_api_server_or_etcd_restart_gives_no_wrong_answer,
    faults::an_eviction_keeps_a_replica_serving,
    faults::a_replica_shuts_down_in_order,
    faults::the_pre_stop_pause_is_measured_by_turning_it_off,
    install::kubectl_delete_leaves_no_webhook_configuration,
    faults::a_helm_upgrade_loses_no_write,
    install::helm_install_comes_up_and_uninstall_leaves_nothing,
    harness::a_killed_harness_leaves_nothing_for_the_next_start,
];

/// The image the trials install.
pub struct Image {
    /// The OCI archive (`image/build`'s output).
    pub archive: PathBuf,
    /// Its repository, as the install's `images:` override names it.
    pub repository: String,
    /// Its tag.
    pub tag: String,
    /// The image ID (its config's digest), as the kubelet reports it in a
    /// container's `imageID`.
    pub id: String,
}

/// What the trials share.
pub struct Suite {
    /// The node, until the last trial takes it down itself.
    pub node: Option<Node>,
    /// The image loaded into the node's containerd.
    pub image: Image,
    /// The tools (kubectl, helm, the node script's binaries).
    pub tools: Tools,
    /// The kustomize overlay, once applied.
    pub overlay: Option<PathBuf>,
    /// The host before the node started, to compare with after.
    pub host_before: HostState,
    /// Where the image is built when `SARTOR_IMAGE` is not set.
    _dir: TempDir,
}

impl Suite {
    /// The running node.
    pub fn node(&self) -> Result<&Node, String> {
        self.node
            .as_ref()
            .ok_or_else(|| "the node was taken down by an earlier trial".to_string())
    }
}

/// The image's repository and tag when this suite builds it.
const REPOSITORY: &str = "localhost/sartor";
const TAG: &str = "deployed-test";

fn start(tools: &Tools) -> Result<Suite, String> {
    let dir = TempDir::new("sartor-deployed")?;
    let image = image(&dir)?;
    // Anything an earlier, killed run left is undone first.
    run(
        Command::new(sartor_tests::node::script()).arg("clean"),
        None,
    )?;
    let host_before = HostState::now();
    let node = Node::start(tools, &[&image.archive])?;
    Ok(Suite {
        node: Some(node),
        image,
        tools: tools.clone(),
        overlay: None,
        host_before,
        _dir: dir,
    })
}

/// `SARTOR_IMAGE`, or the image built now from the binary under test.
fn image(dir: &TempDir) -> Result<Image, String> {
    let archive = match std::env::var_os("SARTOR_IMAGE") {
        Some(path) => PathBuf::from(path),
        None => {
            let out = dir.path().join("sartor.oci.tar");
            run(
                Command::new(repo().join("image/build"))
                    .arg("--binary")
                    .arg(sartor_tests::binary::sartor()?)
                    .args(["--tag", &format!("{REPOSITORY}:{TAG}")])
                    .arg("--out")
                    .arg(&out),
                None,
            )
            .map_err(|e| format!("image/build: {e}"))?;
            out
        }
    };
    let index = run(
        Command::new("tar")
            .arg("-xOf")
            .arg(&archive)
            .arg("index.json"),
        None,
    )
    .map_err(|e| format!("reading {}: {e}", archive.display()))?;
    let index = json(&index)?;
    let manifest = &index["manifests"][0];
    let reference = manifest["annotations"]["org.opencontainers.image.ref.name"]
        .as_str()
        .ok_or_else(|| format!("{}: the index names no image", archive.display()))?;
    let (repository, tag) = reference
        .rsplit_once(':')
        .ok_or_else(|| format!("{}: {reference} has no tag", archive.display()))?;
    let blob = |digest: &str| {
        let path = format!("blobs/{}", digest.replacen(':', "/", 1));
        run(
            Command::new("tar").arg("-xOf").arg(&archive).arg(&path),
            None,
        )
        .map_err(|e| format!("reading {path} of {}: {e}", archive.display()))
    };
    let manifest = json(&blob(manifest["digest"].as_str().unwrap_or_default())?)?;
    Ok(Image {
        repository: repository.to_string(),
        tag: tag.to_string(),
        id: manifest["config"]["digest"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        archive,
    })
}

fn main() -> ExitCode {
    sartor_tests::suite::main_where("deployed", TRIALS, Node::find, start)
}

/// The repository root.
pub fn repo() -> PathBuf {
    sartor_tests::workspace_root()
}

/// A path in the repository, as a string for command lines.
pub fn repo_path(relative: &str) -> String {
    repo().join(relative).display().to_string()
}

/// Runs `sartor args...` (the binary under test) to completion.
pub fn sartor(args: &[&str]) -> Result<String, String> {
    run(
        Command::new(sartor_tests::binary::sartor()?).args(args),
        None,
    )
    .map_err(|e| format!("sartor {}: {e}", args.join(" ")))
}
