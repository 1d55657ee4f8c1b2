//! Whether a kind is namespaced, as the API server's discovery says, and so
//! in which namespace an object is admitted offline.
//!
//! In a cluster every namespaced object is admitted in a namespace: the API
//! server fills in `metadata.namespace` from the request (`kubectl apply -n`,
//! the context's namespace, an Argo CD or Flux destination) before any
//! webhook sees it, and clears it on a cluster-scoped object. A manifest in a
//! repository usually has none, so an offline preview decides from the kind,
//! never from whether the field is there:
//!
//! ```text
//!  built-in table (kube-apiserver discovery, checked in)
//!  + CustomResourceDefinitions among the inputs      ──▶ Scopes ──place(object, -n)──▶ Placement
//!  + `kubectl api-resources` output (--api-resources)
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::LazyLock;

use serde_json::Value;

use crate::request::Gvk;

/// The Kubernetes version whose discovery [`Scopes::builtin`] holds.
pub const BUILTIN_KUBERNETES_VERSION: &str = "1.37.2";

/// `kubectl api-resources` of a kube-apiserver at
/// [`BUILTIN_KUBERNETES_VERSION`] with no CRDs; regenerate with
/// `SARTOR_BLESS=1 cargo test -p sartor-tests --test cluster scope`.
const BUILTIN: &str = include_str!("scope/api-resources.txt");

static BUILTIN_SCOPES: LazyLock<Scopes> = LazyLock::new(|| {
    let mut scopes = Scopes::default();
    // The table is checked against the real API server by the cluster suite
    // and parsed by this module's tests: it cannot fail here.
    if let Ok(resources) = ApiResource::parse(BUILTIN) {
        scopes.extend_listed(resources);
    }
    scopes
});

/// Which kinds are namespaced, by API group and kind (any version), and
/// the resource (plural) each is served as where that is known.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scopes {
    kinds: BTreeMap<(String, String), bool>,
    plurals: BTreeMap<(String, String), String>,
    /// Groups whose every kind is known: those of a discovery listing.
    listed: BTreeSet<String>,
}

/// One row of `kubectl api-resources`: a kind, its scope and its resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiResource {
    /// The API group; empty for the core group.
    pub group: String,
    /// The kind, such as `Pod`.
    pub kind: String,
    /// Whether its objects live in a namespace.
    pub namespaced: bool,
    /// The resource it is served as, such as `pods` (the NAME column, a
    /// CRD's `spec.names.plural`); `None` when not given.
    pub plural: Option<String>,
}

/// Text that is not the output of `kubectl api-resources`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApiResourcesError {
    /// The first non-blank line does not name the columns sartor reads.
    #[error(
        "line {line}: expected the header of `kubectl api-resources` (with APIVERSION, NAMESPACED and KIND columns); run it without --no-headers"
    )]
    Header {
        /// 1-based.
        line: usize,
    },
    /// A row without a value sartor reads.
    #[error("line {line}: no {column} value under its header")]
    Missing {
        /// 1-based.
        line: usize,
        /// `APIVERSION`, `NAMESPACED` or `KIND`.
        column: &'static str,
    },
    /// NAMESPACED is neither `true` nor `false`.
    #[error("line {line}: NAMESPACED is {value:?}, expected true or false")]
    Namespaced {
        /// 1-based.
        line: usize,
        /// What it read.
        value: String,
    },
}

/// A CustomResourceDefinition that does not say which kind it defines or
/// its scope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
#[error("CustomResourceDefinition {name:?}: {reason}")]
pub struct CrdError {
    /// Its `metadata.name`.
    pub name: String,
    /// What is missing or wrong.
    pub reason: String,
}

/// Where an object is admitted, offline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement<'a> {
    /// A cluster-scoped kind (a `metadata.namespace` on it is ignored, as
    /// the API server clears it), or a Namespace, which is its own namespace.
    Cluster,
    /// A namespaced kind, in its `metadata.namespace` (or, for a kind the
    /// scopes do not know, any object that has one).
    Declared(&'a str),
    /// A namespaced kind without `metadata.namespace`, admitted in the
    /// default namespace (`-n`), as `kubectl apply` would.
    Assumed(&'a str),
    /// A kind the scopes do not know, without `metadata.namespace`: admitted
    /// as cluster-scoped.
    Unknown,
}

// === impl Scopes ===

impl Scopes {
    /// The built-in kinds of Kubernetes [`BUILTIN_KUBERNETES_VERSION`],
    /// parsed once; clone it to add more.
    pub fn builtin() -> &'static Scopes {
        &BUILTIN_SCOPES
    }

    /// Whether objects of `group`/`kind` are namespaced; `None` when unknown.
    pub fn namespaced(&self, group: &str, kind: &str) -> Option<bool> {
        self.kinds
            .get(&(group.to_string(), kind.to_string()))
            .copied()
    }

    /// Records the scope of `group`/`kind`, replacing what was known.
    pub fn insert(&mut self, group: &str, kind: &str, namespaced: bool) {
        self.kinds
            .insert((group.to_string(), kind.to_string()), namespaced);
    }

    /// Records every row of `resources`.
    pub fn extend(&mut self, resources: impl IntoIterator<Item = ApiResource>) {
        for resource in resources {
            self.insert(&resource.group, &resource.kind, resource.namespaced);
            if let Some(plural) = resource.plural {
                self.plurals.insert((resource.group, resource.kind), plural);
            }
        }
    }

    /// Records every row of a discovery listing (`kubectl api-resources`):
    /// its groups' kinds are then all known.
    pub fn extend_listed(&mut self, resources: impl IntoIterator<Item = ApiResource>) {
        let resources: Vec<ApiResource> = resources.into_iter().collect();
        self.listed
            .extend(resources.iter().map(|resource| resource.group.clone()));
        self.extend(resources);
    }

    /// The resource `group`/`kind` is served as, when known.
    pub fn plural(&self, group: &str, kind: &str) -> Option<&str> {
        self.plurals
            .get(&(group.to_string(), kind.to_string()))
            .map(String::as_str)
    }

    /// Every kind whose resource is known, as (group, kind, plural), in
    /// order of group and kind.
    pub fn resources(&self) -> impl Iterator<Item = (&str, &str, &str)> {
        self.plurals
            .iter()
            .map(|((group, kind), plural)| (group.as_str(), kind.as_str(), plural.as_str()))
    }

    /// Whether every kind of `group` is known (it came from a discovery
    /// listing): a kind of it that is not known is not served.
    pub fn lists_group(&self, group: &str) -> bool {
        self.listed.contains(group)
    }

    /// Where `object` is admitted when `default_namespace` is the namespace
    /// of objects that name none.
    pub fn place<'a>(&self, object: &'a Value, default_namespace: &'a str) -> Placement<'a> {
        let gvk = Gvk::of(object);
        if gvk.is_namespace() {
            return Placement::Cluster;
        }
        let declared = object
            .get("metadata")
            .and_then(|m| m.get("namespace"))
            .and_then(Value::as_str)
            .filter(|ns| !ns.is_empty());
        match (self.namespaced(&gvk.group, &gvk.kind), declared) {
            (Some(false), _) => Placement::Cluster,
            (_, Some(namespace)) => Placement::Declared(namespace),
            (Some(true), None) => Placement::Assumed(default_namespace),
            (None, None) => Placement::Unknown,
        }
    }
}

// === impl Placement ===

impl<'a> Placement<'a> {
    /// The namespace it is admitted in; `None` when cluster-scoped.
    pub fn namespace(self) -> Option<&'a str> {
        match self {
            Placement::Declared(namespace) | Placement::Assumed(namespace) => Some(namespace),
            Placement::Cluster | Placement::Unknown => None,
        }
    }
}

impl fmt::Display for Placement<'_> {
    /// What `--explain` says of it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Placement::Cluster => f.write_str("cluster-scoped"),
            Placement::Declared(namespace) => write!(f, "in namespace {namespace}"),
            Placement::Assumed(namespace) => write!(
                f,
                "in namespace {namespace} (assumed: namespaced kind without metadata.namespace; -n sets it)"
            ),
            Placement::Unknown => f.write_str(
                "cluster-scoped (assumed: kind of unknown scope without metadata.namespace; give its CRD or --api-resources)",
            ),
        }
    }
}

// === impl ApiResource ===

impl ApiResource {
    /// Reads the output of `kubectl api-resources` (with or without
    /// `-o wide`): a header line, then one row per resource; columns are
    /// found under their header's first character, as kubectl aligns them.
    ///
    /// # Errors
    /// An [`ApiResourcesError`] naming the line.
    pub fn parse(text: &str) -> Result<Vec<ApiResource>, ApiResourcesError> {
        let mut lines = text
            .lines()
            .enumerate()
            .filter(|(_, line)| !line.trim().is_empty());
        let Some((header_at, header)) = lines.next() else {
            return Ok(Vec::new());
        };
        let starts = header_columns(header);
        let column = |name: &str| starts.iter().position(|(n, _)| *n == name);
        let name = column("NAME");
        let (Some(api_version), Some(namespaced), Some(kind)) =
            (column("APIVERSION"), column("NAMESPACED"), column("KIND"))
        else {
            return Err(ApiResourcesError::Header {
                line: header_at + 1,
            });
        };
        let mut resources = Vec::new();
        for (at, line) in lines {
            let line_number = at + 1;
            let cell = |index: usize, column: &'static str| -> Result<&str, ApiResourcesError> {
                let start = starts.get(index).map_or(0, |(_, s)| *s);
                let end = starts.get(index + 1).map_or(line.len(), |(_, s)| *s);
                line.get(start..end.min(line.len()))
                    .map(str::trim)
                    .filter(|cell| !cell.is_empty())
                    .ok_or(ApiResourcesError::Missing {
                        line: line_number,
                        column,
                    })
            };
            let version = cell(api_version, "APIVERSION")?;
            let group = version.rsplit_once('/').map_or("", |(group, _)| group);
            let namespaced = match cell(namespaced, "NAMESPACED")? {
                "true" => true,
                "false" => false,
                other => {
                    return Err(ApiResourcesError::Namespaced {
                        line: line_number,
                        value: other.to_string(),
                    });
                }
            };
            resources.push(ApiResource {
                group: group.to_string(),
                kind: cell(kind, "KIND")?.to_string(),
                namespaced,
                plural: match name {
                    Some(name) => Some(cell(name, "NAME")?.to_string()),
                    None => None,
                },
            });
        }
        Ok(resources)
    }

    /// The kind `crd` defines, when it is a CustomResourceDefinition
    /// (`apiextensions.k8s.io`); `None` for any other object.
    ///
    /// # Errors
    /// A [`CrdError`] for a CRD without `spec.group`, `spec.names.kind` or a
    /// `spec.scope` of `Namespaced` or `Cluster` (the API server refuses it).
    pub fn of_crd(crd: &Value) -> Result<Option<ApiResource>, CrdError> {
        let gvk = Gvk::of(crd);
        if gvk.group != "apiextensions.k8s.io" || gvk.kind != "CustomResourceDefinition" {
            return Ok(None);
        }
        let text = |pointer: &str| crd.pointer(pointer).and_then(Value::as_str);
        let error = |reason: String| CrdError {
            name: text("/metadata/name").unwrap_or_default().to_string(),
            reason,
        };
        let group = text("/spec/group").ok_or_else(|| error("no spec.group".to_string()))?;
        let kind =
            text("/spec/names/kind").ok_or_else(|| error("no spec.names.kind".to_string()))?;
        let namespaced = match text("/spec/scope") {
            Some("Namespaced") => true,
            Some("Cluster") => false,
            Some(other) => {
                return Err(error(format!(
                    "spec.scope is {other:?}, expected \"Namespaced\" or \"Cluster\""
                )));
            }
            None => return Err(error("no spec.scope".to_string())),
        };
        Ok(Some(ApiResource {
            group: group.to_string(),
            kind: kind.to_string(),
            namespaced,
            plural: text("/spec/names/plural").map(str::to_string),
        }))
    }
}

/// Each header word and the byte offset it starts at.
fn header_columns(header: &str) -> Vec<(&str, usize)> {
    let mut columns = Vec::new();
    let mut start = None;
    for (at, c) in header.char_indices().chain([(header.len(), ' ')]) {
        match (c.is_whitespace(), start) {
            (false, None) => start = Some(at),
            (true, Some(from)) => {
                columns.push((header.get(from..at).unwrap_or_default(), from));
                start = None;
            }
            _ => {}
        }
    }
    columns
}

#[cfg(test)]
mod tests;
