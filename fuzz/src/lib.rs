//! Helpers shared by the fuzz targets: a reader of fuzz bytes that never runs
//! dry (an exhausted input reads zeros), and builders of mutator documents
//! from it (a small grammar of locations, values and match criteria, with an
//! escape to fuzzed strings).

use serde_json::{Value, json};

/// Fuzz bytes, read front to back; past the end every byte is 0.
pub struct Bytes<'a> {
    data: &'a [u8],
}

impl<'a> Bytes<'a> {
    /// A reader of `data`.
    pub fn new(data: &'a [u8]) -> Bytes<'a> {
        Bytes { data }
    }

    /// The next byte (0 once exhausted).
    pub fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((first, rest)) => {
                self.data = rest;
                *first
            }
            None => 0,
        }
    }

    /// A number below `n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        usize::from(self.byte()) % n.max(1)
    }

    /// One of `items` (not empty).
    pub fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        let i = self.below(items.len());
        items[i].clone()
    }

    /// A length-prefixed string: one length byte (up to 63), then that many
    /// bytes, lossily UTF-8.
    pub fn string(&mut self) -> String {
        let len = usize::from(self.byte() & 63).min(self.data.len());
        let (s, rest) = self.data.split_at(len);
        self.data = rest;
        String::from_utf8_lossy(s).into_owned()
    }

    /// Whatever is left.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.data)
    }

    /// Whether anything is left.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

const FIELDS: &[&str] = &[
    "spec",
    "containers",
    "initContainers",
    "image",
    "metadata",
    "labels",
    "annotations",
    "env",
    "ports",
    "args",
    "securityContext",
    "a",
    "b",
    "'a.b'",
    "\"x y\"",
    "value",
    "name",
];
const KEYS: &[&str] = &["name", "containerPort", "key", "'a b'"];
const KEY_VALUES: &[&str] = &[
    "*",
    "app",
    "side",
    "80",
    "\"80\"",
    "''",
    "notin (app, side)",
    "notin (80)",
];

/// A location from a small grammar (fields, keyed lists, globs, exclusions),
/// or, for one byte value in eight, a fuzzed string.
pub fn location(b: &mut Bytes<'_>, kind: &str) -> String {
    let choice = b.below(8);
    if choice == 7 {
        return b.string();
    }
    if choice < 3 {
        let pool: &[&str] = match kind {
            "AssignMetadata" => &[
                "metadata.labels.owner",
                "metadata.annotations.team",
                "metadata.labels.\"app.kubernetes.io/name\"",
            ],
            "ModifySet" => &[
                "spec.containers[name: *].args",
                "metadata.finalizers",
                "spec.containers[name: app].command",
                "spec.containers[name notin (side)].args",
            ],
            "AssignImage" => &[
                "spec.containers[name: *].image",
                "spec.initContainers[name: *].image",
                "spec.image",
            ],
            _ => &[
                "spec.containers[name: *].imagePullPolicy",
                "spec.containers[name: app].image",
                "spec.securityContext.runAsNonRoot",
                "spec.containers[name: *].securityContext.readOnlyRootFilesystem",
                "spec.priority",
                "spec.containers[name notin (app, side)].env[name: X].value",
                "spec.containers[name: *].ports[containerPort: 80].protocol",
                "spec.volumes[name: v].emptyDir",
                "spec.a.b",
            ],
        };
        return b.pick(pool).to_string();
    }
    let mut out = String::new();
    if kind == "AssignMetadata" {
        out.push_str(b.pick(&["metadata.labels.", "metadata.annotations.", "metadata."]));
    } else {
        out.push_str("spec.");
    }
    let nodes = 1 + b.below(4);
    for i in 0..nodes {
        if i > 0 {
            out.push('.');
        }
        out.push_str(b.pick(FIELDS));
        if b.below(3) == 0 {
            let key = b.pick(KEYS);
            let value = b.pick(KEY_VALUES);
            if let Some(values) = value.strip_prefix("notin ") {
                out.push_str(&format!("[{key} notin {values}]"));
            } else {
                out.push_str(&format!("[{key}: {value}]"));
            }
        }
    }
    out
}

/// A value for Assign/AssignMetadata or a set member.
pub fn value(b: &mut Bytes<'_>) -> Value {
    match b.below(12) {
        0 => json!("Always"),
        1 => json!(1),
        2 => json!(true),
        3 => json!({"a": 1}),
        4 => json!([1, 2]),
        5 => Value::Null,
        6 => json!({"x": {"y": "z"}}),
        7 => json!([{"name": "app"}, {"name": "side", "image": "busybox"}]),
        8 => json!({"name": "X", "value": "1"}),
        9 => json!(-3.5),
        10 => serde_json::from_slice(b.string().as_bytes()).unwrap_or(Value::Null),
        _ => json!(b.string()),
    }
}

/// pathTests for `location`: a prefix of it (cut at a dot) or a fuzzed subPath.
pub fn path_tests(b: &mut Bytes<'_>, location: &str) -> Value {
    let n = b.below(3);
    let mut tests = Vec::new();
    for _ in 0..n {
        let sub_path = match b.below(4) {
            0 => b.string(),
            1 => location.to_string(),
            _ => {
                let cuts: Vec<usize> = location.match_indices('.').map(|(i, _)| i).collect();
                match cuts.len() {
                    0 => location.to_string(),
                    n => {
                        let at = cuts[b.below(n)];
                        location.get(..at).unwrap_or(location).to_string()
                    }
                }
            }
        };
        let condition = b.pick(&["MustExist", "MustNotExist", "MustExist", "Maybe"]);
        tests.push(json!({"subPath": sub_path, "condition": condition}));
    }
    Value::Array(tests)
}

/// Value conditions (sartor only), sometimes.
pub fn conditions(b: &mut Bytes<'_>) -> Option<Value> {
    if b.below(6) != 0 {
        return None;
    }
    let path = b.pick(&[
        "spec.hostNetwork",
        "metadata.labels.team",
        "spec.containers[name: app].image",
        "spec.priority",
    ]);
    let operator = b.pick(&["In", "NotIn", "Exists", "DoesNotExist"]);
    let values = if b.below(2) == 0 {
        json!([value(b)])
    } else {
        json!([])
    };
    Some(json!([{"path": path, "operator": operator, "values": values}]))
}

/// A `match`, sometimes.
pub fn match_(b: &mut Bytes<'_>) -> Option<Value> {
    Some(match b.below(10) {
        0 => json!({"scope": "Namespaced"}),
        1 => json!({"scope": "Cluster"}),
        2 => json!({"namespaces": ["shop", "kube-*"]}),
        3 => json!({"excludedNamespaces": ["kube-system"]}),
        4 => json!({"labelSelector": {"matchLabels": {"app": "web"}}}),
        5 => json!({"kinds": [{"apiGroups": ["*"], "kinds": ["Pod"]}]}),
        6 => json!({"name": "web*"}),
        7 => json!({"source": "Generated"}),
        8 => json!({"labelSelector": {"matchExpressions": [
            {"key": "tier", "operator": b.pick(&["In", "NotIn", "Exists", "DoesNotExist"]),
             "values": [b.string()]}]}}),
        _ => return None,
    })
}

/// `applyTo`, Pods most of the time.
pub fn apply_to(b: &mut Bytes<'_>) -> Value {
    match b.below(6) {
        0 => json!([{"groups": ["apps"], "versions": ["v1"], "kinds": ["Deployment"]}]),
        1 => json!([{"groups": ["*"], "versions": ["*"], "kinds": ["*"]}]),
        2 => json!([{"groups": [""], "versions": ["v1"], "kinds": ["Pod", "ConfigMap"]},
                    {"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}]),
        _ => json!([{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}]),
    }
}

/// The four kinds, in the order a kind byte picks them.
pub const KINDS: [&str; 4] = ["Assign", "AssignMetadata", "ModifySet", "AssignImage"];

/// A mutator document of `kind` named `name`, its fields drawn from `b`.
pub fn mutator(b: &mut Bytes<'_>, kind: &str, name: &str) -> Value {
    let location = location(b, kind);
    let mut parameters = serde_json::Map::new();
    let tests = path_tests(b, &location);
    if tests.as_array().is_some_and(|t| !t.is_empty()) && kind != "AssignMetadata" {
        parameters.insert("pathTests".into(), tests);
    }
    match kind {
        "Assign" | "AssignMetadata" => {
            let assign = match b.below(8) {
                0 => json!({"fromMetadata": {"field": b.pick(&["name", "namespace"])}}),
                1 => json!({"remove": true}),
                2 => json!({"fromNamespace": {"label": "team", "default": "none"}}),
                3 if kind == "AssignMetadata" => json!({"value": value(b)}),
                _ if kind == "AssignMetadata" => json!({"value": b.string()}),
                _ => json!({"value": value(b)}),
            };
            parameters.insert("assign".into(), assign);
        }
        "ModifySet" => {
            parameters.insert("operation".into(), json!(b.pick(&["merge", "prune"])));
            let n = b.below(4);
            let list: Vec<Value> = (0..n).map(|_| value(b)).collect();
            parameters.insert("values".into(), json!({"fromList": list}));
        }
        _ => {
            let domains = [
                "mirror.example.com",
                "localhost:5000",
                "",
                "a.b:x",
                "UPPER.io",
            ];
            let paths = ["library/nginx", "", "x", "a//b", "team/app"];
            let tags = [":v1", "@sha256:0123", "", ":", "latest"];
            if b.below(2) == 0 {
                parameters.insert("assignDomain".into(), json!(b.pick(&domains)));
            }
            if b.below(2) == 0 {
                parameters.insert("assignPath".into(), json!(b.pick(&paths)));
            }
            if b.below(2) == 0 {
                parameters.insert("assignTag".into(), json!(b.pick(&tags)));
            }
            if b.below(8) == 0 {
                parameters.insert("assignTag".into(), json!(b.string()));
            }
        }
    }
    if let Some(conditions) = conditions(b) {
        parameters.insert("conditions".into(), conditions);
    }
    let mut spec = serde_json::Map::new();
    spec.insert("location".into(), json!(location));
    spec.insert("parameters".into(), Value::Object(parameters));
    if kind != "AssignMetadata" {
        spec.insert("applyTo".into(), apply_to(b));
    }
    if let Some(m) = match_(b) {
        spec.insert("match".into(), m);
    }
    let api_version = if b.below(4) == 0 {
        "mutations.gatekeeper.sh/v1"
    } else {
        "mutations.sartor.dev/v1"
    };
    json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name},
        "spec": Value::Object(spec),
    })
}

/// A Pod-like object from the rest of the input: the input as JSON when it
/// is a JSON object, else a fixed Pod.
pub fn object(data: &[u8]) -> Value {
    match serde_json::from_slice::<Value>(data) {
        Ok(Value::Object(mut fields)) => {
            // The object is the fuzzer's, the kind mostly not: keep it a Pod
            // unless it names a kind itself.
            fields.entry("apiVersion").or_insert_with(|| json!("v1"));
            fields.entry("kind").or_insert_with(|| json!("Pod"));
            Value::Object(fields)
        }
        _ => json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
            "spec": {"containers": [
                {"name": "app", "image": "nginx", "args": ["-v"],
                 "ports": [{"containerPort": 80}]},
                {"name": "side", "image": "docker.io/library/busybox:1.36"},
            ]},
        }),
    }
}
