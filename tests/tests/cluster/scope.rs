//! What the offline preview assumes of scope and names, held against the
//! real API server: the built-in table of namespaced kinds is its discovery,
//! a manifest without `metadata.namespace` is stored as `sartor mutate`
//! predicts, and a mutator name it refuses, `sartor lint` refuses in its words.

use std::collections::BTreeSet;
use std::time::Duration;

use sartor_engine::ApiResource;
use serde_json::Value;

use crate::admission::{examples_enforced, wait_enforced};
use crate::{Suite, eventually, json, repo, repo_path};

/// Where the built-in table is checked in.
const TABLE: &str = "crates/engine/src/scope/api-resources.txt";

/// The built-in table equals `kubectl api-resources` of this API server,
/// less the kinds of the CRDs installed (earlier trials may have added
/// some). `SARTOR_BLESS=1` writes the table instead of comparing.
pub fn builtin_scopes_are_the_api_servers_discovery(suite: &mut Suite) -> Result<(), String> {
    let crds = json(&suite.plane.kubectl(&["get", "crd", "-o", "json"])?)?;
    let defined: BTreeSet<(String, String)> = crds["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|crd| ApiResource::of_crd(crd).ok().flatten())
        .map(|r| (r.group, r.kind))
        .collect();
    let output = suite.plane.kubectl(&["api-resources"])?;
    let mut lines = output.lines();
    let header = lines.next().ok_or("no output from kubectl api-resources")?;
    let mut table = format!("{header}\n");
    for line in lines {
        let row = ApiResource::parse(&format!("{header}\n{line}\n")).map_err(|e| e.to_string())?;
        if row
            .iter()
            .all(|r| !defined.contains(&(r.group.clone(), r.kind.clone())))
        {
            table.push_str(line);
            table.push('\n');
        }
    }
    let path = repo().join(TABLE);
    if std::env::var_os("SARTOR_BLESS").is_some() {
        return std::fs::write(&path, &table).map_err(|e| format!("{}: {e}", path.display()));
    }
    let checked_in = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
    let rows = |text: &str| -> Result<BTreeSet<(String, String, bool)>, String> {
        Ok(ApiResource::parse(text)
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|r| (r.group, r.kind, r.namespaced))
            .collect())
    };
    let (live, ours) = (rows(&table)?, rows(&checked_in)?);
    if live != ours {
        return Err(format!(
            "{TABLE} differs from this API server's discovery (regenerate with SARTOR_BLESS=1 \
             cargo test -p sartor-tests --test cluster scope):\nonly live: {:?}\nonly checked in: {:?}",
            live.difference(&ours).collect::<Vec<_>>(),
            ours.difference(&live).collect::<Vec<_>>()
        ));
    }
    Ok(())
}

/// The mutators of `fixtures/namespace-less`, limited to namespaced objects,
/// as kind + names.
const NAMESPACE_LESS: &[(&str, &[&str])] = &[
    (
        "assign.mutations.sartor.dev",
        &["always-pull", "log-shipper-args", "log-shipper-image"],
    ),
    ("assignmetadata.mutations.sartor.dev", &["team-label"]),
];

/// A Pod and a Deployment without `metadata.namespace`, created with
/// `kubectl create -f` (so in `default`), are stored as `sartor mutate`
/// predicts from the same files (with the examples' mutators in force too,
/// and the `default` Namespace as the API server has it); so is a Pod made
/// from the Deployment's template, as its ReplicaSet would make it, against
/// `sartor mutate --expand`'s generated Pod. The API server's defaults are
/// added to each prediction by a server-side dry run in a namespace sartor
/// ignores, as in `admission::objects_are_stored_as_sartor_mutate_predicts`.
pub fn namespace_less_manifests_are_stored_as_sartor_mutate_predicts(
    suite: &mut Suite,
) -> Result<(), String> {
    let pod_name = examples_enforced(suite)?;
    // The fixtures that the binary's own tests (crates/cli/tests/cli.rs)
    // mutate offline; here the API server has the last word.
    let fixtures = repo().join("crates/cli/tests/fixtures/namespace-less");
    let file = |name: &str| fixtures.join(name).display().to_string();
    suite
        .plane
        .kubectl(&["apply", "-f", &file("mutators.yaml")])?;
    for (kind, names) in NAMESPACE_LESS {
        wait_enforced(suite, kind, names, &pod_name)?;
    }
    let outcome = compare_namespace_less(suite, &file);
    suite
        .plane
        .kubectl(&["delete", "-f", &file("mutators.yaml")])?;
    // Later trials see Pods in `default` as the examples alone mutate them.
    eventually(
        "the namespace-less mutators withdrawn",
        Duration::from_secs(30),
        || {
            let pod = crate::probe_pod(suite)?;
            match pod["metadata"]["labels"]["team"].as_str() {
                None => Ok(()),
                Some(team) => Err(format!("still labelled team={team}")),
            }
        },
    )?;
    outcome
}

fn compare_namespace_less(suite: &Suite, file: &dyn Fn(&str) -> String) -> Result<(), String> {
    let plane = &suite.plane;
    let dir = plane.dir().join("namespace-less");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let default_namespace = dir.join("default.json");
    std::fs::write(
        &default_namespace,
        plane.kubectl(&["get", "namespace", "default", "-o", "json"])?,
    )
    .map_err(|e| e.to_string())?;
    let mut mutators = vec![
        "--mutators".to_string(),
        repo_path("examples/mutators"),
        "--mutators".to_string(),
        file("mutators.yaml"),
    ];
    mutators.extend([
        "--namespaces".to_string(),
        default_namespace.display().to_string(),
    ]);
    let predict = |extra: &[&str]| -> Result<Vec<Value>, String> {
        let mut args: Vec<&str> = vec!["mutate", "-o", "json"];
        args.extend(mutators.iter().map(String::as_str));
        args.extend(extra);
        let output = json(&crate::sartor(&args)?)?;
        Ok(match output["items"].as_array() {
            Some(items) => items.clone(),
            None => vec![output],
        })
    };
    let predicted_pod = predict(&[&file("pod.yaml")])?;
    let predicted = predict(&["--expand", &file("deployment.yaml")])?;
    let (Some(pod), [deployment, generated]) = (predicted_pod.first(), predicted.as_slice()) else {
        return Err(format!(
            "expected a Pod, a Deployment and its Pod: {predicted_pod:?} {predicted:?}"
        ));
    };
    // The prediction is not vacuous: every namespaced mutator applied.
    crate::same(
        "the predicted Pod's log-shipper image, pull policy and team",
        (
            pod["spec"]["containers"][1]["image"].as_str(),
            pod["spec"]["containers"][0]["imagePullPolicy"].as_str(),
            pod["metadata"]["labels"]["team"].as_str(),
        ),
        (
            Some("mirror.example.com/fluent/fluent-bit:3.0"),
            Some("Always"),
            Some("platform"),
        ),
    )?;

    plane.kubectl_with_input(
        &["apply", "-f", "-"],
        Some("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: prod-shop-twin\n  labels:\n    admission.sartor.dev/ignore: twin\n"),
    )?;
    // What the API server stores, and the prediction with its defaults (the
    // one namespace the install lets carry the exemption label is the twin
    // of the examples' trial).
    let stored = |object: &Value| -> Result<Value, String> {
        let created = plane.kubectl_with_input(
            &["create", "-f", "-", "-o", "json"],
            Some(&object.to_string()),
        )?;
        Ok(crate::admission::without_server_fields(json(&created)?))
    };
    let defaulted = |predicted: &Value| -> Result<Value, String> {
        let mut twin = predicted.clone();
        twin["metadata"]["namespace"] = Value::from("prod-shop-twin");
        let stored = plane.kubectl_with_input(
            &["create", "--dry-run=server", "-f", "-", "-o", "json"],
            Some(&twin.to_string()),
        )?;
        let mut stored = crate::admission::without_server_fields(json(&stored)?);
        stored["metadata"]["namespace"] = Value::from("default");
        Ok(stored)
    };
    let read = |name: &str| -> Result<Value, String> {
        let text = std::fs::read_to_string(file(name)).map_err(|e| e.to_string())?;
        serde_yaml::from_str(&text).map_err(|e| e.to_string())
    };
    // The Pod a ReplicaSet would make: the template, named as expansion
    // names it, without a namespace.
    let deployment_input = read("deployment.yaml")?;
    let mut template_pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod"});
    template_pod["metadata"] = deployment_input["spec"]["template"]["metadata"].clone();
    template_pod["metadata"]["name"] = generated["metadata"]["name"].clone();
    template_pod["spec"] = deployment_input["spec"]["template"]["spec"].clone();
    // Without the owner reference expansion gives it (a ReplicaSet's Pod
    // points at the ReplicaSet, which there is no controller here to make).
    let mut generated_pod = generated.clone();
    if let Some(metadata) = generated_pod["metadata"].as_object_mut() {
        metadata.remove("namespace");
        metadata.remove("ownerReferences");
    }
    for (what, input, prediction) in [
        ("Pod", read("pod.yaml")?, pod.clone()),
        ("Deployment", deployment_input.clone(), deployment.clone()),
        ("Deployment's Pod", template_pod, generated_pod),
    ] {
        let actual = stored(&input)?;
        let expected = defaulted(&prediction)?;
        if actual != expected {
            return Err(format!(
                "the {what} is stored otherwise than predicted\n--- stored\n{}\n--- predicted (with the API server's defaults)\n{}",
                serde_json::to_string_pretty(&actual).unwrap_or_default(),
                serde_json::to_string_pretty(&expected).unwrap_or_default()
            ));
        }
    }
    Ok(())
}

/// A mutator named with an upper-case letter, or with a label key, label
/// value or annotation key the API server refuses, is refused by the API
/// server and by `sartor lint`, in the same words.
pub fn invalid_names_are_refused_as_the_api_server_refuses_them(
    suite: &mut Suite,
) -> Result<(), String> {
    crate::install::ensure(suite)?;
    let mutator = |name: &str, metadata: &str| {
        format!(
            "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata:\n  name: {name}\n{metadata}spec:\n  applyTo: [{{groups: [''], kinds: [Pod], versions: [v1]}}]\n  location: spec.securityContext.fsGroup\n  parameters:\n    assign:\n      value: 1000\n"
        )
    };
    let cases = [
        mutator("k8spspfsGroup", ""),
        mutator("bad-label-key", "  labels:\n    Team Name: platform\n"),
        mutator("bad-label-value", "  labels:\n    team: -platform-\n"),
        mutator(
            "bad-annotation",
            "  annotations:\n    owner/of/it: platform\n",
        ),
    ];
    let dir = suite.plane.dir().join("invalid-name");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let mut said = Vec::new();
    for (index, document) in cases.iter().enumerate() {
        let refused = match suite
            .plane
            .kubectl_with_input(&["apply", "-f", "-"], Some(document))
        {
            Ok(out) => return Err(format!("the API server accepted it: {out}\n{document}")),
            Err(error) => error,
        };
        let path = dir.join(format!("case-{index}.yaml"));
        std::fs::write(&path, document).map_err(|e| e.to_string())?;
        let lint = crate::sartor(&["lint", &path.display().to_string()]);
        let Err(linted) = lint else {
            return Err(format!("sartor lint passed it: {lint:?}"));
        };
        // sartor's message after `error: FILE: document 1: Assign NAME: `.
        let words = linted
            .lines()
            .find_map(|line| line.split_once(": Assign ").map(|(_, rest)| rest))
            .and_then(|rest| rest.split_once(": ").map(|(_, words)| words.to_string()))
            .ok_or_else(|| format!("no message in {linted:?}"))?;
        if !refused.contains(&words) {
            return Err(format!(
                "the API server said otherwise than sartor lint ({words:?}):\n{refused}"
            ));
        }
        said.push(words);
    }
    // -n as the API server checks a namespace's name.
    let refused = match suite.plane.kubectl(&["create", "namespace", "Bad_NS"]) {
        Ok(out) => return Err(format!("the API server accepted namespace Bad_NS: {out}")),
        Err(error) => error,
    };
    let path = dir.join("case-0.yaml").display().to_string();
    let Err(mutated) = crate::sartor(&["mutate", "-n", "Bad_NS", "-m", &path, &path]) else {
        return Err("sartor mutate took -n Bad_NS".to_string());
    };
    let words = mutated
        .lines()
        .find_map(|line| {
            line.split_once("error: -n/--namespace: ")
                .map(|(_, w)| w.to_string())
        })
        .ok_or_else(|| format!("no -n message in {mutated:?}"))?;
    if !refused.contains(&format!("metadata.name: {words}")) {
        return Err(format!(
            "the API server refused Bad_NS otherwise than sartor mutate -n ({words:?}):\n{refused}"
        ));
    }
    let name = "metadata.name: Invalid value: \"k8spspfsGroup\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    crate::same(
        "sartor's words for the name",
        said.first().map(String::as_str),
        Some(name),
    )
}
