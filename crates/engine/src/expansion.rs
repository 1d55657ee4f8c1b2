//! Expansion, as Gatekeeper's `pkg/expansion` does it: a workload (a
//! Deployment) generates the resource its controller would create (a Pod),
//! built from one of its fields, so mutators can be previewed on it.
//!
//! A generated resource is the object at the template's `templateSource` (a
//! copy: labels, annotations and all), with `apiVersion` and `kind` set to
//! `generatedGVK`, the parent's namespace, the name `PARENT-KIND` in lower
//! case, and an owner reference to the parent (apiVersion, kind, name; no
//! uid). Generated resources are expanded again (a CronJob's Job generates
//! its Pod), up to `MAX_DEPTH - 1` levels. Templates whose kinds form a cycle
//! are refused.

use std::collections::{BTreeMap, BTreeSet};

use sartor_api::ExpansionTemplate;
use serde_json::{Map, Value, json};

use crate::request::Gvk;

/// Gatekeeper's recursion limit: an object this many generations below the
/// one expanded is an error, so at most `MAX_DEPTH - 1` levels are generated.
pub const MAX_DEPTH: usize = 30;

/// A compiled expansion template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    name: String,
    kinds: BTreeSet<Gvk>,
    source: Vec<String>,
    generated: Gvk,
}

/// Templates ready to expand objects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expander {
    /// In name order, which is the order of the resources they generate.
    templates: Vec<Template>,
}

/// One generated resource, with what the caller's mutation gave for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Generated<M> {
    /// The template that generated it.
    pub template: String,
    /// 1 for the parent's own resources, 2 for theirs, ...
    pub depth: usize,
    /// The resource as generated, before the caller mutated it.
    pub original: Value,
    /// The resource after the caller's mutation.
    pub object: Value,
    /// What the caller's mutation returned.
    pub outcome: M,
}

/// Templates that cannot be used together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplatesError {
    /// Each template generates a kind the next one expands, back to the first.
    #[error("expansion templates {} form a cycle: each generates a kind another expands", .0.join(", "))]
    Cycle(Vec<String>),
}

/// An object that cannot be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    /// The parent has nothing at the template's source.
    #[error("expansion template {template}: {object} has no {field}")]
    NoSource {
        /// The template.
        template: String,
        /// The parent, as `Kind name`.
        object: String,
        /// The template's `templateSource`.
        field: String,
    },
    /// The template's source is not an object.
    #[error("expansion template {template}: {field} of {object} is not an object")]
    SourceNotObject {
        /// The template.
        template: String,
        /// The parent, as `Kind name`.
        object: String,
        /// The template's `templateSource`.
        field: String,
    },
    /// Generated resources kept generating more.
    #[error("expansion of {object} reaches {MAX_DEPTH} levels")]
    TooDeep {
        /// The object at the top.
        object: String,
    },
}

/// Why [`Expander::expand`] stopped: expansion itself, or the caller's mutation.
#[derive(Debug, Clone, PartialEq)]
pub enum ExpandFailure<E> {
    /// An object could not be expanded.
    Expand(ExpandError),
    /// The caller's mutation of a generated resource failed.
    Mutate(E),
}

// === impl Template ===

impl Template {
    /// Compiles a template the loader checked (`parse_expansion_template`).
    pub fn compile(template: &ExpansionTemplate) -> Template {
        let spec = &template.spec;
        let mut kinds = BTreeSet::new();
        for entry in &spec.apply_to {
            for group in &entry.groups {
                for version in &entry.versions {
                    for kind in &entry.kinds {
                        kinds.insert(Gvk::new(group, version, kind));
                    }
                }
            }
        }
        let generated = &spec.generated_gvk;
        Template {
            name: template.metadata.name.clone().unwrap_or_default(),
            kinds,
            source: spec
                .template_source
                .split('.')
                .map(str::to_string)
                .collect(),
            generated: Gvk::new(&generated.group, &generated.version, &generated.kind),
        }
    }

    /// The templates sartor applies unless told not to: the workload kinds
    /// with a Pod template generate a Pod (`spec.template`, as Gatekeeper's
    /// documented `expand-deployments`), and a CronJob its Job
    /// (`spec.jobTemplate`, as Gatekeeper's own CronJob test template; its
    /// documentation has none).
    pub fn builtin() -> Vec<Template> {
        let gvks = |list: &[(&str, &str, &str)]| {
            list.iter()
                .map(|(g, v, k)| Gvk::new(g, v, k))
                .collect::<BTreeSet<_>>()
        };
        vec![
            Template {
                name: "sartor-builtin-cronjobs".to_string(),
                kinds: gvks(&[("batch", "v1", "CronJob")]),
                source: vec!["spec".to_string(), "jobTemplate".to_string()],
                generated: Gvk::new("batch", "v1", "Job"),
            },
            Template {
                name: "sartor-builtin-workloads".to_string(),
                kinds: gvks(&[
                    ("apps", "v1", "DaemonSet"),
                    ("apps", "v1", "Deployment"),
                    ("apps", "v1", "ReplicaSet"),
                    ("apps", "v1", "StatefulSet"),
                    ("batch", "v1", "Job"),
                    ("", "v1", "ReplicationController"),
                ]),
                source: vec!["spec".to_string(), "template".to_string()],
                generated: Gvk::new("", "v1", "Pod"),
            },
        ]
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

// === impl Expander ===

impl Expander {
    /// An expander of `templates`.
    ///
    /// # Errors
    /// [`TemplatesError::Cycle`] when templates generate each other's kinds in
    /// a cycle (Gatekeeper refuses them too).
    pub fn new(mut templates: Vec<Template>) -> Result<Expander, TemplatesError> {
        templates.sort_by(|a, b| a.name.cmp(&b.name));
        if let Some(cycle) = cycle(&templates) {
            return Err(TemplatesError::Cycle(cycle));
        }
        Ok(Expander { templates })
    }

    /// `templates` and the built-in ones, each built-in applying only to the
    /// kinds no template of `templates` expands (yours win, kind by kind).
    ///
    /// # Errors
    /// As [`Expander::new`].
    pub fn with_builtins(templates: Vec<Template>) -> Result<Expander, TemplatesError> {
        let covered: BTreeSet<Gvk> = templates
            .iter()
            .flat_map(|t| t.kinds.iter().cloned())
            .collect();
        let mut all = templates;
        for mut builtin in Template::builtin() {
            builtin.kinds.retain(|gvk| !covered.contains(gvk));
            if !builtin.kinds.is_empty() {
                all.push(builtin);
            }
        }
        Expander::new(all)
    }

    /// Whether no template would expand anything.
    pub fn is_empty(&self) -> bool {
        self.templates.is_empty()
    }

    /// Everything `parent` generates, in order: each resource its templates
    /// generate (in template-name order), mutated by `mutate` and followed by
    /// what it generates in turn. `namespace` is the parent's namespace
    /// (`None` for a cluster-scoped parent, which passes on its own
    /// `metadata.namespace`, if any).
    ///
    /// # Errors
    /// The first object that cannot be expanded, or the first failure of
    /// `mutate`.
    pub fn expand<M, E>(
        &self,
        parent: &Value,
        namespace: Option<&str>,
        mutate: &mut dyn FnMut(&mut Value) -> Result<M, E>,
    ) -> Result<Vec<Generated<M>>, ExpandFailure<E>> {
        let mut out = Vec::new();
        self.expand_into(parent, namespace, 0, parent, mutate, &mut out)?;
        Ok(out)
    }

    fn expand_into<M, E>(
        &self,
        parent: &Value,
        namespace: Option<&str>,
        depth: usize,
        top: &Value,
        mutate: &mut dyn FnMut(&mut Value) -> Result<M, E>,
        out: &mut Vec<Generated<M>>,
    ) -> Result<(), ExpandFailure<E>> {
        // As Gatekeeper: an object at depth 30 is an error before its
        // templates are looked at, so 29 generated levels at most.
        if depth >= MAX_DEPTH {
            return Err(ExpandFailure::Expand(ExpandError::TooDeep {
                object: describe(top),
            }));
        }
        let gvk = Gvk::of(parent);
        let templates: Vec<&Template> = self
            .templates
            .iter()
            .filter(|t| t.kinds.contains(&gvk))
            .collect();
        for template in templates {
            let original = generate(template, parent, namespace).map_err(ExpandFailure::Expand)?;
            let mut object = original.clone();
            let outcome = mutate(&mut object).map_err(ExpandFailure::Mutate)?;
            let index = out.len();
            out.push(Generated {
                template: template.name.clone(),
                depth: depth + 1,
                original,
                object,
                outcome,
            });
            let generated = out.get(index).map(|g| g.object.clone()).unwrap_or_default();
            self.expand_into(&generated, namespace, depth + 1, top, mutate, out)?;
        }
        Ok(())
    }
}

/// The resource `template` generates from `parent`.
fn generate(
    template: &Template,
    parent: &Value,
    namespace: Option<&str>,
) -> Result<Value, ExpandError> {
    let source = || template.source.join(".");
    let mut at = Some(parent);
    for field in &template.source {
        at = at.and_then(|value| value.get(field));
    }
    let content = match at {
        Some(Value::Object(content)) => content.clone(),
        Some(_) => {
            return Err(ExpandError::SourceNotObject {
                template: template.name.clone(),
                object: describe(parent),
                field: source(),
            });
        }
        None => {
            return Err(ExpandError::NoSource {
                template: template.name.clone(),
                object: describe(parent),
                field: source(),
            });
        }
    };
    let generated = &template.generated;
    let mut resource = content;
    resource.insert("apiVersion".to_string(), json!(generated.api_version()));
    resource.insert("kind".to_string(), json!(generated.kind));
    let metadata = resource
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !metadata.is_object() {
        *metadata = Value::Object(Map::new());
    }
    if let Value::Object(metadata) = metadata {
        let parent_metadata = parent.get("metadata");
        let field = |name: &str| {
            parent_metadata
                .and_then(|m| m.get(name))
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        match namespace.or(Some(field("namespace")).filter(|ns| !ns.is_empty())) {
            Some(namespace) => {
                metadata.insert("namespace".to_string(), json!(namespace));
            }
            None => {
                metadata.remove("namespace");
            }
        }
        let parent_name = field("name");
        metadata.insert(
            "name".to_string(),
            json!(format!("{parent_name}-{}", generated.kind).to_lowercase()),
        );
        let owner = json!({
            "apiVersion": parent.get("apiVersion").and_then(Value::as_str).unwrap_or_default(),
            "kind": parent.get("kind").and_then(Value::as_str).unwrap_or_default(),
            "name": parent_name,
        });
        let complete = owner.as_object().is_some_and(|o| {
            o.values()
                .all(|v| v.as_str().is_some_and(|s| !s.is_empty()))
        });
        if complete {
            let owners = metadata
                .entry("ownerReferences")
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(owners) = owners {
                let present = owners.iter().any(|o| {
                    ["apiVersion", "kind", "name"]
                        .iter()
                        .all(|k| o.get(*k) == owner.get(*k))
                });
                if !present {
                    owners.push(owner);
                }
            }
        }
    }
    Ok(Value::Object(resource))
}

/// `Kind name` of an object, for messages.
fn describe(object: &Value) -> String {
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("object");
    let name = object
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    format!("{kind} {name}").trim_end().to_string()
}

/// The names of templates that generate each other's kinds in a cycle, if
/// any (sorted): a template generating kind K leads to every template that
/// expands K.
fn cycle(templates: &[Template]) -> Option<Vec<String>> {
    let next: BTreeMap<usize, Vec<usize>> = templates
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let targets = templates
                .iter()
                .enumerate()
                .filter(|(_, other)| other.kinds.contains(&t.generated))
                .map(|(j, _)| j)
                .collect();
            (i, targets)
        })
        .collect();
    // Depth-first search with colours: 1 on the stack, 2 done.
    let mut colour = vec![0u8; templates.len()];
    let mut stack: Vec<usize> = Vec::new();
    fn visit(
        node: usize,
        next: &BTreeMap<usize, Vec<usize>>,
        colour: &mut [u8],
        stack: &mut Vec<usize>,
    ) -> Option<Vec<usize>> {
        if let Some(c) = colour.get_mut(node) {
            *c = 1;
        }
        stack.push(node);
        for &target in next.get(&node).into_iter().flatten() {
            match colour.get(target) {
                Some(1) => {
                    let from = stack.iter().position(|&n| n == target).unwrap_or(0);
                    return Some(stack.get(from..).unwrap_or_default().to_vec());
                }
                Some(0) => {
                    if let Some(found) = visit(target, next, colour, stack) {
                        return Some(found);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        if let Some(c) = colour.get_mut(node) {
            *c = 2;
        }
        None
    }
    for start in 0..templates.len() {
        if colour.get(start) == Some(&0)
            && let Some(found) = visit(start, &next, &mut colour, &mut stack)
        {
            let mut names: Vec<String> = found
                .iter()
                .filter_map(|&i| templates.get(i).map(|t| t.name.clone()))
                .collect();
            names.sort();
            return Some(names);
        }
    }
    None
}
