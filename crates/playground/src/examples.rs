//! The repository's examples (`examples/`), embedded so the page offers
//! them with no file beside the binary: each mutator file with the example
//! objects, and all of them together.

use serde::Serialize;

/// The example mutator files, by name, as in `examples/mutators`.
const MUTATORS: [(&str, &str); 9] = [
    (
        "always-pull",
        include_str!("../../../examples/mutators/always-pull.yaml"),
    ),
    (
        "log-sidecar",
        include_str!("../../../examples/mutators/log-sidecar.yaml"),
    ),
    (
        "no-host-ports",
        include_str!("../../../examples/mutators/no-host-ports.yaml"),
    ),
    (
        "owner-label",
        include_str!("../../../examples/mutators/owner-label.yaml"),
    ),
    (
        "pin-registry",
        include_str!("../../../examples/mutators/pin-registry.yaml"),
    ),
    (
        "prune-debug-flag",
        include_str!("../../../examples/mutators/prune-debug-flag.yaml"),
    ),
    (
        "read-only-root",
        include_str!("../../../examples/mutators/read-only-root.yaml"),
    ),
    (
        "seccomp-default",
        include_str!("../../../examples/mutators/seccomp-default.yaml"),
    ),
    (
        "team-from-namespace",
        include_str!("../../../examples/mutators/team-from-namespace.yaml"),
    ),
];

/// The example objects, in the order they are shown: the Namespace first,
/// so its labels are there for the mutators that read them.
const OBJECTS: [(&str, &str); 3] = [
    (
        "namespace",
        include_str!("../../../examples/objects/namespace.yaml"),
    ),
    ("pod", include_str!("../../../examples/objects/pod.yaml")),
    (
        "deployment",
        include_str!("../../../examples/objects/deployment.yaml"),
    ),
];

/// One example the page can load: its mutators and objects, as YAML.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Example {
    /// What the page lists it as.
    pub name: String,
    /// The mutators pane.
    pub mutators: String,
    /// The objects pane.
    pub objects: String,
}

/// Every example mutator together, then each file alone, all with the
/// example objects.
pub fn examples() -> Vec<Example> {
    let objects = joined(OBJECTS.iter().map(|(_, text)| *text));
    let all = Example {
        name: "all the examples".to_string(),
        mutators: joined(MUTATORS.iter().map(|(_, text)| *text)),
        objects: objects.clone(),
    };
    std::iter::once(all)
        .chain(MUTATORS.iter().map(|(name, text)| Example {
            name: (*name).to_string(),
            mutators: (*text).to_string(),
            objects: objects.clone(),
        }))
        .collect()
}

/// YAML files as one stream of documents.
fn joined<'a>(files: impl Iterator<Item = &'a str>) -> String {
    files
        .map(|text| text.trim_end_matches('\n'))
        .collect::<Vec<_>>()
        .join("\n---\n")
        + "\n"
}

/// The names embedded, for the test that keeps them in step with
/// `examples/`.
#[cfg(test)]
pub(crate) fn embedded() -> (Vec<&'static str>, Vec<&'static str>) {
    (
        MUTATORS.iter().map(|(name, _)| *name).collect(),
        OBJECTS.iter().map(|(name, _)| *name).collect(),
    )
}
