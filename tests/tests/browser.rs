//! `sartor playground` in a real browser: Debian's Chromium, headless,
//! driven through chromedriver (WebDriver), against the `sartor` binary
//! started from an empty directory.
//!
//! ```text
//! sartor playground --port 0 ◀── HTTP ── Chromium ◀── WebDriver ── chromedriver ◀── this test
//! ```
//!
//! The trial loads the page and its examples, loads one example, edits a
//! mutator and sees the result follow, types an invalid location and sees
//! the CLI's error for it and lint's finding marked at its line, opens a
//! share link in a fresh browser profile and
//! gets the same panes, keeps what is shown as a test suite that `sartor
//! test` passes, reads the exported policy and the Pod a Deployment
//! creates (`--expand`); each view is compared
//! with what the binary prints for the same files. Screenshots go to
//! `$CARGO_TARGET_TMPDIR/playground/`.
//!
//! Chromium and chromedriver come from Debian (`chromium`,
//! `chromium-driver`): when missing, the test installs them with apt-get if
//! it runs as root, as `crates/engine/perf/guard` installs valgrind; where
//! it cannot, the trial is reported as ignored and the reason printed.
//!
//! Run it: `cargo test -p sartor-tests --test browser`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use libtest_mimic::{Arguments, Failed, Trial};
use sartor_tests::cluster::{Guarded, free_port};
use sartor_tests::suite::eventually;
use serde_json::{Value, json};

const CHROMIUM: &str = "chromium";
const CHROMEDRIVER: &str = "chromedriver";

/// How long the page may take to show a result.
const PATIENCE: Duration = Duration::from_secs(30);

fn main() -> ExitCode {
    let args = Arguments::from_args();
    let mut trial = Trial::test("playground::in_chromium", || {
        in_chromium().map_err(Failed::from)
    });
    if !args.list
        && let Err(reason) = browser()
    {
        eprintln!("browser suite: the trial is ignored: {reason}");
        trial = trial.with_ignored_flag(true);
    }
    libtest_mimic::run(&args, vec![trial]).exit_code()
}

/// Chromium and chromedriver, installed when missing and this is root with
/// apt-get; why not otherwise.
fn browser() -> Result<(), String> {
    if found(CHROMIUM) && found(CHROMEDRIVER) {
        return Ok(());
    }
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0");
    if !root || !found("apt-get") {
        return Err(
            "chromium and chromedriver are not installed, and installing them (apt-get install chromium chromium-driver) needs root and apt-get"
                .to_string(),
        );
    }
    eprintln!("browser suite: installing chromium and chromium-driver with apt-get");
    let install = || {
        Command::new("apt-get")
            .args([
                "install",
                "-y",
                "--no-install-recommends",
                "chromium",
                "chromium-driver",
            ])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
            .map_err(|e| format!("apt-get: {e}"))
    };
    let mut installed = install()?;
    if !installed.status.success() {
        // A fresh machine may have no package lists yet, as tests/k8s/node
        // finds.
        let _ = Command::new("apt-get").args(["update", "-qq"]).status();
        installed = install()?;
    }
    if !installed.status.success() || !found(CHROMIUM) || !found(CHROMEDRIVER) {
        return Err(format!(
            "apt-get install chromium chromium-driver failed: {}",
            String::from_utf8_lossy(&installed.stderr)
        ));
    }
    Ok(())
}

/// Whether `program` is on the PATH.
fn found(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// A mutator the trial types: every Pod's dnsPolicy.
const DNS: &str = "apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata:
  name: dns
spec:
  applyTo:
  - groups: [\"\"]
    versions: [v1]
    kinds: [Pod]
    operations: [CREATE]
  location: spec.dnsPolicy
  parameters:
    assign:
      value: None
";

/// The same with a location that does not parse.
const BROKEN: &str = "apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata:
  name: broken
spec:
  applyTo:
  - groups: [\"\"]
    versions: [v1]
    kinds: [Pod]
  location: \"spec.containers[name: foo.image\"
  parameters:
    assign:
      value: x
";

fn in_chromium() -> Result<(), String> {
    let binary = sartor_tests::binary::sartor()?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).map_err(|e| e.to_string())?;
    let artifacts = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("playground");
    std::fs::create_dir_all(&artifacts).map_err(|e| e.to_string())?;

    // The binary alone, from a directory holding nothing.
    let playground_log = dir.path().join("playground.log");
    let mut playground = Guarded::spawn(
        "sartor playground",
        &playground_in(binary, &empty)?,
        &[],
        &[],
        &playground_log,
    )?;
    let url = eventually("the playground's address", Duration::from_secs(20), || {
        let log = std::fs::read_to_string(&playground_log).unwrap_or_default();
        log.lines()
            .find_map(|line| line.strip_prefix("sartor playground: "))
            .and_then(|rest| rest.strip_suffix(" (Ctrl-C to stop)"))
            .map(str::to_string)
            .ok_or_else(|| format!("not yet: {log}"))
    })?;
    let port = free_port()?;
    let mut driver = Guarded::spawn(
        "chromedriver",
        Path::new(CHROMEDRIVER),
        &[format!("--port={port}")],
        &[],
        &dir.path().join("chromedriver.log"),
    )?;
    eventually("chromedriver listening", Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port))
            .map(drop)
            .map_err(|e| e.to_string())
    })?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let session = Session {
        url,
        driver: format!("http://127.0.0.1:{port}"),
        binary,
        files: dir.path().to_path_buf(),
        artifacts,
    };
    let result = runtime.block_on(session.run());
    driver.stop();
    playground.stop();
    result.map_err(|e| {
        format!(
            "{e}\nchromedriver:\n{}\nplayground:\n{}",
            driver.log_tail(20),
            playground.log_tail(20)
        )
    })
}

/// A script that runs the playground on a free port from `dir` (Guarded
/// runs a program with arguments; the playground needs its directory).
fn playground_in(binary: &Path, dir: &Path) -> Result<PathBuf, String> {
    let script = dir
        .parent()
        .ok_or("the scratch directory has no parent")?
        .join("playground.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncd '{}' && exec '{}' playground --port 0\n",
            dir.display(),
            binary.display()
        ),
    )
    .map_err(|e| e.to_string())?;
    let status = Command::new("chmod")
        .arg("+x")
        .arg(&script)
        .status()
        .map_err(|e| e.to_string())?;
    if !status.success() {
        return Err(format!("chmod +x {}", script.display()));
    }
    Ok(script)
}

struct Session<'a> {
    url: String,
    driver: String,
    binary: &'a Path,
    /// Where the panes are written for the CLI to compare with.
    files: PathBuf,
    artifacts: PathBuf,
}

impl Session<'_> {
    async fn run(&self) -> Result<(), String> {
        let client = self.browser("first").await?;
        let result = self.steps(&client).await;
        let _ = client.close().await;
        result
    }

    /// A headless Chromium with a profile of its own.
    async fn browser(&self, profile: &str) -> Result<Client, String> {
        let profile = self.files.join(format!("profile-{profile}"));
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".to_string(),
            json!({"args": [
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--window-size=1400,900",
                format!("--user-data-dir={}", profile.display()),
            ]}),
        );
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities)
            .connect(&self.driver)
            .await
            .map_err(|e| format!("starting Chromium through chromedriver: {e}"))
    }

    async fn steps(&self, client: &Client) -> Result<(), String> {
        // The page, with all the examples loaded and evaluated.
        client.goto(&self.url).await.map_err(|e| e.to_string())?;
        let out = until(client, "#out", "the examples' result", |text| {
            text.contains("imagePullPolicy: Always")
        })
        .await?;
        let examples = self.cli_mutate(
            &value(client, "#mutators").await?,
            &value(client, "#objects").await?,
            &[],
        )?;
        same("the examples' mutated objects", &out, &examples.0)?;
        self.screenshot(client, "examples").await?;

        // One example, chosen from the list.
        client
            .find(Locator::Css("#example"))
            .await
            .map_err(|e| e.to_string())?
            .select_by_label("seccomp-default")
            .await
            .map_err(|e| e.to_string())?;
        until(client, "#out", "the seccomp example's result", |text| {
            text.contains("type: RuntimeDefault") && !text.contains("imagePullPolicy")
        })
        .await?;

        // A mutator typed: the result follows.
        type_into(client, "#mutators", DNS).await?;
        let out = until(client, "#out", "the typed mutator's result", |text| {
            text.contains("dnsPolicy: None")
        })
        .await?;
        let objects = value(client, "#objects").await?;
        same(
            "the typed mutator's result",
            &out,
            &self.cli_mutate(DNS, &objects, &[])?.0,
        )?;

        // An invalid location: the CLI's error, naming the pane's file.
        type_into(client, "#mutators", BROKEN).await?;
        let err = until(client, "#err", "the invalid location's error", |text| {
            text.contains("spec.location")
        })
        .await?;
        same(
            "the invalid location's error",
            &err,
            &self.cli_mutate(BROKEN, &objects, &[])?.1,
        )?;
        // ... and lint's finding at its line: line 10, `location:`,
        // marked beside the pane and listed; choosing it selects the line.
        let listed = until(client, "#problems", "the finding by line", |text| {
            text.contains(
                "line 10: error: document 1: Assign broken: spec.location: invalid location",
            )
        })
        .await?;
        let marked = client
            .find(Locator::Css("#mutators-lines span.error"))
            .await
            .map_err(|e| format!("the marked line: {e}"))?
            .attr("data-line")
            .await
            .map_err(|e| e.to_string())?;
        same(
            "the marked line",
            marked.as_deref().unwrap_or_default(),
            "10",
        )?;
        click(client, "#problems button").await?;
        let selected = client
            .execute(
                "const a = document.getElementById('mutators'); \
                 return a.value.substring(a.selectionStart, a.selectionEnd);",
                vec![],
            )
            .await
            .map_err(|e| e.to_string())?;
        same(
            "the line the finding selects",
            selected.as_str().unwrap_or_default(),
            "  location: \"spec.containers[name: foo.image\"",
        )?;
        eprintln!("browser suite: listed {listed:?}");
        self.screenshot(client, "error").await?;

        // The share link, opened in a fresh profile: the same panes.
        type_into(client, "#mutators", DNS).await?;
        until(client, "#out", "the typed mutator's result again", |text| {
            text.contains("dnsPolicy: None")
        })
        .await?;
        click(client, "#share").await?;
        let link = eventually_async(client).await?;
        let second = self.browser("second").await?;
        let shared = async {
            second.goto(&link).await.map_err(|e| e.to_string())?;
            until(&second, "#out", "the shared link's result", |text| {
                text.contains("dnsPolicy: None")
            })
            .await?;
            same(
                "the shared mutators",
                &value(&second, "#mutators").await?,
                DNS,
            )?;
            same(
                "the shared objects",
                &value(&second, "#objects").await?,
                &objects,
            )
        }
        .await;
        let _ = second.close().await;
        shared?;

        // The test suite of what is shown: the CLI's, and it passes.
        click(client, "#tab-suite").await?;
        let suite = until(client, "#out", "the test suite", |text| {
            text.contains("cases:") && text.contains("dnsPolicy: None")
        })
        .await?;
        same(
            "the test suite",
            &suite,
            &self.cli_mutate(DNS, &objects, &["-o", "suite"])?.0,
        )?;
        std::fs::write(self.files.join("page.sartor-test.yaml"), &suite)
            .map_err(|e| e.to_string())?;
        let tested = self.cli(&["test", "page.sartor-test.yaml"])?;
        if !tested.0.ends_with(" passed, 0 failed\n") {
            return Err(format!("the page's suite fails:\n{}{}", tested.0, tested.1));
        }
        self.screenshot(client, "suite").await?;

        // The exported policy, and the tabs by keyboard.
        let tab = client
            .find(Locator::Css("#tab-export"))
            .await
            .map_err(|e| e.to_string())?;
        tab.click().await.map_err(|e| e.to_string())?;
        let policy = until(client, "#out", "the exported policy", |text| {
            text.contains("kind: MutatingAdmissionPolicy")
        })
        .await?;
        self.write_panes(DNS, &objects)?;
        let exported = self.cli(&["export", "map", "mutators.yaml"])?.0;
        same("the exported policy", &policy, &exported)?;
        self.screenshot(client, "export").await?;
        // ArrowLeft: the Lint tab.
        tab.send_keys("\u{E012}").await.map_err(|e| e.to_string())?;
        let lint = client
            .find(Locator::Css("#tab-lint"))
            .await
            .map_err(|e| e.to_string())?;
        same(
            "the Lint tab selected by ArrowLeft",
            &lint
                .attr("aria-selected")
                .await
                .map_err(|e| e.to_string())?
                .unwrap_or_default(),
            "true",
        )?;

        // --expand: the Pod the Deployment creates, mutated.
        for css in ["#tab-mutate", "#expand"] {
            click(client, css).await?;
        }
        let expanded = until(client, "#out", "the expanded result", |text| {
            text.contains("name: cart-pod")
        })
        .await?;
        let printed = self.cli_mutate(DNS, &objects, &["--expand"])?;
        same("the expanded result", &expanded, &printed.0)?;
        Ok(())
    }

    /// What `sartor mutate` prints (stdout, stderr) for the panes, written as
    /// the playground writes them.
    fn cli_mutate(
        &self,
        mutators: &str,
        objects: &str,
        extra: &[&str],
    ) -> Result<(String, String), String> {
        self.write_panes(mutators, objects)?;
        let mut args = vec![
            "mutate",
            "-m",
            "mutators.yaml",
            "-n",
            "default",
            "--operation",
            "CREATE",
        ];
        args.extend(extra);
        args.push("objects.yaml");
        self.cli(&args)
    }

    /// The panes as the files the playground writes.
    fn write_panes(&self, mutators: &str, objects: &str) -> Result<(), String> {
        std::fs::write(self.files.join("mutators.yaml"), mutators).map_err(|e| e.to_string())?;
        std::fs::write(self.files.join("objects.yaml"), objects).map_err(|e| e.to_string())
    }

    /// The binary's stdout and stderr for `args`, run where the panes are.
    fn cli(&self, args: &[&str]) -> Result<(String, String), String> {
        let output = Command::new(self.binary)
            .args(args)
            .current_dir(&self.files)
            .output()
            .map_err(|e| e.to_string())?;
        Ok((
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        ))
    }

    async fn screenshot(&self, client: &Client, name: &str) -> Result<(), String> {
        let png = client.screenshot().await.map_err(|e| e.to_string())?;
        let path = self.artifacts.join(format!("{name}.png"));
        std::fs::write(&path, png).map_err(|e| format!("{}: {e}", path.display()))?;
        eprintln!("browser suite: screenshot {}", path.display());
        Ok(())
    }
}

/// The address bar once the share link is in it.
async fn eventually_async(client: &Client) -> Result<String, String> {
    let start = Instant::now();
    loop {
        let url = client.current_url().await.map_err(|e| e.to_string())?;
        if url.fragment().is_some_and(|f| f.starts_with("s=")) {
            return Ok(url.to_string());
        }
        if start.elapsed() > PATIENCE {
            return Err(format!("the share link: not in the address bar: {url}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The text of `css` once `ready` holds for it (the page evaluates as the
/// user types, a moment later).
async fn until(
    client: &Client,
    css: &str,
    what: &str,
    ready: impl Fn(&str) -> bool,
) -> Result<String, String> {
    let start = Instant::now();
    loop {
        let text = text_of(client, css).await?;
        if ready(&text) {
            return Ok(text);
        }
        if start.elapsed() > PATIENCE {
            let err = text_of(client, "#err").await.unwrap_or_default();
            return Err(format!(
                "{what}: not after {PATIENCE:?}: {css} holds {text:?} (messages: {err:?})"
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// An element's whole text, as the page wrote it (`textContent`).
async fn text_of(client: &Client, css: &str) -> Result<String, String> {
    let found = client
        .execute(
            "return document.querySelector(arguments[0]).textContent;",
            vec![Value::from(css)],
        )
        .await
        .map_err(|e| format!("{css}: {e}"))?;
    Ok(found.as_str().unwrap_or_default().to_string())
}

/// Clicks the element `css`, as a user would.
async fn click(client: &Client, css: &str) -> Result<(), String> {
    client
        .find(Locator::Css(css))
        .await
        .map_err(|e| format!("{css}: {e}"))?
        .click()
        .await
        .map_err(|e| format!("{css}: {e}"))
}

/// A form field's value.
async fn value(client: &Client, css: &str) -> Result<String, String> {
    client
        .find(Locator::Css(css))
        .await
        .map_err(|e| format!("{css}: {e}"))?
        .prop("value")
        .await
        .map_err(|e| format!("{css}: {e}"))
        .map(Option::unwrap_or_default)
}

/// Replaces a text area's content by typing `text` into it, as a user
/// would (each key an input event).
async fn type_into(client: &Client, css: &str, text: &str) -> Result<(), String> {
    let field = client
        .find(Locator::Css(css))
        .await
        .map_err(|e| format!("{css}: {e}"))?;
    field.clear().await.map_err(|e| format!("{css}: {e}"))?;
    field
        .send_keys(text)
        .await
        .map_err(|e| format!("{css}: {e}"))
}

/// `actual` equals `expected`, or a message showing both.
fn same(what: &str, actual: &str, expected: &str) -> Result<(), String> {
    match actual == expected {
        true => Ok(()),
        false => Err(format!("{what}:\n  page: {actual:?}\n  cli:  {expected:?}")),
    }
}
