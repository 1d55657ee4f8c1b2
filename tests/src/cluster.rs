//! A real Kubernetes control plane for the end-to-end suite: etcd and
//! kube-apiserver started on free loopback ports with generated certificates
//! and a kubeconfig, as controller-runtime's envtest does, plus the pinned
//! `kubectl` and `helm` to drive it.
//!
//! ```text
//! tests/k8s/provision ──> ~/.cache/sartor/k8s/<versions>/bin/{etcd,kube-apiserver,kubectl,helm}
//!                                   │
//! ControlPlane::start ──> etcd :E <── kube-apiserver :A (TLS, client certs, RBAC) <── kubeconfig
//! ```
//!
//! Every process runs under a small `sh` guard reading its stdin from this
//! process: when the test process exits for any reason (a failed assertion,
//! a panic, SIGKILL), the pipe closes and the guard stops the process, so no
//! etcd or API server is left behind.

use std::io::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use crate::workspace_root;

/// The pinned test tools, as `tests/k8s/provision` built them.
#[derive(Debug, Clone)]
pub struct Tools {
    /// The directory holding `etcd`, `kube-apiserver`, `kubectl` and `helm`.
    pub bin: PathBuf,
}

impl Tools {
    /// The pinned tools if they are built; `None` if they can be built here
    /// (Go is installed), without building them.
    ///
    /// # Errors
    /// [`Unavailable::Skip`] when Go is missing.
    pub fn find() -> Result<Option<Tools>, Unavailable> {
        let script = workspace_root().join("tests/k8s/provision");
        if let Ok(output) = Command::new(&script).arg("--check").output()
            && output.status.success()
        {
            return Ok(Some(Tools {
                bin: PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()),
            }));
        }
        if Command::new("go").arg("version").output().is_err() {
            return Err(Unavailable::Skip(
                "go not found: the suite builds etcd, kube-apiserver, kubectl and helm \
                 from their Go modules (tests/k8s/provision); install Go 1.25+ to run it"
                    .to_string(),
            ));
        }
        Ok(None)
    }

    /// Finds the pinned tools, building them with `tests/k8s/provision` when
    /// they are missing (11 minutes measured cold on 2 cores, once per machine).
    ///
    /// # Errors
    /// Why the suite cannot run here (no Go, or the build failed), to be
    /// reported as the reason its tests are skipped or failed.
    pub fn provision() -> Result<Tools, Unavailable> {
        if let Some(tools) = Tools::find()? {
            return Ok(tools);
        }
        let script = workspace_root().join("tests/k8s/provision");
        eprintln!("building the test control plane with tests/k8s/provision");
        let output = Command::new(&script)
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| Unavailable::Broken(format!("running {}: {e}", script.display())))?;
        if !output.status.success() {
            return Err(Unavailable::Broken(format!(
                "{} failed ({})",
                script.display(),
                output.status
            )));
        }
        Ok(Tools {
            bin: PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()),
        })
    }

    /// Where the tool `name` (`kubectl`, `helm`, ...) is.
    pub fn path(&self, name: &str) -> PathBuf {
        self.bin.join(name)
    }

    /// The version line a tool prints of itself (`kubectl version --client`,
    /// `helm version --short`, ...), for the suite's report.
    pub fn version(&self, name: &str, args: &[&str]) -> String {
        Command::new(self.path(name))
            .args(args)
            .output()
            .map(|o| {
                let text = String::from_utf8_lossy(&o.stdout).into_owned()
                    + &String::from_utf8_lossy(&o.stderr);
                text.lines().next().unwrap_or_default().trim().to_string()
            })
            .unwrap_or_else(|e| format!("{name}: {e}"))
    }
}

/// Why the control plane is not available.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unavailable {
    /// A prerequisite is missing on this machine: the suite is skipped.
    Skip(String),
    /// The tools exist (or could be built) but something failed: the suite fails.
    Broken(String),
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unavailable::Skip(reason) | Unavailable::Broken(reason) => f.write_str(reason),
        }
    }
}

/// A process started under the stdin guard (see the module docs). Dropping
/// it stops the process and waits for it.
#[derive(Debug)]
pub struct Guarded {
    name: String,
    guard: Child,
    stdin: Option<ChildStdin>,
    log: PathBuf,
}

/// The guard: runs the command with stdin from /dev/null; when its own stdin
/// closes (or says anything), stops the command (TERM, KILL after 10 s);
/// exits with the command's status when the command exits.
const GUARD: &str = r#"exec 3<&0
"$@" </dev/null &
child=$!
( read -r _ <&3; kill -TERM "$child" 2>/dev/null; sleep 10; kill -KILL "$child" 2>/dev/null ) &
watcher=$!
wait "$child"
status=$?
kill "$watcher" 2>/dev/null
exit "$status"
"#;

impl Guarded {
    /// Starts `program args...` with `envs`, its stdout and stderr appended
    /// to `log`.
    ///
    /// # Errors
    /// The log file cannot be created or `sh` cannot be started.
    pub fn spawn(
        name: &str,
        program: &Path,
        args: &[String],
        envs: &[(&str, String)],
        log: &Path,
    ) -> Result<Guarded, String> {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(GUARD)
            .arg("sh")
            .arg(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(err);
        for (key, value) in envs {
            command.env(key, value);
        }
        let mut guard = command
            .spawn()
            .map_err(|e| format!("starting {name} ({}): {e}", program.display()))?;
        let stdin = guard.stdin.take();
        Ok(Guarded {
            name: name.to_string(),
            guard,
            stdin,
            log: log.to_path_buf(),
        })
    }

    /// Whether the guard (and so the process) is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.guard.try_wait(), Ok(None))
    }

    /// The process's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last `lines` lines of the log, for error messages.
    pub fn log_tail(&self, lines: usize) -> String {
        let log = self.log();
        let all: Vec<&str> = log.lines().collect();
        all.get(all.len().saturating_sub(lines)..)
            .unwrap_or_default()
            .join("\n")
    }

    /// Stops the process (TERM, then KILL after 10 s) and waits for it.
    /// Returns its exit status (the guard exits with the process's), or
    /// `None` if it could not be waited for.
    pub fn stop(&mut self) -> Option<std::process::ExitStatus> {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"stop\n");
        }
        self.guard.wait().ok()
    }

    /// The name it was started under, for messages.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// A free TCP port on 127.0.0.1 (free when asked; the OS may reuse it later).
///
/// # Errors
/// Binding fails.
pub fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("finding a free port: {e}"))
}

/// A temporary directory removed on drop, unless `SARTOR_KEEP_TEST_DIRS` is
/// set (then its path is printed, for the logs and kubeconfig in it).
#[derive(Debug)]
pub struct TempDir(Option<tempfile::TempDir>);

impl TempDir {
    /// A new empty directory under the system temp dir, named `prefix-...`.
    ///
    /// # Errors
    /// It cannot be created.
    pub fn new(prefix: &str) -> Result<TempDir, String> {
        tempfile::Builder::new()
            .prefix(&format!("{prefix}-"))
            .tempdir()
            .map(|dir| TempDir(Some(dir)))
            .map_err(|e| format!("creating a temporary directory: {e}"))
    }

    /// Where the directory is.
    pub fn path(&self) -> &Path {
        self.0
            .as_ref()
            .map_or(Path::new(""), tempfile::TempDir::path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("SARTOR_KEEP_TEST_DIRS").is_some()
            && let Some(dir) = self.0.take()
        {
            eprintln!("kept {}", dir.keep().display());
        }
    }
}

/// Certificates of the test control plane.
#[derive(Debug, Clone)]
pub struct Pki {
    /// The CA that signs the API server's serving certificate and client
    /// certificates (PEM).
    pub ca_cert: String,
    ca_key: String,
    ca_params: CertificateParams,
}

impl Pki {
    /// A new CA.
    ///
    /// # Errors
    /// rcgen's.
    pub fn new() -> Result<Pki, rcgen::Error> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params
            .distinguished_name
            .push(DnType::CommonName, "sartor-test-ca");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate()?;
        let ca_key = key.serialize_pem();
        let ca = CertifiedIssuer::self_signed(params.clone(), key)?;
        Ok(Pki {
            ca_cert: ca.pem(),
            ca_key,
            ca_params: params,
        })
    }

    /// A certificate and key (PEM) signed by the CA: `names` as SANs
    /// (IP addresses become IP SANs), `organizations` as O=.
    ///
    /// # Errors
    /// rcgen's.
    pub fn issue(
        &self,
        common_name: &str,
        organizations: &[&str],
        names: &[&str],
        server: bool,
    ) -> Result<(String, String), rcgen::Error> {
        let key = KeyPair::from_pem(&self.ca_key)?;
        let issuer = rcgen::Issuer::from_params(&self.ca_params, key);
        let names: Vec<String> = names.iter().map(|n| (*n).to_string()).collect();
        let mut params = CertificateParams::new(names)?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        for organization in organizations {
            params
                .distinguished_name
                .push(DnType::OrganizationName, *organization);
        }
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![if server {
            ExtendedKeyUsagePurpose::ServerAuth
        } else {
            ExtendedKeyUsagePurpose::ClientAuth
        }];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &issuer)?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}

/// A serving certificate and key (PEM) for `names`, signed by the CA whose
/// certificate and key are given (PEM), valid from an hour ago for `valid`.
///
/// # Errors
/// rcgen's (a CA that does not parse, say).
pub fn issue_serving(
    ca_cert: &str,
    ca_key: &str,
    names: &[&str],
    valid: Duration,
) -> Result<(String, String), rcgen::Error> {
    let issuer = rcgen::Issuer::from_ca_cert_pem(ca_cert, KeyPair::from_pem(ca_key)?)?;
    let names: Vec<String> = names.iter().map(|n| (*n).to_string()).collect();
    let mut params = CertificateParams::new(names)?;
    let now = std::time::SystemTime::now();
    params.not_before = (now - Duration::from_secs(3600)).into();
    params.not_after = (now + valid).into();
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// kubectl and helm (the pinned ones) pointed at one API server with an
/// admin kubeconfig, their caches beside it rather than in ~/.kube. The
/// control plane and the test node both hand one out (and deref to it).
#[derive(Debug, Clone)]
pub struct Kube {
    /// The pinned tools.
    pub tools: Tools,
    /// An admin (`system:masters`) kubeconfig.
    pub kubeconfig: PathBuf,
    /// Where kubectl's discovery cache and helm's homes go.
    cache: PathBuf,
}

impl Kube {
    /// kubectl and helm with `kubeconfig`, caching under `cache`.
    pub fn new(tools: &Tools, kubeconfig: PathBuf, cache: PathBuf) -> Kube {
        Kube {
            tools: tools.clone(),
            kubeconfig,
            cache,
        }
    }

    /// A `kubectl` command against this API server (the pinned kubectl).
    pub fn kubectl_command(&self) -> Command {
        let mut command = Command::new(self.tools.path("kubectl"));
        // Discovery and HTTP caches with the control plane, not in ~/.kube.
        command
            .env("KUBECONFIG", &self.kubeconfig)
            .env("KUBECACHEDIR", self.cache.join("kube-cache"));
        command
    }

    /// Runs `kubectl args...`.
    ///
    /// # Errors
    /// kubectl's stderr (and the command) when it exits non-zero.
    pub fn kubectl(&self, args: &[&str]) -> Result<String, String> {
        self.kubectl_with_input(args, None)
    }

    /// Runs `kubectl args...` with `input` on its stdin.
    ///
    /// # Errors
    /// kubectl's stderr (and the command) when it exits non-zero.
    pub fn kubectl_with_input(&self, args: &[&str], input: Option<&str>) -> Result<String, String> {
        run(self.kubectl_command().args(args), input)
            .map_err(|e| format!("kubectl {}: {e}", args.join(" ")))
    }

    /// Waits until the CRD `name` (every CRD for `None`) is Established.
    ///
    /// # Errors
    /// kubectl's message when it is not within 30 s.
    pub fn wait_established(&self, name: Option<&str>) -> Result<(), String> {
        let one = name.map(|name| format!("crd/{name}"));
        let mut args = vec!["wait", "--for=condition=Established", "--timeout=30s"];
        match &one {
            Some(crd) => args.push(crd),
            None => args.extend(["crd", "--all"]),
        }
        self.kubectl(&args).map(|_| ())
    }

    /// A `helm` command against this API server (the pinned helm), with
    /// its caches beside the kubeconfig's.
    pub fn helm_command(&self) -> Command {
        let mut command = Command::new(self.tools.path("helm"));
        command
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HELM_CACHE_HOME", self.cache.join("helm/cache"))
            .env("HELM_CONFIG_HOME", self.cache.join("helm/config"))
            .env("HELM_DATA_HOME", self.cache.join("helm/data"));
        command
    }

    /// Runs `helm args...`.
    ///
    /// # Errors
    /// helm's stderr (and the command) when it exits non-zero.
    pub fn helm(&self, args: &[&str]) -> Result<String, String> {
        run(self.helm_command().args(args), None)
            .map_err(|e| format!("helm {}: {e}", args.join(" ")))
    }
}

/// A running etcd + kube-apiserver. Dropping it stops both and removes its
/// directory. Derefs to the [`Kube`] that drives it.
#[derive(Debug)]
pub struct ControlPlane {
    /// kubectl and helm with an admin kubeconfig for it.
    pub kube: Kube,
    /// `https://127.0.0.1:PORT`.
    pub url: String,
    /// The CA its certificates and the admin's are signed by.
    pub pki: Pki,
    // Field order is drop order: the API server stops before etcd, and the
    // directory goes last.
    apiserver: Guarded,
    /// How the API server was started, to start it again.
    apiserver_args: Vec<String>,
    /// API server starts so far (each logs to its own file).
    apiserver_starts: usize,
    etcd: Guarded,
    dir: TempDir,
}

impl ControlPlane {
    /// Starts etcd and kube-apiserver and waits until the API server is ready.
    ///
    /// # Errors
    /// What failed, with the tail of the process's log.
    pub fn start(tools: &Tools) -> Result<ControlPlane, String> {
        let dir = TempDir::new("sartor-cluster")?;
        let path = |name: &str| dir.path().join(name);
        let write = |name: &str, text: &str| {
            std::fs::write(path(name), text).map_err(|e| format!("writing {name}: {e}"))
        };
        let pki = Pki::new().map_err(|e| format!("test CA: {e}"))?;
        let (serving, serving_key) = pki
            .issue("kube-apiserver", &[], &["127.0.0.1", "localhost"], true)
            .map_err(|e| format!("API server certificate: {e}"))?;
        let (admin, admin_key) = pki
            .issue("sartor-test-admin", &["system:masters"], &[], false)
            .map_err(|e| format!("admin certificate: {e}"))?;
        let service_account =
            KeyPair::generate().map_err(|e| format!("service-account key: {e}"))?;
        write("ca.crt", &pki.ca_cert)?;
        write("apiserver.crt", &serving)?;
        write("apiserver.key", &serving_key)?;
        write("sa.key", &service_account.serialize_pem())?;
        write("sa.pub", &service_account.public_key_pem())?;

        let etcd_port = free_port()?;
        let peer_port = free_port()?;
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let etcd = Guarded::spawn(
            "etcd",
            &tools.path("etcd"),
            &[
                format!("--data-dir={}", path("etcd").display()),
                format!("--listen-client-urls={etcd_url}"),
                format!("--advertise-client-urls={etcd_url}"),
                format!("--listen-peer-urls={peer_url}"),
                format!("--initial-advertise-peer-urls={peer_url}"),
                format!("--initial-cluster=default={peer_url}"),
                "--unsafe-no-fsync=true".to_string(),
                "--log-level=warn".to_string(),
            ],
            &[],
            &path("etcd.log"),
        )?;

        let port = free_port()?;
        let url = format!("https://127.0.0.1:{port}");
        let apiserver_args = vec![
            format!("--etcd-servers={etcd_url}"),
            "--advertise-address=127.0.0.1".to_string(),
            "--bind-address=127.0.0.1".to_string(),
            format!("--secure-port={port}"),
            format!("--cert-dir={}", path("certs").display()),
            format!("--tls-cert-file={}", path("apiserver.crt").display()),
            format!("--tls-private-key-file={}", path("apiserver.key").display()),
            format!("--client-ca-file={}", path("ca.crt").display()),
            format!("--service-account-key-file={}", path("sa.pub").display()),
            format!(
                "--service-account-signing-key-file={}",
                path("sa.key").display()
            ),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".to_string(),
            "--service-cluster-ip-range=10.0.0.0/24".to_string(),
            "--endpoint-reconciler-type=none".to_string(),
            "--authorization-mode=RBAC".to_string(),
            // No controller-manager creates `default` service accounts.
            "--disable-admission-plugins=ServiceAccount".to_string(),
            "--allow-privileged=true".to_string(),
            "--v=1".to_string(),
        ];
        let apiserver = Guarded::spawn(
            "kube-apiserver",
            &tools.path("kube-apiserver"),
            &apiserver_args,
            &[],
            &path("kube-apiserver.log"),
        )?;

        let kubeconfig = path("kubeconfig");
        write(
            "kubeconfig",
            &kubeconfig_text(
                &url,
                &pki.ca_cert,
                "admin",
                &format!(
                    "client-certificate-data: {}\n    client-key-data: {}",
                    BASE64.encode(&admin),
                    BASE64.encode(&admin_key)
                ),
            ),
        )?;
        let mut plane = ControlPlane {
            kube: Kube::new(tools, kubeconfig, dir.path().to_path_buf()),
            url,
            pki,
            apiserver,
            apiserver_args,
            apiserver_starts: 1,
            etcd,
            dir,
        };
        plane.wait_ready(Duration::from_secs(90))?;
        Ok(plane)
    }

    /// Stops the API server (SIGTERM, then waits for it); etcd keeps
    /// running, so [`ControlPlane::start_apiserver`] brings back every object.
    pub fn stop_apiserver(&mut self) {
        self.apiserver.stop();
    }

    /// Starts the API server again, on the same address with the same
    /// flags, and waits until it is ready.
    ///
    /// # Errors
    /// What failed, with the tail of its log.
    pub fn start_apiserver(&mut self) -> Result<(), String> {
        self.apiserver_starts += 1;
        let log = self
            .dir
            .path()
            .join(format!("kube-apiserver-{}.log", self.apiserver_starts));
        self.apiserver = Guarded::spawn(
            "kube-apiserver",
            &self.tools.path("kube-apiserver"),
            &self.apiserver_args,
            &[],
            &log,
        )?;
        self.wait_ready(Duration::from_secs(90))
    }

    fn wait_ready(&mut self, limit: Duration) -> Result<(), String> {
        let start = Instant::now();
        loop {
            for process in [&mut self.etcd, &mut self.apiserver] {
                if !process.is_running() {
                    return Err(format!(
                        "{} exited during start-up:\n{}",
                        process.name(),
                        process.log_tail(30)
                    ));
                }
            }
            let ready = self.kubectl(&["get", "--raw", "/readyz"]);
            // The default namespace is created by the API server itself once
            // its bootstrap controller runs; tests create objects in it.
            if ready.as_deref().map(str::trim) == Ok("ok")
                && self.kubectl(&["get", "namespace", "default"]).is_ok()
            {
                return Ok(());
            }
            if start.elapsed() > limit {
                return Err(format!(
                    "kube-apiserver not ready after {limit:?} ({ready:?}):\n{}",
                    self.apiserver.log_tail(30)
                ));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The directory holding its certificates, kubeconfig and logs; tests
    /// may write their own files here.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A kubeconfig for this API server that authenticates with `token`
    /// (e.g. a service account's, from `kubectl create token`).
    ///
    /// # Errors
    /// Writing the file.
    pub fn token_kubeconfig(&self, name: &str, token: &str) -> Result<PathBuf, String> {
        let path = self.dir().join(format!("kubeconfig-{name}"));
        std::fs::write(
            &path,
            kubeconfig_text(
                &self.url,
                &self.pki.ca_cert,
                name,
                &format!("token: {token}"),
            ),
        )
        .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(path)
    }
}

impl std::ops::Deref for ControlPlane {
    type Target = Kube;

    fn deref(&self) -> &Kube {
        &self.kube
    }
}

/// `to` as a path relative to `from` (kustomize refuses absolute resources).
pub fn relative_to(from: &Path, to: &Path) -> String {
    let up = from.components().count().saturating_sub(1);
    let down: Vec<String> = to
        .components()
        .skip(1)
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    format!("{}{}", "../".repeat(up), down.join("/"))
}

/// A kubeconfig for the API server at `url` (trusting `ca_pem`) whose one
/// user `user` authenticates with `credentials` (lines under `user:`).
fn kubeconfig_text(url: &str, ca_pem: &str, user: &str, credentials: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {url}\n    certificate-authority-data: {ca}\nusers:\n- name: {user}\n  user:\n    {credentials}\ncontexts:\n- name: test\n  context:\n    cluster: test\n    user: {user}\n    namespace: default\ncurrent-context: test\n",
        ca = BASE64.encode(ca_pem),
    )
}

/// Runs a command to completion with `input` on stdin.
///
/// # Errors
/// Its stderr (or stdout when stderr is empty) when it exits non-zero, or why
/// it could not run.
pub fn run(command: &mut Command, input: Option<&str>) -> Result<String, String> {
    command
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().map_err(|e| e.to_string())?;
    // Written from a thread so a large input cannot deadlock against output.
    let writer = match (child.stdin.take(), input) {
        (Some(mut stdin), Some(input)) => {
            let input = input.to_string();
            Some(std::thread::spawn(move || {
                stdin.write_all(input.as_bytes())
            }))
        }
        _ => None,
    };
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    if let Some(writer) = writer {
        let _ = writer.join();
    }
    let (status, stdout, stderr) = (
        output.status,
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    );
    if status.success() {
        Ok(stdout)
    } else if stderr.trim().is_empty() {
        Err(format!("{status}: {}", stdout.trim()))
    } else {
        Err(stderr.trim().to_string())
    }
}
