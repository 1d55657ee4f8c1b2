//! `sartor export map` on the real API server: objects admitted through
//! the exported MutatingAdmissionPolicy are what `sartor mutate` predicts.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;
use std::time::Duration;

use sartor_differential::case::Case;
use sartor_differential::generate::{self, Mode};
use sartor_differential::sartor::admitted_namespace;
use sartor_export::limits;
use sartor_tests::cluster::ControlPlane;
use serde_json::{Value, json};

use crate::admission::without_server_fields;
use crate::{Suite, eventually, json, repo_path, same};

/// The fixture's mutators exported as a policy; the fixture's objects,
/// created through the API server (a server-side dry run: admission runs,
/// nothing is stored), equal `sartor mutate`'s prediction from the same
/// files with the API server's own defaults added (the prediction created
/// the same way before the policy existed). Runs before the install, so no
/// webhook of sartor's is in the way.
pub fn exported_policies_store_what_sartor_mutate_predicts(
    suite: &mut Suite,
) -> Result<(), String> {
    let plane = &suite.plane;
    let mutators = repo_path("tests/fixtures/export/mutators.yaml");
    let namespaces = repo_path("tests/fixtures/export/namespaces.yaml");
    let objects = repo_path("tests/fixtures/export/objects.yaml");
    plane.kubectl(&["apply", "-f", &namespaces])?;
    let prediction = crate::sartor(&[
        "mutate",
        "--mutators",
        &mutators,
        "--namespaces",
        &namespaces,
        "-o",
        "json",
        &objects,
    ])?;
    let expected = dry_run(plane, Some(&prediction), "-")?;

    let policy = crate::sartor(&["export", "map", &mutators])?;
    plane.kubectl_with_input(&["apply", "-f", "-"], Some(&policy))?;
    let result = admitted_as_predicted(suite, &objects, &expected);
    let plane = &suite.plane;
    let _ = plane.kubectl_with_input(&["delete", "-f", "-"], Some(&policy));
    let _ = plane.kubectl(&["delete", "-f", &namespaces, "--wait=false"]);
    result
}

/// Once the policy is in force (a probe ConfigMap is mutated), the objects
/// as admitted equal `expected`.
fn admitted_as_predicted(suite: &Suite, objects: &str, expected: &[Value]) -> Result<(), String> {
    let probe =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-probe\n  namespace: export-a\n";
    eventually("the policy in force", Duration::from_secs(30), || {
        let created = json(&suite.plane.kubectl_with_input(
            &["create", "--dry-run=server", "-o", "json", "-f", "-"],
            Some(probe),
        )?)?;
        same(
            "the probe's data.exported",
            created["data"]["exported"].clone(),
            Value::from("yes"),
        )
    })?;
    let actual = dry_run(&suite.plane, None, objects)?;
    same(
        "objects admitted through the policy",
        actual,
        expected.to_vec(),
    )
}

/// `kubectl create --dry-run=server` of `file` (`-`: `input`): the objects
/// as the API server would store them, server fields aside.
fn dry_run(plane: &ControlPlane, input: Option<&str>, file: &str) -> Result<Vec<Value>, String> {
    let created = plane.kubectl_with_input(
        &["create", "--dry-run=server", "-o", "json", "-f", file],
        input,
    )?;
    // kubectl prints one JSON object after the other.
    serde_json::Deserializer::from_str(&created)
        .into_iter::<Value>()
        .map(|object| object.map(without_server_fields).map_err(|e| e.to_string()))
        .collect()
}

/// Cases of the differential generator (`tests/differential`, the normal
/// mode, the seed of `SARTOR_EXPORT_SEED`, 1 by default) and the examples,
/// each exported (what is refused left out, counted by reason) and applied
/// as a policy; every object the API server accepts is admitted through the
/// policy exactly as `sartor mutate` predicts from the object as the policy
/// sees it (the API server's defaults in). `SARTOR_EXPORT_CASES` cases (40
/// by default; the documented long run takes 400). Runs before the install.
pub fn generated_sets_store_what_sartor_mutate_predicts(suite: &mut Suite) -> Result<(), String> {
    let count = env_number("SARTOR_EXPORT_CASES", 40)?;
    let seed = env_number("SARTOR_EXPORT_SEED", 1)?;
    let plane = &suite.plane;
    let dir = plane.dir().join("export-proof");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut proofs = vec![examples_proof()?, library_proof()?, docs_sidecar_proof()?];
    proofs.extend(
        generate::cases(seed, Mode::Normal, count)
            .map(|case| Proof::of(&case))
            .collect::<Vec<_>>(),
    );
    // The sets' namespaces: those created here are deleted after (with no
    // namespace controller they stay terminating: the names are not
    // reused), the others given back their labels and annotations.
    let existing = plane.kubectl(&["get", "namespaces", "-o", "name"])?;
    let needed: BTreeSet<&str> = proofs
        .iter()
        .filter_map(|proof| proof.namespace["metadata"]["name"].as_str())
        .chain([PROBE_NAMESPACE])
        .collect();
    let mut created = Vec::new();
    let mut saved = Vec::new();
    for name in needed {
        if existing
            .lines()
            .any(|line| line == format!("namespace/{name}"))
        {
            let mut namespace = json(&plane.kubectl(&["get", "namespace", name, "-o", "json"])?)?;
            let metadata = &namespace["metadata"];
            namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {
                "name": name, "labels": metadata["labels"], "annotations": metadata["annotations"]}});
            saved.push(namespace);
        } else {
            plane.kubectl(&["create", "namespace", name])?;
            created.push(name);
        }
    }
    let result = prove(plane, &dir, &proofs, count);
    let _ = plane.kubectl(&[
        "delete",
        "mutatingadmissionpolicy,mutatingadmissionpolicybinding",
        "sartor",
        "export-probe",
        "--ignore-not-found",
    ]);
    let _ = plane.kubectl_with_input(&["delete", "-f", "-"], Some(WIDGET_CRD));
    let _ = plane.kubectl(&[&["delete", "namespace", "--wait=false"][..], &created].concat());
    for namespace in saved {
        plane.kubectl_with_input(&["replace", "-f", "-"], Some(&namespace.to_string()))?;
    }
    result
}

/// Exports and admits `proofs` (the CRD and namespaces in place); fails
/// with every object admitted otherwise than predicted, or when fewer than
/// a third of `count` objects were proven.
fn prove(plane: &ControlPlane, dir: &Path, proofs: &[Proof], count: usize) -> Result<(), String> {
    plane.kubectl_with_input(&["apply", "-f", "-"], Some(WIDGET_CRD))?;
    plane.wait_established(Some("widgets.example.com"))?;
    let resources = dir.join("api-resources.txt");
    let listed = plane.kubectl(&["api-resources"])?;
    std::fs::write(&resources, listed).map_err(|e| format!("{}: {e}", resources.display()))?;
    let mut tally = Tally::default();
    let mut prepared = Vec::new();
    for (index, proof) in proofs.iter().enumerate() {
        let files = dir.join(index.to_string());
        if let Some(ready) = prepare(plane, proof, &files, &resources, &mut tally)? {
            prepared.push(ready);
        }
    }
    let mut differences = Vec::new();
    for (round, ready) in prepared.iter().enumerate() {
        differences.extend(admit(plane, ready, round, &mut tally)?);
    }
    eprintln!("{tally}");
    if !differences.is_empty() {
        return Err(format!(
            "{} of {} objects admitted otherwise than predicted:\n{}",
            differences.len(),
            tally.objects + differences.len(),
            differences.join("\n\n")
        ));
    }
    // A proof that proves nothing passes too: most sets must prove some.
    if tally.objects < count / 3 {
        return Err(format!("too few objects proven:\n{tally}"));
    }
    Ok(())
}

/// Where the probe's ConfigMap is created; the sets' policies leave it out.
const PROBE_NAMESPACE: &str = "export-probe";

/// The generator's custom resource.
pub(crate) const WIDGET_CRD: &str = "\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
";

/// A set of mutators, the Namespace its objects are admitted in, and the
/// objects.
#[derive(Clone)]
pub(crate) struct Proof {
    pub(crate) id: String,
    pub(crate) mutators: Vec<Value>,
    pub(crate) namespace: Value,
    pub(crate) objects: Vec<Value>,
    /// A published set: every mutator must export and every object be
    /// admitted (a generated set proves what of it exports).
    pub(crate) whole: bool,
}

impl Proof {
    /// A generated case, created as CREATE in its namespace.
    pub(crate) fn of(case: &Case) -> Proof {
        let name = admitted_namespace(&case.object, case).unwrap_or_else(|| "default".to_string());
        let namespace = case.namespace.clone().unwrap_or_else(
            || json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        );
        Proof {
            id: case.id.clone(),
            mutators: case.mutators.clone(),
            namespace: as_stored_namespace(namespace, &name),
            objects: vec![case.object.clone()],
            whole: false,
        }
    }
}

/// The examples' mutators and objects, in a twin of their Namespace.
pub(crate) fn examples_proof() -> Result<Proof, String> {
    let read = |relative: &str| sartor_tests::documents(&crate::repo().join(relative));
    let objects = read("examples/objects")?;
    let (namespaces, objects): (Vec<Value>, Vec<Value>) = objects
        .into_iter()
        .partition(|object| object["kind"] == "Namespace");
    let namespace = namespaces
        .into_iter()
        .next()
        .ok_or("examples/objects holds no Namespace")?;
    // Their namespace renamed, still under `prod-*`: later trials create
    // the examples' own.
    let name = format!(
        "{}-export",
        namespace["metadata"]["name"]
            .as_str()
            .ok_or("the examples' Namespace has no name")?
    );
    let objects = objects
        .into_iter()
        .map(|mut object| {
            if object["metadata"].get("namespace").is_some() {
                object["metadata"]["namespace"] = json!(name);
            }
            object
        })
        .collect();
    Ok(Proof {
        id: "examples".to_string(),
        mutators: read("examples/mutators")?,
        namespace: as_stored_namespace(namespace, &name),
        objects,
        whole: true,
    })
}

/// gatekeeper-library's pod-security-policy mutators and sample Pods
/// (tests/fixtures/export/gatekeeper-library), in a Namespace of their
/// own.
pub(crate) fn library_proof() -> Result<Proof, String> {
    published_proof("gatekeeper-library", "psp-library")
}

/// The sidecar example of Gatekeeper's documentation (an element assigned
/// whole, then its args merged: two passes), with Pods of ours
/// (tests/fixtures/export/gatekeeper-docs).
pub(crate) fn docs_sidecar_proof() -> Result<Proof, String> {
    published_proof("gatekeeper-docs", "docs-sidecar")
}

/// A published set kept under tests/fixtures/export/`fixture`
/// (`mutators.yaml`, `objects.yaml`), its objects in the Namespace `name`:
/// it must export whole.
fn published_proof(fixture: &str, name: &str) -> Result<Proof, String> {
    let dir = crate::repo().join("tests/fixtures/export").join(fixture);
    let objects = sartor_tests::documents(&dir.join("objects.yaml"))?
        .into_iter()
        .map(|mut object| {
            object["metadata"]["namespace"] = json!(name);
            object
        })
        .collect();
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    Ok(Proof {
        id: fixture.to_string(),
        mutators: sartor_tests::documents(&dir.join("mutators.yaml"))?,
        namespace: as_stored_namespace(namespace, name),
        objects,
        whole: true,
    })
}

/// `namespace` named `name` with the label the API server adds to every
/// Namespace.
fn as_stored_namespace(mut namespace: Value, name: &str) -> Value {
    namespace["metadata"]["name"] = json!(name);
    namespace["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!(name);
    namespace
}

/// A set ready to admit: the policy, its Namespace, and per object what it
/// must be stored as.
struct Ready {
    id: String,
    policy: String,
    namespace: Value,
    /// (the object as written, what the API server must answer)
    objects: Vec<(Value, Expected)>,
}

/// What admitting an object must give.
#[derive(Debug)]
enum Expected {
    /// Stored as this (server fields aside), or refused with this message
    /// (the prediction itself is invalid).
    Created(Result<Value, String>),
    /// sartor's mutation fails (`sartor mutate` says why): the API server
    /// refuses the object, as sartor's webhook would with `--on-error
    /// deny`: the policy's mutation fails too (`failurePolicy: Fail`), or
    /// leaves what the API server cannot decode (a string written where a
    /// list of a built-in kind goes: the failure sartor sees next).
    Fails(String),
}

impl Expected {
    /// Whether `actual` is what was expected.
    fn holds(&self, actual: &Result<Value, String>) -> bool {
        match (self, actual) {
            (Expected::Created(Ok(expected)), Ok(actual)) => expected == actual,
            // Refused for the same cause: admission says it in other words
            // (an internal error) than a create does (a bad request).
            (Expected::Created(Err(expected)), Err(actual)) => cause(expected) == cause(actual),
            (Expected::Created(_), _) => false,
            (Expected::Fails(why), Err(refusal)) => {
                (refusal.contains(FAILED_POLICY) || refusal.contains(UNDECODABLE))
                    && !why.is_empty()
            }
            (Expected::Fails(_), Ok(_)) => false,
        }
    }
}

/// The last clause of a refusal: its cause, without what wraps it.
fn cause(refusal: &str) -> &str {
    refusal.rsplit(": ").next().unwrap_or(refusal)
}

/// What the API server says when a patch left a value a built-in kind's
/// field cannot hold.
const UNDECODABLE: &str = "Internal error occurred: json: cannot unmarshal";

/// What the API server says when the exported policy's mutation fails.
const FAILED_POLICY: &str = "policy 'sartor'";

/// What the proof made of its sets, for the trial's output and the docs.
#[derive(Default)]
struct Tally {
    sets: usize,
    sets_exported: usize,
    mutators: usize,
    exported: usize,
    objects: usize,
    /// Objects equal to the prediction once the stored object went through
    /// the API server's admission plugins again, as the prediction did.
    replayed: usize,
    refusals: BTreeMap<String, usize>,
    skipped: BTreeMap<String, usize>,
}

impl fmt::Display for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "export proof: {} of {} sets exported ({} of {} mutators); {} objects admitted as predicted",
            self.sets_exported, self.sets, self.exported, self.mutators, self.objects
        )?;
        writeln!(
            f,
            "  {} of them once admitted again where no policy reaches (the API server's own admission plugins run on the prediction)",
            self.replayed
        )?;
        let mut refusals: Vec<_> = self.refusals.iter().collect();
        refusals.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (reason, count) in refusals {
            writeln!(f, "  refused {count:>4}: {reason}")?;
        }
        for (why, count) in &self.skipped {
            writeln!(f, "  skipped {count:>4}: {why}")?;
        }
        Ok(())
    }
}

/// Exports `proof` (leaving out what is refused), and predicts each object
/// from the object the API server's defaults give, while no policy is in
/// force; `None` when nothing is left to admit.
fn prepare(
    plane: &ControlPlane,
    proof: &Proof,
    files: &Path,
    resources: &Path,
    tally: &mut Tally,
) -> Result<Option<Ready>, String> {
    std::fs::create_dir_all(files).map_err(|e| format!("{}: {e}", files.display()))?;
    let write = |name: &str, documents: &[Value]| -> Result<String, String> {
        let path = files.join(name);
        let text: Vec<String> = documents.iter().map(Value::to_string).collect();
        std::fs::write(&path, text.join("\n---\n"))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(path.display().to_string())
    };
    tally.sets += 1;
    tally.mutators += proof.mutators.len();
    let mut mutators = proof.mutators.clone();
    // The names the API server refuses never reach a cluster.
    mutators.retain(|mutator| valid_name(mutator["metadata"]["name"].as_str().unwrap_or("")));
    let named = proof.mutators.len() - mutators.len();
    if named > 0 {
        *tally
            .skipped
            .entry("mutators: names the API server refuses".into())
            .or_default() += named;
    }
    let mut policy = None;
    for _ in 0..4 {
        if mutators.is_empty() {
            break;
        }
        let file = write("mutators.yaml", &mutators)?;
        let (code, stdout, stderr) = sartor_output(&[
            "export",
            "map",
            "--failure-policy",
            "Fail",
            "--exclude-namespace",
            "kube-system",
            // The probe's namespace: the set's mutations stay out of it.
            "--exclude-namespace",
            PROBE_NAMESPACE,
            "--api-resources",
            &resources.display().to_string(),
            &file,
        ])?;
        match code {
            0 => {
                policy = Some(stdout);
                break;
            }
            1 => {
                let refused: BTreeSet<String> = stderr
                    .lines()
                    .filter_map(|line| line.split_once(": not exported: "))
                    .map(|(mutator, reason)| {
                        *tally.refusals.entry(reason_class(reason)).or_default() += 1;
                        mutator.to_string()
                    })
                    .collect();
                mutators.retain(|mutator| {
                    let named = format!(
                        "{}/{}",
                        mutator["kind"].as_str().unwrap_or(""),
                        mutator["metadata"]["name"].as_str().unwrap_or("")
                    );
                    !refused.contains(&named)
                });
            }
            2 => {
                // Mutators sartor refuses to load never reach a cluster
                // either (its validating webhook refuses them).
                let before = mutators.len();
                if !without_invalid(&mut mutators, &stderr) {
                    return Err(format!(
                        "{}: sartor export map exited 2: {stderr}",
                        proof.id
                    ));
                }
                *tally
                    .skipped
                    .entry("mutators: refused by sartor".into())
                    .or_default() += before - mutators.len();
            }
            _ => {
                return Err(format!(
                    "{}: sartor export map exited {code}: {stderr}",
                    proof.id
                ));
            }
        }
    }
    if proof.whole && mutators.len() < proof.mutators.len() {
        return Err(format!(
            "{}: {} of {} mutators exported, and a published set must export whole",
            proof.id,
            mutators.len(),
            proof.mutators.len()
        ));
    }
    let Some(policy) = policy else {
        *tally
            .skipped
            .entry("sets: no mutator exports".into())
            .or_default() += 1;
        return Ok(None);
    };
    tally.sets_exported += 1;
    tally.exported += mutators.len();
    let mutators_file = write("mutators.yaml", &mutators)?;
    let namespace_file = write("namespace.yaml", std::slice::from_ref(&proof.namespace))?;
    let name = proof.namespace["metadata"]["name"]
        .as_str()
        .unwrap_or("default");
    let mut objects = Vec::new();
    for object in &proof.objects {
        if object["kind"] == "Namespace" {
            // Its name is one of the suite's namespaces: a create would fail.
            *tally
                .skipped
                .entry("objects: Namespaces".into())
                .or_default() += 1;
            continue;
        }
        let stored = match create(plane, object, name) {
            Ok(stored) => stored,
            Err(refusal) if proof.whole => {
                return Err(format!(
                    "{}: the API server refuses {object} as written: {refusal}",
                    proof.id
                ));
            }
            Err(_) => {
                *tally
                    .skipped
                    .entry("objects: refused by the API server as written".into())
                    .or_default() += 1;
                continue;
            }
        };
        // The install's exclusion, which the policy carries.
        if name == "kube-system" {
            objects.push((object.clone(), Expected::Created(Ok(stored))));
            continue;
        }
        let defaulted = without_allocations(stored, object);
        let input = write("object.yaml", std::slice::from_ref(&defaulted))?;
        let (code, stdout, stderr) = sartor_output(&[
            "mutate",
            "--mutators",
            &mutators_file,
            "--namespaces",
            &namespace_file,
            "--api-resources",
            &resources.display().to_string(),
            "-n",
            name,
            "-o",
            "json",
            &input,
        ])?;
        let expected = match code {
            0 => Expected::Created(create(plane, &json(&stdout)?, name)),
            1 => Expected::Fails(stderr),
            _ => {
                return Err(format!(
                    "{}: sartor mutate exited {code}: {stderr}",
                    proof.id
                ));
            }
        };
        objects.push((object.clone(), expected));
    }
    Ok(Some(Ready {
        id: proof.id.clone(),
        policy,
        namespace: proof.namespace.clone(),
        objects,
    }))
}

/// Puts `ready`'s policy and Namespace in force and admits its objects;
/// each one stored otherwise than predicted, described.
fn admit(
    plane: &ControlPlane,
    ready: &Ready,
    round: usize,
    tally: &mut Tally,
) -> Result<Vec<String>, String> {
    // The last set's policy out of force first, or it would mutate the
    // Namespace as it is replaced.
    let _ = plane.kubectl(&[
        "delete",
        "mutatingadmissionpolicy,mutatingadmissionpolicybinding",
        "sartor",
        "--ignore-not-found",
    ]);
    in_force(plane, &format!("{round}-cleared"), None)?;
    plane.kubectl_with_input(&["replace", "-f", "-"], Some(&ready.namespace.to_string()))?;
    in_force(plane, &round.to_string(), Some(&ready.policy))?;
    let name = ready.namespace["metadata"]["name"]
        .as_str()
        .unwrap_or("default");
    let mut differences = Vec::new();
    for (object, expected) in &ready.objects {
        let mut actual = create(plane, object, name);
        if !expected.holds(&actual)
            && let Ok(stored) = &actual
        {
            // The prediction went through the API server's own admission
            // plugins (default tolerations, ...) once more, after sartor's
            // mutation; so does the stored object, where no policy reaches.
            actual = create_elsewhere(
                plane,
                &without_allocations(stored.clone(), object),
                name,
                Fields::Strict,
            );
            tally.replayed += usize::from(expected.holds(&actual));
        }
        if expected.holds(&actual) {
            tally.objects += 1;
        } else {
            differences.push(format!(
                "{} ({}):\n  object:    {object}\n  actual:    {actual:?}\n  predicted: {expected:?}",
                ready.id, ready.policy
            ));
        }
    }
    Ok(differences)
}

/// `stored` without what the API server allocates after admission (a
/// Service's cluster IPs, IP families, node ports and, for a LoadBalancer
/// with `externalTrafficPolicy: Local`, its health check node port) unless
/// `written` has it: the object as a policy sees it, defaults in.
pub(crate) fn without_allocations(mut stored: Value, written: &Value) -> Value {
    if stored["kind"] != "Service" {
        return stored;
    }
    for field in [
        "clusterIP",
        "clusterIPs",
        "ipFamilies",
        "ipFamilyPolicy",
        "healthCheckNodePort",
    ] {
        if written["spec"].get(field).is_none()
            && let Some(spec) = stored["spec"].as_object_mut()
        {
            spec.remove(field);
        }
    }
    if let Some(ports) = stored["spec"]["ports"].as_array_mut() {
        for (index, port) in ports.iter_mut().enumerate() {
            if written["spec"]["ports"][index].get("nodePort").is_none()
                && let Some(port) = port.as_object_mut()
            {
                port.remove("nodePort");
            }
        }
    }
    stored
}

/// Applies `policy` and then the probe's policy (setting `round`), and
/// waits until the probe's is in force: then so is everything written
/// before it, as the API server watches policies in the order written.
fn in_force(plane: &ControlPlane, round: &str, policy: Option<&str>) -> Result<(), String> {
    let probe = probe_policy(round);
    let documents = match policy {
        Some(policy) => format!("{policy}\n---\n{probe}"),
        None => probe,
    };
    plane.kubectl_with_input(
        &[
            "apply",
            "--server-side",
            "--field-manager=export-proof",
            "-f",
            "-",
        ],
        Some(&documents),
    )?;
    let expected = Value::from(round);
    eventually(
        "the probe's policy in force",
        Duration::from_secs(30),
        || {
            let probe = json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "probe", "namespace": PROBE_NAMESPACE}});
            let created = create(plane, &probe, PROBE_NAMESPACE)?;
            same(
                "the probe's round",
                created["data"]["round"].clone(),
                expected.clone(),
            )
        },
    )
}

/// A policy that sets a ConfigMap's `data.round` in `export-probe`.
fn probe_policy(round: &str) -> String {
    format!(
        "\
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {{name: export-probe}}
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: export-probe}}}}
    resourceRules:
    - {{apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}}
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: '[JSONPatch{{op: \"add\", path: \"/data\", value: {{\"round\": \"{round}\"}}}}]'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {{name: export-probe}}
spec: {{policyName: export-probe}}
"
    )
}

/// `object` created in `namespace` with a server-side dry run: as the API
/// server would store it (server fields aside), or its refusal.
pub(crate) fn create(
    plane: &ControlPlane,
    object: &Value,
    namespace: &str,
) -> Result<Value, String> {
    create_with(plane, object, namespace, Fields::Strict)
}

/// What the API server does with fields an object's kind does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fields {
    /// Refuses the object, as `kubectl create` asks by default.
    Strict,
    /// Drops them, as it does with what a webhook's patch leaves.
    Dropped,
}

/// [`create`], with unknown fields treated as `fields` says.
pub(crate) fn create_with(
    plane: &ControlPlane,
    object: &Value,
    namespace: &str,
    fields: Fields,
) -> Result<Value, String> {
    let validate = match fields {
        Fields::Strict => "--validate=strict",
        Fields::Dropped => "--validate=ignore",
    };
    let created = sartor_tests::cluster::run(
        plane.kubectl_command().args([
            "create",
            "--dry-run=server",
            validate,
            "-o",
            "json",
            "-n",
            namespace,
            "-f",
            "-",
        ]),
        Some(&object.to_string()),
    )?;
    json(&created).map(without_server_fields)
}

/// `object` (of `namespace`) created in `kube-system`, which the policies
/// leave out, as [`create`] gives it, back in `namespace`.
pub(crate) fn create_elsewhere(
    plane: &ControlPlane,
    object: &Value,
    namespace: &str,
    fields: Fields,
) -> Result<Value, String> {
    let mut moved = object.clone();
    if moved["metadata"].get("namespace").is_some() {
        moved["metadata"]["namespace"] = json!("kube-system");
    }
    let mut created = create_with(plane, &moved, "kube-system", fields)?;
    if created["metadata"].get("namespace").is_some() {
        created["metadata"]["namespace"] = json!(namespace);
    }
    Ok(created)
}

/// Runs `sartor args...`: its exit code, stdout and stderr.
pub(crate) fn sartor_output(args: &[&str]) -> Result<(i32, String, String), String> {
    let output = std::process::Command::new(sartor_tests::binary::sartor()?)
        .args(args)
        .output()
        .map_err(|e| format!("sartor {}: {e}", args.join(" ")))?;
    Ok((
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    ))
}

/// A refusal's reason with what names one mutator's fields and peers left
/// out, so that reasons count by kind.
fn reason_class(reason: &str) -> String {
    reason
        .split(' ')
        .map(|word| {
            let specific = word.contains(['.', '[', '/', ':'])
                && !word.ends_with('.')
                && word != "(parameters.conditions)";
            if specific { "…" } else { word }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A DNS-1123 subdomain, as the API server requires of a custom resource's
/// name.
pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// A number from the environment, or `default`.
pub(crate) fn env_number<T: std::str::FromStr>(name: &str, default: T) -> Result<T, String> {
    match std::env::var(name) {
        Ok(text) => text
            .parse()
            .map_err(|_| format!("{name}={text}: not a number")),
        Err(_) => Ok(default),
    }
}

/// `sartor export map` refuses what the API server's CEL parser would
/// refuse, before `kubectl apply` does. Each shape of expression the
/// parser's limit counts (`sartor_export::limits::shapes`), around the
/// deepest the API server took: where sartor's check takes it, the API
/// server takes it, and where the API server refuses it, so does the check
/// (which counts a chain of selections one deeper than the parser: refused
/// by sartor only, on the safe side). Then a set with a value nested too
/// deep (a long location) and one too long (a long value): the two are
/// named, the rest applies.
pub fn the_api_servers_limits_are_checked_at_export(suite: &mut Suite) -> Result<(), String> {
    let plane = &suite.plane;
    let mut disagreements = Vec::new();
    for depth in 246..=251 {
        for (shape, expression) in limits::shapes(depth) {
            let taken = policy_taken(plane, &expression)?;
            let checked = limits::check(&expression);
            let safe_side = shape == "selections" && taken.is_ok() && checked.is_err();
            if taken.is_ok() != checked.is_ok() && !safe_side {
                disagreements.push(format!(
                    "{shape} at {depth}: the API server: {taken:?}; sartor: {checked:?}"
                ));
            }
        }
    }
    if !disagreements.is_empty() {
        return Err(disagreements.join("\n"));
    }

    // Values nest no deeper than a mutator file may (serde's limit of 128),
    // but a location's fields each nest the expression a few levels.
    let assign = |name: &str, fields: usize, value: Value| {
        json!({"apiVersion": "mutations.sartor.dev/v1", "kind": "Assign",
               "metadata": {"name": name},
               "spec": {"applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["ConfigMap"]}],
                        "location": format!("spec.{name}{}", ".a".repeat(fields)),
                        "parameters": {"assign": {"value": value}}}})
    };
    let mutators = [
        assign("deep", 100, json!("x")),
        assign("long", 0, json!("x".repeat(60_000))),
        assign("nested", 60, json!("x")),
        assign("sized", 0, json!("x".repeat(40_000))),
    ];
    let file = plane.dir().join("export-limits.yaml");
    let text: Vec<String> = mutators.iter().map(Value::to_string).collect();
    std::fs::write(&file, text.join("\n---\n")).map_err(|e| format!("{}: {e}", file.display()))?;
    let (code, policy, stderr) = sartor_output(&["export", "map", &file.display().to_string()])?;
    same("sartor export map's exit code", code, 1)?;
    same(
        "what sartor export map says",
        stderr.as_str(),
        "Assign/deep: not exported: its expression would nest 304 levels deep, and the API server's CEL parser stops at 250\n\
         Assign/long: not exported: its expression would be 120282 characters long, and the API server takes at most 100000\n\
         2 of 4 mutators exported\n",
    )?;
    plane.kubectl_with_input(
        &["apply", "--server-side", "--dry-run=server", "-f", "-"],
        Some(&policy),
    )?;
    Ok(())
}

/// Whether the API server stores a policy whose one mutation is
/// `expression` (a server-side dry run): its refusal when it does not.
fn policy_taken(plane: &ControlPlane, expression: &str) -> Result<Result<(), String>, String> {
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": "export-limits"},
        "spec": {
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                 "operations": ["CREATE"], "resources": ["pods"]}]},
            "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": expression}}],
        },
    });
    let answer = sartor_tests::cluster::run(
        plane
            .kubectl_command()
            .args(["apply", "--server-side", "--dry-run=server", "-f", "-"]),
        Some(&policy.to_string()),
    );
    match answer {
        Ok(_) => Ok(Ok(())),
        Err(refusal)
            if refusal.contains("recursion")
                || refusal.contains("code point size exceeds limit") =>
        {
            Ok(Err(cause(&refusal).to_string()))
        }
        Err(other) => Err(other),
    }
}

/// `mutators` without the documents `stderr` (sartor's, on a
/// `mutators.yaml`) names as invalid or in conflict; false when it names
/// none.
pub(crate) fn without_invalid(mutators: &mut Vec<Value>, stderr: &str) -> bool {
    let invalid: BTreeSet<usize> = stderr
        .lines()
        .filter_map(|line| {
            line.split_once("mutators.yaml: document ")?
                .1
                .split_once(':')
        })
        .filter_map(|(number, _)| number.parse::<usize>().ok())
        .collect();
    let before = mutators.len();
    let mut index = 0;
    mutators.retain(|_| {
        index += 1;
        !invalid.contains(&index)
    });
    mutators.len() < before
}
