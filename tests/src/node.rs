//! A one-node cluster with a real kubelet and containerd, for the deployed
//! trials: what `tests/k8s/node up` starts inside namespaces of its own (see
//! that script), reached from here through a loopback port forward.
//!
//! ```text
//! Node::start ──> tests/k8s/node up DIR IMAGE.tar ──> "ready DIR/kubeconfig"
//!      │ stdin (a pipe)                    │
//!      └── closed on drop or when this     └── undoes every host change,
//!          process dies, however               then exits
//! ```
//!
//! The script's stdin is a pipe from this process: when the test process
//! ends for any reason the pipe closes and the script takes the node down.
//! If the script itself is killed, the next start (or
//! `tests/k8s/node clean`) undoes what it left, from its record in
//! /run/sartor-node.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

use crate::cluster::{Kube, TempDir, Tools, Unavailable, run};
use crate::workspace_root;

/// The node script, `tests/k8s/node`.
pub fn script() -> PathBuf {
    workspace_root().join("tests/k8s/node")
}

/// A running node. Dropping it closes the script's stdin and waits while it
/// undoes everything.
#[derive(Debug)]
pub struct Node {
    /// kubectl and helm with an admin kubeconfig, through the loopback
    /// forward.
    pub kube: Kube,
    script: Child,
    stdin: Option<ChildStdin>,
    // Dropped last: the script has removed its own directory inside.
    dir: TempDir,
}

impl Node {
    /// Whether a node can run on this machine, without building or starting
    /// anything: root, and the Debian packages present or installable.
    ///
    /// # Errors
    /// [`Unavailable::Skip`] with the reason when it cannot.
    pub fn find() -> Result<(), Unavailable> {
        let uid = run(Command::new("id").arg("-u"), None)
            .map_err(|e| Unavailable::Skip(format!("`id -u` failed: {e}")))?;
        if uid.trim() != "0" {
            return Err(Unavailable::Skip(
                "the test node needs root (network, pid and mount namespaces, cgroups, containerd)"
                    .to_string(),
            ));
        }
        let have = |program: &str| {
            Command::new("sh")
                .args(["-c", &format!("command -v {program}")])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        if !have("containerd") && !have("apt-get") {
            return Err(Unavailable::Skip(
                "containerd is not installed and apt-get is not here to install it \
                 (the test node needs Debian's containerd, runc, containernetworking-plugins, \
                 buildah, socat)"
                    .to_string(),
            ));
        }
        Ok(())
    }

    /// Starts the node with the OCI archives `images` in its containerd,
    /// and waits until it is Ready (the script's own limit: 3 minutes after
    /// the tools are built).
    ///
    /// # Errors
    /// Why the node did not come up, with the script's output.
    pub fn start(tools: &Tools, images: &[&Path]) -> Result<Node, String> {
        let dir = TempDir::new("sartor-node")?;
        let log = dir.path().join("node-script.log");
        let err = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let mut script = Command::new(script())
            .arg("up")
            .arg(dir.path().join("node"))
            .args(images)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(err)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", script().display()))?;
        let stdin = script.stdin.take();
        let stdout = script
            .stdout
            .take()
            .ok_or_else(|| "the node script has no stdout".to_string())?;
        let mut said = String::new();
        let mut kubeconfig = None;
        for line in BufReader::new(stdout).lines() {
            let line = line.map_err(|e| format!("reading the node script's output: {e}"))?;
            if let Some(path) = line.strip_prefix("ready ") {
                kubeconfig = Some(PathBuf::from(path));
                break;
            }
            said.push_str(&line);
            said.push('\n');
        }
        let node = Node {
            kube: Kube::new(
                tools,
                kubeconfig.clone().unwrap_or_default(),
                dir.path().to_path_buf(),
            ),
            script,
            stdin,
            dir,
        };
        if kubeconfig.is_none() {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(60).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            drop(node);
            return Err(format!(
                "the node did not start: {}\n{}",
                said.trim(),
                tail.join("\n")
            ));
        }
        Ok(node)
    }

    /// A directory for the trials' own files (overlays, values), kept apart
    /// from the node's.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The node's own directory (logs under `logs/`), while it runs.
    pub fn node_dir(&self) -> PathBuf {
        self.dir.path().join("node")
    }

    /// The last `lines` lines of a component's log (`kubelet`,
    /// `kube-apiserver`, `containerd`, ...), for error messages.
    pub fn log_tail(&self, component: &str, lines: usize) -> String {
        let log = std::fs::read_to_string(self.node_dir().join(format!("logs/{component}.log")))
            .unwrap_or_default();
        let all: Vec<&str> = log.lines().collect();
        all.get(all.len().saturating_sub(lines)..)
            .unwrap_or_default()
            .join("\n")
    }

    /// The last `lines` lines of a component's log that contain `text`, for
    /// error messages (the API server's word on a webhook call that failed).
    pub fn log_matching(&self, component: &str, text: &str, lines: usize) -> String {
        let log = std::fs::read_to_string(self.node_dir().join(format!("logs/{component}.log")))
            .unwrap_or_default();
        let matching: Vec<&str> = log.lines().filter(|l| l.contains(text)).collect();
        matching
            .get(matching.len().saturating_sub(lines)..)
            .unwrap_or_default()
            .join("\n")
    }

    /// Stops the node: closes the script's stdin and waits while it undoes
    /// every host change. Returns the script's exit status.
    pub fn stop(&mut self) -> Option<std::process::ExitStatus> {
        drop(self.stdin.take());
        self.script.wait().ok()
    }
}

impl std::ops::Deref for Node {
    type Target = Kube;

    fn deref(&self) -> &Kube {
        &self.kube
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// What a node changes on the host, read from the host: compared before a
/// node starts and after it is gone, it shows whatever was left behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostState {
    /// Network namespaces named `sartor-node-*`, and whether /run/netns exists.
    pub netns: (Vec<String>, bool),
    /// Cgroups named `sartor-node-*` in any hierarchy.
    pub cgroups: Vec<String>,
    /// The sysctls the kubelet sets, with their values.
    pub sysctls: Vec<(String, String)>,
    /// Mount points (the host's) with `sartor-node` in them.
    pub mounts: Vec<String>,
    /// Processes whose command line names a node's directory.
    pub processes: Vec<String>,
    /// Records in /run/sartor-node of runs not yet undone.
    pub records: Vec<String>,
    /// Which of the fixed paths the node's components (and buildah) write
    /// whatever their configuration exist: the harness keeps them private.
    pub fixed_paths: Vec<String>,
}

/// Paths a kubelet, containerd, libcni or buildah write on their own.
const FIXED_PATHS: [&str; 6] = [
    "/var/lib/kubelet",
    "/var/lib/cni",
    "/var/lib/containers",
    "/var/lib/containerd",
    "/run/containerd",
    "/etc/cni",
];

/// The sysctls the kubelet writes (`tests/k8s/node` restores them).
const KUBELET_SYSCTLS: [&str; 6] = [
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
];

impl HostState {
    /// The host as it is now.
    pub fn now() -> HostState {
        let names = |dir: &str, keep: &dyn Fn(&str) -> bool| -> Vec<String> {
            let mut names: Vec<String> = std::fs::read_dir(dir)
                .into_iter()
                .flatten()
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| keep(n))
                .collect();
            names.sort();
            names
        };
        let node = |name: &str| name.starts_with("sartor-node-");
        let mut cgroups = Vec::new();
        for hierarchy in std::iter::once("/sys/fs/cgroup".to_string()).chain(
            names("/sys/fs/cgroup", &|_| true)
                .into_iter()
                .map(|h| format!("/sys/fs/cgroup/{h}")),
        ) {
            cgroups.extend(
                names(&hierarchy, &node)
                    .into_iter()
                    .map(|c| format!("{hierarchy}/{c}")),
            );
        }
        let mounts = std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split(' ').nth(4))
            .filter(|m| m.contains("sartor-node"))
            .map(str::to_string)
            .collect();
        let own = std::process::id().to_string();
        let processes = names("/proc", &|n| n.parse::<u32>().is_ok() && n != own)
            .into_iter()
            .filter_map(|pid| {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
                let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                cmdline
                    .contains("/sartor-node-")
                    .then(|| format!("{pid}: {}", cmdline.trim()))
            })
            .collect();
        HostState {
            netns: (
                names("/run/netns", &node),
                std::path::Path::new("/run/netns").exists(),
            ),
            cgroups,
            sysctls: KUBELET_SYSCTLS
                .iter()
                .map(|s| {
                    let value = std::fs::read_to_string(format!("/proc/sys/{s}"))
                        .unwrap_or_default()
                        .trim()
                        .to_string();
                    ((*s).to_string(), value)
                })
                .collect(),
            mounts,
            processes,
            records: names("/run/sartor-node", &|n| n.ends_with(".record")),
            fixed_paths: FIXED_PATHS
                .iter()
                .filter(|p| std::path::Path::new(p).exists())
                .map(|p| (*p).to_string())
                .collect(),
        }
    }
}
