#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::io::{Read as _, Write as _};
use std::net::SocketAddr;
use std::path::PathBuf;

use super::*;

fn repo() -> PathBuf {
    sartor_tests::workspace_root()
}

/// What the CLI's entry point prints for `argv`, run from the repository.
fn cli(argv: &[&str]) -> Run {
    let root = repo();
    let absolute: Vec<String> = argv
        .iter()
        .map(|arg| match arg.starts_with("examples/") {
            true => root.join(arg).display().to_string(),
            false => (*arg).to_string(),
        })
        .collect();
    let argv: Vec<&str> = absolute.iter().map(String::as_str).collect();
    let run = match argv.first() {
        Some(&"mutate") => run_mutate(&argv, &root),
        Some(&"lint") => run_lint(&argv, &root),
        _ => run_export(&argv, &root),
    };
    // The repository's paths, as a reader of the output would see them.
    let prefix = format!("{}/", root.display());
    Run {
        exit: run.exit,
        out: run.out.replace(&prefix, ""),
        err: run.err.replace(&prefix, ""),
    }
}

fn all_examples() -> Input {
    let example = examples().into_iter().next().unwrap();
    Input {
        mutators: example.mutators,
        objects: example.objects,
        namespace: "default".to_string(),
        operation: "CREATE".to_string(),
        expand: false,
        api_resources: String::new(),
        username: String::new(),
        namespace_labels: String::new(),
    }
}

#[test]
fn the_examples_give_what_the_cli_prints_for_their_files() {
    let output = evaluate(&all_examples()).unwrap();
    let objects = [
        "examples/objects/namespace.yaml",
        "examples/objects/pod.yaml",
        "examples/objects/deployment.yaml",
    ];
    let preview = |extra: &[&str]| {
        let mut argv = vec!["mutate", "-m", "examples/mutators"];
        argv.extend(extra);
        argv.extend(objects);
        cli(&argv)
    };
    assert_eq!(output.mutate, preview(&[]));
    assert!(output.mutate.out.contains("imagePullPolicy: Always"));
    assert_eq!(output.mutate.exit, 0);
    // The diff and the trace name each object's file and document: the
    // pane's are one file.
    let in_the_pane = |run: Run| Run {
        out: run
            .out
            .replace(
                "examples/objects/namespace.yaml: document 1",
                "objects.yaml: document 1",
            )
            .replace(
                "examples/objects/pod.yaml: document 1",
                "objects.yaml: document 2",
            )
            .replace(
                "examples/objects/deployment.yaml: document 1",
                "objects.yaml: document 3",
            ),
        ..run
    };
    assert_eq!(output.diff, in_the_pane(preview(&["--diff"])));
    assert_eq!(output.explain, in_the_pane(preview(&["--explain"])));
    assert_eq!(
        output.lint,
        cli(&["lint", "--export-map", "examples/mutators"])
    );
    assert_eq!(output.export, cli(&["export", "map", "examples/mutators"]));
    assert_eq!(output.export.err, "10 of 10 mutators exported\n");
}

#[test]
fn expand_shows_the_pod_a_deployment_creates_as_the_cli_does() {
    let input = Input {
        expand: true,
        ..all_examples()
    };
    let output = evaluate(&input).unwrap();
    let expanded = cli(&[
        "mutate",
        "-m",
        "examples/mutators",
        "--expand",
        "examples/objects/namespace.yaml",
        "examples/objects/pod.yaml",
        "examples/objects/deployment.yaml",
    ]);
    assert_eq!(output.mutate, expanded);
    assert!(
        output.mutate.out.contains("name: cart-pod"),
        "{}",
        output.mutate.out
    );
}

#[test]
fn errors_name_the_pane_as_a_file() {
    let input = Input {
        mutators: concat!(
            "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {name: broken}\n",
            "spec:\n  applyTo: [{groups: [\"\"], versions: [v1], kinds: [Pod]}]\n",
            "  location: \"spec.containers[name: foo.image\"\n",
            "  parameters: {assign: {value: x}}\n",
        )
        .to_string(),
        ..all_examples()
    };
    let output = evaluate(&input).unwrap();
    assert_eq!(output.mutate.exit, 2);
    assert_eq!(output.mutate.out, "");
    assert!(
        output
            .mutate
            .err
            .starts_with("error: mutators.yaml: document 1: Assign broken: spec.location"),
        "{}",
        output.mutate.err
    );
    assert_eq!(output.lint.exit, 2);
    assert!(
        output.lint.err.contains("mutators.yaml: document 1"),
        "{}",
        output.lint.err
    );
}

#[test]
fn a_flag_the_cli_refuses_is_refused_in_its_words() {
    let input = Input {
        operation: "PATCH".to_string(),
        ..all_examples()
    };
    let output = evaluate(&input).unwrap();
    assert_eq!(output.mutate.exit, 2);
    assert!(
        output
            .mutate
            .err
            .starts_with("error: invalid value 'PATCH' for '--operation <OPERATION>'"),
        "{}",
        output.mutate.err
    );
    // Lint and export take no operation.
    assert_eq!(output.export.exit, 0);
}

#[test]
fn a_pane_past_the_limit_is_refused_by_name() {
    let input = Input {
        objects: "#".repeat(MAX_PANE_BYTES + 1),
        ..all_examples()
    };
    assert_eq!(
        evaluate(&input).unwrap_err().to_string(),
        format!(
            "the objects pane holds {} bytes, and the playground takes at most {MAX_PANE_BYTES}",
            MAX_PANE_BYTES + 1
        )
    );
}

#[test]
fn the_embedded_examples_are_the_repositorys() {
    let listed = |dir: &str| {
        let mut names: Vec<String> = std::fs::read_dir(repo().join(dir))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter_map(|name| name.strip_suffix(".yaml").map(str::to_string))
            .collect();
        names.sort();
        names
    };
    let (mutators, objects) = examples::embedded();
    assert_eq!(mutators, listed("examples/mutators"));
    let mut objects: Vec<String> = objects.iter().map(|o| (*o).to_string()).collect();
    objects.sort();
    assert_eq!(objects, listed("examples/objects"));
    // Each file alone, after all of them.
    let names: Vec<String> = examples().into_iter().map(|e| e.name).collect();
    assert_eq!(names.len(), mutators.len() + 1);
    assert_eq!(names[0], "all the examples");
}

/// One HTTP/1.1 exchange with the server at `addr`: the status line, the
/// headers (lowercased names) and the body.
fn exchange(addr: SocketAddr, request: &str) -> (String, Vec<(String, String)>, String) {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    let mut lines = head.lines();
    let status = lines.next().unwrap().to_string();
    let headers = lines
        .filter_map(|line| line.split_once(": "))
        .map(|(name, value)| (name.to_ascii_lowercase(), value.to_string()))
        .collect();
    (status, headers, body.to_string())
}

fn request(method: &str, path: &str, host: &str, content_type: &str, body: &str) -> String {
    format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// A server on a free loopback port, serving on its own runtime's thread.
fn server() -> SocketAddr {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listening = listen("127.0.0.1:0".parse().unwrap()).await.unwrap();
            sender.send(listening.addr()).unwrap();
            let _ = listening.serve().await;
        });
    });
    receiver.recv().unwrap()
}

#[test]
fn the_server_serves_the_page_and_evaluates() {
    let addr = server();
    let host = addr.to_string();
    let (status, headers, body) = exchange(addr, &request("GET", "/", &host, "text/plain", ""));
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(body.contains("<title>sartor playground</title>"), "{body}");
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(
        header("content-type").as_deref(),
        Some("text/html; charset=utf-8")
    );
    assert!(
        header("content-security-policy")
            .unwrap()
            .starts_with("default-src 'none'; script-src 'self'")
    );
    for path in ["/playground.js", "/playground.css", "/api/examples"] {
        let (status, _, _) = exchange(addr, &request("GET", path, &host, "text/plain", ""));
        assert_eq!(status, "HTTP/1.1 200 OK", "{path}");
    }

    let input = serde_json::to_string(&all_examples()).unwrap();
    let (status, _, body) = exchange(
        addr,
        &request("POST", "/api/evaluate", &host, "application/json", &input),
    );
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    let answered: serde_json::Value = serde_json::from_str(&body).unwrap();
    let expected = serde_json::to_value(evaluate(&all_examples()).unwrap()).unwrap();
    assert_eq!(answered, expected);
}

#[test]
fn the_server_refuses_what_it_must_not_answer() {
    let addr = server();
    let host = addr.to_string();
    let input = serde_json::to_string(&all_examples()).unwrap();
    let cases = [
        // A page on another site posting a form.
        (
            request(
                "POST",
                "/api/evaluate",
                &host,
                "application/x-www-form-urlencoded",
                "a=b",
            ),
            "HTTP/1.1 415 Unsupported Media Type",
            "send the input as Content-Type: application/json",
        ),
        // A DNS name rebound to 127.0.0.1.
        (
            request(
                "POST",
                "/api/evaluate",
                "attacker.example:80",
                "application/json",
                &input,
            ),
            "HTTP/1.1 403 Forbidden",
            "the playground answers only requests to a loopback address (http://127.0.0.1:PORT/ or http://localhost:PORT/)",
        ),
        (
            request(
                "POST",
                "/api/evaluate",
                &host,
                "application/json",
                "{\"mutators\": 1}",
            ),
            "HTTP/1.1 400 Bad Request",
            "the request is not an input: invalid type: integer `1`, expected a string at line 1 column 14",
        ),
        // Refused from its Content-Length, before it is read (the body is
        // not sent here).
        (
            format!(
                "POST /api/evaluate HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                4 * MAX_PANE_BYTES + 4097
            ),
            "HTTP/1.1 413 Payload Too Large",
            "the request is larger than the 1052672 bytes the playground takes",
        ),
        (
            request("GET", "/etc/passwd", &host, "text/plain", ""),
            "HTTP/1.1 404 Not Found",
            "no page at /etc/passwd",
        ),
        (
            request("GET", "/api/evaluate", &host, "text/plain", ""),
            "HTTP/1.1 405 Method Not Allowed",
            "use POST",
        ),
    ];
    for (sent, status, message) in cases {
        let (answered, _, body) = exchange(addr, &sent);
        assert_eq!(answered, status, "{body}");
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["error"], message);
    }
    // localhost by name is loopback.
    let (status, _, _) = exchange(
        addr,
        &request(
            "GET",
            "/",
            &format!("localhost:{}", addr.port()),
            "text/plain",
            "",
        ),
    );
    assert_eq!(status, "HTTP/1.1 200 OK");
}

// A label set in namespaces labelled `env: prod`: whether it applies is
// the context's to say (the namespace, its labels, a custom kind's scope).
use sartor_tests::samples::PROD_ONLY as CONTEXT_MUTATORS;

#[test]
fn the_context_is_the_clis_flags() {
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\n";
    let widget = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n";
    let input = Input {
        mutators: CONTEXT_MUTATORS.to_string(),
        objects: format!("{pod}---\n{widget}"),
        namespace: "shop".to_string(),
        namespace_labels: "env=prod, team = checkout".to_string(),
        api_resources: concat!(
            "NAME      SHORTNAMES   APIVERSION       NAMESPACED   KIND\n",
            "widgets   wd           example.com/v1   true         Widget\n",
        )
        .to_string(),
        username: "alice".to_string(),
        ..all_examples()
    };
    let output = evaluate(&input).unwrap();
    // The Pod and the Widget are both namespaced in shop, whose labels
    // select them; without labels, the namespace is unknown.
    assert_eq!((output.mutate.exit, output.mutate.err.as_str()), (0, ""));
    assert_eq!(
        output.mutate.out,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  labels:\n    tier: gold\n  name: web\n---\n\
         apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  labels:\n    tier: gold\n  name: w\n"
    );
    assert!(
        output
            .suite
            .out
            .contains("namespaces:\n- namespace.yaml\nnamespace: shop\n"),
        "{}",
        output.suite.out
    );
    assert!(
        output.suite.out.contains("  username: alice\n"),
        "{}",
        output.suite.out
    );
    assert!(
        output
            .suite
            .out
            .contains("apiResources:\n- api-resources.txt\n"),
        "{}",
        output.suite.out
    );
    let unlabelled = evaluate(&Input {
        namespace_labels: String::new(),
        ..input.clone()
    })
    .unwrap();
    assert_eq!(unlabelled.mutate.exit, 1);
    assert!(
        unlabelled
            .mutate
            .err
            .contains("needs the labels of Namespace \"shop\""),
        "{}",
        unlabelled.mutate.err
    );
    // Without api-resources, the Widget's scope is unknown: cluster-scoped.
    let unscoped = evaluate(&Input {
        api_resources: String::new(),
        ..input.clone()
    })
    .unwrap();
    assert!(
        unscoped
            .mutate
            .err
            .contains("the scope of kind Widget.example.com is unknown"),
        "{}",
        unscoped.mutate.err
    );
    let label = evaluate(&Input {
        namespace_labels: "env=prod, team".to_string(),
        ..input
    });
    assert_eq!(
        label.unwrap_err().to_string(),
        "the namespace labels are key=value pairs separated by commas; \"team\" has no '='"
    );
}

#[test]
fn a_finding_is_marked_at_its_line_and_never_past_the_pane() {
    let broken = Input {
        mutators: CONTEXT_MUTATORS.replace("metadata.labels.tier", "metadata.labels[tier"),
        ..all_examples()
    };
    let problems = evaluate(&broken).unwrap().problems;
    assert_eq!(
        problems,
        vec![Problem {
            line: Some(6),
            severity: "error".to_string(),
            text: "document 1: AssignMetadata tier: spec.location: invalid location \"metadata.labels[tier\": expected ':' at 20, found end of location\n  metadata.labels[tier\n                      ^".to_string(),
        }]
    );
    // The YAML error of a text cut short names the line after its end:
    // the mark is on its last line.
    let cut = Input {
        mutators: "{".to_string(),
        ..all_examples()
    };
    let problems = evaluate(&cut).unwrap().problems;
    assert_eq!(
        problems.iter().map(|p| p.line).collect::<Vec<_>>(),
        vec![Some(1)],
        "{problems:?}"
    );
    // A control character the YAML parser stops at before any content
    // (the fuzzer's): no line rather than line 0.
    let control = Input {
        mutators: "# a comment\n,piV\u{1}# and more\n".to_string(),
        ..all_examples()
    };
    let problems = evaluate(&control).unwrap().problems;
    assert!(
        problems
            .iter()
            .all(|p| p.line.is_none_or(|line| (1..=3).contains(&line))),
        "{problems:?}"
    );
    assert!(!problems.is_empty());
}
