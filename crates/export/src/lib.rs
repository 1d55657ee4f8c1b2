//! sartor's mutators as Kubernetes MutatingAdmissionPolicies
//! (`admissionregistration.k8s.io/v1`, GA in 1.36): mutation inside
//! kube-apiserver, with no webhook to run. The part of a set that can be
//! written in CEL with exactly sartor's semantics is exported as one policy
//! and its binding; every other mutator is refused with the reason.
//!
//! ```text
//!  System (sartor's order) + each mutator's spec
//!    ──each mutator──▶ exportable? (kind, constant value, location of fields,
//!                      built-in kinds, no value conditions) ──no──▶ Refusal
//!    ──▶ a guard (applyTo, match, pathTests as CEL) and a JSON patch (parents
//!        created as the engine creates them)
//!    ──▶ two runs must do: a mutator sartor may apply in a third pass is refused
//!    ──▶ MutatingAdmissionPolicy (mutations in sartor's order, the install's
//!        exclusions, failurePolicy) + MutatingAdmissionPolicyBinding
//! ```
//!
//! One policy, not one per mutator: mutations inside a policy run in order,
//! each on the object the one before left, as sartor's do; policies have no
//! order between them.

mod cel;
pub mod limits;
mod passes;
mod patch;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

use sartor_api::{
    ADMISSION_CONFIGURATION_KINDS, ADMISSION_REGISTRATION_GROUP, ApplyTo, EXEMPTION_LABEL,
    GATEKEEPER_PROTECTED_GROUPS, Match, MutatorObject, OperationPattern, PathTest, SARTOR_DOMAIN,
    Scope, SetOperation, SourcePattern, Wildcard, protected,
};
use sartor_engine::{ImageParts, MutatorId, Scopes, System, json_equal};
use sartor_location::{Condition, Node, Path};
use serde_json::{Value, json};

use crate::patch::Leaf;

/// How the policies are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The policy's and the binding's name.
    pub name: String,
    /// sartor's namespace: left out, as the install's webhook leaves it out.
    pub sartor_namespace: String,
    /// Namespaces left out (names or globs), as `sartor serve
    /// --exclude-namespace` leaves them out.
    pub excluded_namespaces: Vec<Wildcard>,
    /// What the API server does when a mutation fails.
    pub failure_policy: FailurePolicy,
    /// The kinds the cluster serves and their resources (plurals): the
    /// built-in ones, and those of `--api-resources` and CRDs given.
    pub resources: Scopes,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            name: "sartor".to_string(),
            sartor_namespace: "sartor-system".to_string(),
            excluded_namespaces: Wildcard::new("kube-system").into_iter().collect(),
            failure_policy: FailurePolicy::Ignore,
            resources: Scopes::builtin().clone(),
        }
    }
}

/// The policy's `failurePolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    /// The object is admitted unmutated, as with sartor's webhook.
    Ignore,
    /// The request is refused.
    Fail,
}

impl FailurePolicy {
    /// As the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            FailurePolicy::Ignore => "Ignore",
            FailurePolicy::Fail => "Fail",
        }
    }
}

/// What an export produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Export {
    /// The policy and its binding, ready for `kubectl apply`; empty when no
    /// mutator exports.
    pub objects: Vec<Value>,
    /// The mutators in the policy, in order.
    pub exported: Vec<MutatorId>,
    /// Each mutator left out, and why, in sartor's order.
    pub refused: Vec<Refusal>,
}

/// A mutator not exported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Which.
    pub mutator: MutatorId,
    /// Why.
    pub reason: Reason,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: not exported: {}", named(&self.mutator), self.reason)
    }
}

/// `Kind/name`, as OpenReports and kubectl name a mutator.
pub fn named(id: &MutatorId) -> String {
    format!("{}/{}", id.kind, id.name)
}

/// Why a mutator cannot be exported exactly.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Reason {
    /// sartor does not enforce it.
    #[error("it is in conflict with another mutator, so sartor does not enforce it")]
    Conflicted,
    /// Its value comes from where the policy cannot get it.
    #[error("its value comes from {0}, which is not exported")]
    NotConstant(&'static str),
    /// Its location (or a pathTest's) cannot be read as fields.
    #[error("{0} selects list elements, which only an Assign's location may do yet")]
    ListInLocation(String),
    /// A pathTest on elements a glob selects.
    #[error("its pathTest {0} tests elements a glob or notin selects, which is not exported yet")]
    GlobPathTest(String),
    /// A glob below a keyed element the mutation may have to create.
    #[error(
        "its location has a glob below a keyed element it may create, which is not exported yet"
    )]
    GlobBelowKeyed,
    /// A glob as the last node.
    #[error("its location ends at a glob (every element replaced), which is not exported yet")]
    GlobElement,
    /// An integer CEL would write as a string.
    #[error(
        "its value holds the integer {0}, past 2^53 - 1, which the API server writes as a string (CEL gives such integers to JSON as strings)"
    )]
    UnsafeInteger(String),
    /// An AssignImage that may change its own result again.
    #[error(
        "it assigns only a path without a `/`, which may change the image again on the next pass (sartor may apply it three times, the API server runs a policy at most twice)"
    )]
    ImagePathAlone,
    /// sartor's `notin` selector with numbers.
    #[error("its location has a notin selector of numbers, which is not exported yet")]
    NotIn,
    /// sartor's value conditions.
    #[error("its value conditions (parameters.conditions) are not exported yet")]
    Conditions,
    /// It only matches objects that never reach admission.
    #[error(
        "it matches only generated objects (match.source: Generated), which never reach admission"
    )]
    GeneratedOnly,
    /// A kind whose resource the export was not told.
    #[error(
        "it applies to {0}, whose resource (plural) is not known offline: give its CRD or --api-resources"
    )]
    UnknownKind(String),
    /// Nothing to apply to.
    #[error("it names no kind a cluster serves")]
    NoKinds,
    /// Its expression is longer than the API server takes.
    #[error(
        "its expression would be {0} characters long, and the API server takes at most {max}",
        max = limits::MAX_CODE_POINTS
    )]
    ExpressionTooLong(usize),
    /// Its expression nests deeper than the API server's CEL parser goes.
    #[error(
        "its expression would nest {0} levels deep, and the API server's CEL parser stops at {max}",
        max = limits::MAX_NESTING
    )]
    ExpressionTooDeep(usize),
    /// The policy would be larger than the API server stores.
    #[error(
        "with it the policy would take {0} bytes, past the {max} an exported policy may take (etcd stores at most 1.5 MiB)",
        max = limits::MAX_POLICY_BYTES
    )]
    PolicyTooLarge(usize),
    /// It would need more passes than the API server runs.
    #[error(
        "it reads {path}, which {writer} writes after it: sartor may apply it in pass {passes}, and the API server runs a policy at most twice (once more when the first run changed the object)"
    )]
    TooManyPasses {
        /// What it reads.
        path: String,
        /// The mutator whose write it waits for, `Kind/name`.
        writer: String,
        /// The pass sartor may apply it in.
        passes: usize,
    },
}

/// One mutator written as a mutation of the policy.
#[derive(Debug, Clone, PartialEq)]
struct Mutation {
    id: MutatorId,
    /// The resources (group, version, plural) and operations it needs.
    rules: BTreeSet<Rule>,
    /// The JSONPatch expression: the patch when the guard holds, else none.
    expression: String,
    /// What it writes.
    writes: Vec<passes::Write>,
    /// What its decision reads.
    reads: Vec<passes::Read>,
    /// The kinds (group, kind) it can apply to; `None`: any kind.
    kinds: Option<BTreeSet<(String, String)>>,
    /// A ModifySet's operation and values.
    set: Option<(SetOperation, Vec<Value>)>,
}

impl Mutation {
    /// Whether `self`, reading its own list, may need to run again after
    /// `writer` writes it at `write`: not when both are ModifySets whose
    /// values the other does not undo (merges only add, prunes only
    /// remove; a merge and a prune commute unless they share a value).
    fn rereads(&self, read: &passes::Read, writer: &Mutation, write: &passes::Write) -> bool {
        let own = self.writes.iter().any(|mine| mine.path == read.path);
        match (&self.set, &writer.set) {
            (Some((merges, values)), Some((other_merges, others)))
                if own && write.path.len() == read.path.len() =>
            {
                merges != other_merges
                    && values
                        .iter()
                        .any(|value| others.iter().any(|other| json_equal(value, other)))
            }
            _ => true,
        }
    }
}

/// One `resourceRules` entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Rule {
    group: String,
    version: String,
    resource: String,
    operations: Vec<&'static str>,
    /// The kind the resource serves; `None` for `*`.
    kind: Option<String>,
}

/// Exports the mutators of `system` that can be written exactly as one
/// MutatingAdmissionPolicy; `specs` holds each one's spec, by id.
pub fn map(
    system: &System,
    specs: &HashMap<MutatorId, MutatorObject>,
    options: &Options,
) -> Export {
    let mut refused = Vec::new();
    let mut mutations = Vec::new();
    for mutator in system.mutators() {
        let id = mutator.id();
        let translated = if system.is_conflicted(id) {
            Err(Reason::Conflicted)
        } else {
            match specs.get(id) {
                Some(spec) => translate(id, spec, &options.resources),
                None => continue,
            }
        };
        match translated {
            Ok(mutation) => mutations.push(mutation),
            Err(reason) => refused.push(Refusal {
                mutator: id.clone(),
                reason,
            }),
        }
    }
    // Two passes must do: refuse, first in order first, each mutator sartor
    // may apply in a third pass, until none is left.
    while let Some((index, reason)) = too_many_passes(&mutations) {
        let mutation = mutations.remove(index);
        refused.push(Refusal {
            mutator: mutation.id,
            reason,
        });
    }
    let order: HashMap<&MutatorId, usize> = system
        .mutators()
        .enumerate()
        .map(|(index, mutator)| (mutator.id(), index))
        .collect();
    // The policy must fit in etcd: the last mutators in order are left out
    // until it does (leaving one out only shortens the chains the pass check
    // allowed).
    let mut objects = Vec::new();
    while !mutations.is_empty() {
        objects = policy(&mutations, options);
        let bytes = objects.first().map_or(0, |policy| policy.to_string().len());
        if bytes <= limits::MAX_POLICY_BYTES {
            break;
        }
        if let Some(last) = mutations.pop() {
            refused.push(Refusal {
                mutator: last.id,
                reason: Reason::PolicyTooLarge(bytes),
            });
        }
        objects = Vec::new();
    }
    refused.sort_by_key(|refusal| order.get(&refusal.mutator).copied());
    let exported: Vec<MutatorId> = mutations.iter().map(|m| m.id.clone()).collect();
    Export {
        objects,
        exported,
        refused,
    }
}

/// The passes the API server runs a policy: once, and once more when the
/// first run changed the object (`reinvocationPolicy: IfNeeded`; a policy is
/// run again after its own change, as the cluster suite checks).
const PASSES: usize = 2;

/// The first mutation sartor may apply in a pass after [`PASSES`], and why.
///
/// A mutation whose decision reads what another writes may first apply in
/// the pass that write happens in, when the writer comes before it, or in
/// the pass after, when the writer comes after it.
fn too_many_passes(mutations: &[Mutation]) -> Option<(usize, Reason)> {
    // (reader, writer, what the reader reads)
    let mut edges = Vec::new();
    for (reader_at, reader) in mutations.iter().enumerate() {
        for (writer_at, writer) in mutations.iter().enumerate() {
            let common_kind = match (&reader.kinds, &writer.kinds) {
                (Some(a), Some(b)) => !a.is_disjoint(b),
                _ => true,
            };
            if reader_at == writer_at || !common_kind {
                continue;
            }
            let read = reader.reads.iter().find(|read| {
                writer.writes.iter().any(|write| {
                    passes::overlaps(read, write) && reader.rereads(read, writer, write)
                })
            });
            if let Some(read) = read {
                edges.push((reader_at, writer_at, passes::Shown(&read.path).to_string()));
            }
        }
    }
    let mut pass = vec![1usize; mutations.len()];
    let mut why: Vec<Option<(String, usize)>> = vec![None; mutations.len()];
    // Each round lengthens the longest chain by one; a cycle grows past
    // PASSES, where the loop stops.
    for _ in 0..=mutations.len() {
        let mut changed = false;
        for (reader, writer, path) in &edges {
            let written = pass.get(*writer).copied().unwrap_or(1);
            let needed = if writer > reader {
                written + 1
            } else {
                written
            };
            if let (Some(at), Some(reason)) = (pass.get_mut(*reader), why.get_mut(*reader))
                && needed > *at
            {
                *at = needed;
                *reason = Some((path.clone(), *writer));
                changed = true;
            }
        }
        if !changed || pass.iter().any(|p| *p > PASSES) {
            break;
        }
    }
    let (index, passes) = pass.iter().enumerate().find(|(_, p)| **p > PASSES)?;
    let (path, writer) = why.get(index).cloned().flatten()?;
    let writer = named(&mutations.get(writer)?.id);
    Some((
        index,
        Reason::TooManyPasses {
            path,
            writer,
            passes: *passes,
        },
    ))
}

/// One mutator as a mutation, or why it cannot be one.
fn translate(id: &MutatorId, spec: &MutatorObject, resources: &Scopes) -> Result<Mutation, Reason> {
    if !spec.conditions().is_empty() {
        return Err(Reason::Conditions);
    }
    let (criteria, location) = match spec {
        MutatorObject::Assign(assign) => (&assign.spec.r#match, &assign.spec.location),
        MutatorObject::AssignMetadata(meta) => (&meta.spec.r#match, &meta.spec.location),
        MutatorObject::AssignImage(image) => (&image.spec.r#match, &image.spec.location),
        MutatorObject::ModifySet(set) => (&set.spec.r#match, &set.spec.location),
    };
    if criteria.source == Some(SourcePattern::Generated) {
        return Err(Reason::GeneratedOnly);
    }
    let path = Path::parse(location).map_err(|_| Reason::ListInLocation(location.to_string()))?;
    let written = passes::segments(&path);
    let mut removes = false;
    let mut reads = match_reads(criteria);
    reads.extend(passes::selector_reads(&written));
    let (rules, applies, patches) = match spec {
        MutatorObject::Assign(assign) => {
            let source = source(&assign.spec.parameters.assign)?;
            let (rules, applies) = apply_to(&assign.spec.apply_to, resources)?;
            let tests = path_tests(&assign.spec.parameters.path_tests, &mut reads)?;
            let applies = std::iter::once(applies).chain(tests).collect::<Vec<_>>();
            let (patches, when) = match source {
                Source::Set { value, when } => {
                    (patch::assign(path.nodes(), &Leaf::Value(value))?, when)
                }
                Source::Remove => {
                    removes = true;
                    (patch::remove(path.nodes())?, None)
                }
            };
            let applies = applies.into_iter().chain(when).collect::<Vec<_>>();
            (rules, applies.join(" && "), patches)
        }
        MutatorObject::AssignImage(image) => {
            let parameters = &image.spec.parameters;
            let parts = ImageParts {
                domain: parameters.assign_domain.clone(),
                path: parameters.assign_path.clone(),
                tag: parameters.assign_tag.clone(),
            };
            if !parts.idempotent() {
                return Err(Reason::ImagePathAlone);
            }
            let (rules, applies) = apply_to(&image.spec.apply_to, resources)?;
            let tests = path_tests(&parameters.path_tests, &mut reads)?;
            // The new image is made of the one there.
            reads.push(passes::Read {
                path: written.clone(),
                existence: false,
            });
            let applies = std::iter::once(applies).chain(tests).collect::<Vec<_>>();
            let patches = patch::assign(path.nodes(), &Leaf::Image(parts))?;
            (rules, applies.join(" && "), patches)
        }
        MutatorObject::ModifySet(set) => {
            let parameters = &set.spec.parameters;
            let (rules, applies) = apply_to(&set.spec.apply_to, resources)?;
            let tests = path_tests(&parameters.path_tests, &mut reads)?;
            // Merge and prune both depend on the list there.
            reads.push(passes::Read {
                path: written.clone(),
                existence: false,
            });
            let values = parameters.values.from_list.clone();
            values.iter().try_for_each(json_safe)?;
            let leaf = match parameters.operation {
                SetOperation::Merge => Leaf::Merge(values),
                SetOperation::Prune => Leaf::Prune(values),
            };
            let applies = std::iter::once(applies).chain(tests).collect::<Vec<_>>();
            let patches = patch::assign(path.nodes(), &leaf)?;
            (rules, applies.join(" && "), patches)
        }
        MutatorObject::AssignMetadata(meta) => {
            let Source::Set { value, when } = source(&meta.spec.parameters.assign)? else {
                return Err(Reason::NotConstant("remove"));
            };
            let rules = kinds_rules(criteria, resources)?;
            let names = field_names(location)?;
            let applies = when.unwrap_or_else(|| "true".to_string());
            (rules, applies, metadata_patch(&names, &value))
        }
    };
    let guard = [applies, criteria_guard(criteria)]
        .into_iter()
        .filter(|part| part != "true")
        .collect::<Vec<_>>();
    let expression = match guard.as_slice() {
        [] => patches,
        [only] if cel::is_grouped(only) => format!("{only} ? {patches} : []"),
        _ => format!("({}) ? {patches} : []", guard.join(" && ")),
    };
    limits::check(&expression).map_err(|excess| match excess {
        limits::Excess::Length(length) => Reason::ExpressionTooLong(length),
        limits::Excess::Nesting(depth) => Reason::ExpressionTooDeep(depth),
    })?;
    let kinds = rules
        .iter()
        .map(|rule| rule.kind.clone().map(|kind| (rule.group.clone(), kind)))
        .collect::<Option<BTreeSet<_>>>();
    Ok(Mutation {
        id: id.clone(),
        rules,
        expression,
        writes: vec![passes::Write {
            path: written,
            removes,
        }],
        reads,
        kinds,
        set: match spec {
            MutatorObject::ModifySet(set) => Some((
                set.spec.parameters.operation,
                set.spec.parameters.values.from_list.clone(),
            )),
            _ => None,
        },
    })
}

/// `pathTests` as CEL conditions, each adding what it reads to `reads`.
fn path_tests(tests: &[PathTest], reads: &mut Vec<passes::Read>) -> Result<Vec<String>, Reason> {
    let mut conditions = Vec::new();
    for test in tests {
        let refused = || Reason::GlobPathTest(test.sub_path.clone());
        let sub = Path::parse(&test.sub_path).map_err(|_| refused())?;
        let present = patch::present(sub.nodes()).ok_or_else(refused)?;
        conditions.push(match test.condition {
            Condition::MustExist => format!("({present})"),
            Condition::MustNotExist => format!("!({present})"),
        });
        reads.push(passes::Read {
            path: passes::segments(&sub),
            existence: true,
        });
    }
    Ok(conditions)
}

/// The field names of `location`, or why it is not only fields.
fn field_names(location: &str) -> Result<Vec<String>, Reason> {
    // The loader parsed every location already: an error here is a list.
    let path = Path::parse(location).map_err(|_| Reason::ListInLocation(location.to_string()))?;
    path.nodes()
        .iter()
        .map(|node| match node {
            Node::Field(name) => Ok(name.clone()),
            Node::List(_) => Err(Reason::ListInLocation(location.to_string())),
        })
        .collect()
}

/// Where a mutator's value comes from, in CEL.
enum Source {
    /// This value, when `when` holds (a Namespace's label may be missing).
    Set {
        value: cel::Literal,
        when: Option<String>,
    },
    /// `remove: true`.
    Remove,
}

/// The source of `assign`'s value, as the engine reads it.
fn source(assign: &sartor_api::AssignField) -> Result<Source, Reason> {
    use sartor_api::MetadataField;
    let set = |value: cel::Literal| Ok(Source::Set { value, when: None });
    if assign.external_data.is_some() {
        return Err(Reason::NotConstant(
            "externalData (the API server cannot ask a provider)",
        ));
    }
    if assign.remove == Some(true) {
        return Ok(Source::Remove);
    }
    if let Some(from) = &assign.from_metadata {
        // "" for an object without a name yet or outside a namespace, as
        // Gatekeeper gives.
        return set(cel::Literal::Expression(match from.field {
            MetadataField::Name => {
                r#"(has(object.metadata.name) ? object.metadata.name : "")"#.to_string()
            }
            MetadataField::Namespace => "request.namespace".to_string(),
        }));
    }
    if let Some(from) = &assign.from_namespace {
        let (map, key) = match (&from.label, &from.annotation) {
            (Some(label), _) => ("labels", label),
            (None, Some(annotation)) => ("annotations", annotation),
            (None, None) => return Err(Reason::NotConstant("fromNamespace without a key")),
        };
        let map = format!("namespaceObject.metadata.{map}");
        let found = format!("(has({map}) && {} in {map})", cel::string(key));
        let read = format!("{map}[{}]", cel::string(key));
        // Nothing outside a namespace; the default when the key is missing.
        let inside = r#"request.namespace != "" && namespaceObject != null"#;
        return Ok(match &from.default {
            Some(default) => Source::Set {
                value: cel::Literal::Expression(format!(
                    "({found} ? {read} : {})",
                    cel::string(default)
                )),
                when: Some(format!("({inside})")),
            },
            None => Source::Set {
                value: cel::Literal::Expression(read),
                when: Some(format!("({inside} && {found})")),
            },
        });
    }
    match &assign.value {
        Some(value) => {
            json_safe(value)?;
            set(cel::Literal::Json(value.clone()))
        }
        None => Err(Reason::NotConstant("nothing (no value)")),
    }
}

/// The largest integer CEL gives to JSON as a number: past it (either
/// way), kube-apiserver v1.37.2 wrote `9007199254740993` as the string
/// `"9007199254740993"` (measured with a policy on a custom resource).
const JSON_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// `Ok` when every integer in `value` reaches the object as a number.
fn json_safe(value: &Value) -> Result<(), Reason> {
    match value {
        Value::Number(number) => {
            let safe = match (number.as_i64(), number.as_u64()) {
                (Some(integer), _) => integer.unsigned_abs() <= JSON_SAFE_INTEGER,
                (None, Some(integer)) => integer <= JSON_SAFE_INTEGER,
                (None, None) => true,
            };
            match safe {
                true => Ok(()),
                false => Err(Reason::UnsafeInteger(number.to_string())),
            }
        }
        Value::Array(items) => items.iter().try_for_each(json_safe),
        Value::Object(fields) => fields.values().try_for_each(json_safe),
        _ => Ok(()),
    }
}

/// The operations an `applyTo` entry names (every operation when none).
fn operations(entry: &ApplyTo) -> Vec<&'static str> {
    let mut operations = BTreeSet::new();
    if entry.operations.is_empty() {
        operations.extend(["CREATE", "UPDATE"]);
    }
    for operation in &entry.operations {
        match operation {
            OperationPattern::Create => operations.insert("CREATE"),
            OperationPattern::Update => operations.insert("UPDATE"),
            OperationPattern::All => {
                operations.insert("CREATE");
                operations.insert("UPDATE")
            }
        };
    }
    operations.into_iter().collect()
}

/// An Assign's `applyTo` as rules, and the guard that keeps it to exactly
/// those groups, versions, kinds and operations.
fn apply_to(entries: &[ApplyTo], resources: &Scopes) -> Result<(BTreeSet<Rule>, String), Reason> {
    let mut rules = BTreeSet::new();
    let mut alternatives = Vec::new();
    for entry in entries {
        let operations = operations(entry);
        let listed: Vec<String> = operations.iter().map(|o| cel::string(o)).collect();
        for group in &entry.groups {
            for version in &entry.versions {
                for kind in &entry.kinds {
                    let Some(rule) = kind_rule(resources, group, version, kind, &operations)?
                    else {
                        continue;
                    };
                    rules.insert(rule);
                    alternatives.push(format!(
                        "(request.kind.group == {} && request.kind.version == {} && request.kind.kind == {} && request.operation in [{}])",
                        cel::string(group),
                        cel::string(version),
                        cel::string(kind),
                        listed.join(", ")
                    ));
                }
            }
        }
    }
    if rules.is_empty() {
        return Err(Reason::NoKinds);
    }
    let guard = match alternatives.as_slice() {
        [one] => one.clone(),
        _ => format!("({})", alternatives.join(" || ")),
    };
    Ok((rules, guard))
}

/// The rule of `kind` in `group` at `version`: `None` when the group is a
/// built-in one without that kind (nothing to match), an error when the
/// group is not built in (its resource is not known offline).
fn kind_rule(
    resources: &Scopes,
    group: &str,
    version: &str,
    kind: &str,
    operations: &[&'static str],
) -> Result<Option<Rule>, Reason> {
    match resources.plural(group, kind) {
        Some(resource) => Ok(Some(Rule {
            group: group.to_string(),
            version: version.to_string(),
            resource: resource.to_string(),
            operations: operations.to_vec(),
            kind: Some(kind.to_string()),
        })),
        None if resources.lists_group(group) => Ok(None),
        None => Err(Reason::UnknownKind(match version {
            "*" => format!("{kind} ({group})"),
            _ => format!("{kind} ({group}/{version})"),
        })),
    }
}

/// The rules of an AssignMetadata, which applies to every kind `match.kinds`
/// allows: a kind in the table by its resource, `*` for every resource.
fn kinds_rules(criteria: &Match, resources: &Scopes) -> Result<BTreeSet<Rule>, Reason> {
    let operations = vec!["CREATE", "UPDATE"];
    let every = |group: &str| Rule {
        group: group.to_string(),
        version: "*".to_string(),
        resource: "*".to_string(),
        operations: operations.clone(),
        kind: None,
    };
    let mut rules = BTreeSet::new();
    if criteria.kinds.is_empty() {
        rules.insert(every("*"));
    }
    for entry in &criteria.kinds {
        let groups: Vec<&str> = match entry.api_groups.as_slice() {
            [] => vec!["*"],
            groups if groups.iter().any(|g| g == "*") => vec!["*"],
            groups => groups.iter().map(String::as_str).collect(),
        };
        for group in groups {
            if entry.kinds.is_empty() || entry.kinds.iter().any(|k| k == "*") || group == "*" {
                rules.insert(every(group));
                continue;
            }
            for kind in &entry.kinds {
                rules.extend(kind_rule(resources, group, "*", kind, &operations)?);
            }
        }
    }
    if rules.is_empty() {
        return Err(Reason::NoKinds);
    }
    Ok(rules)
}

/// What `match` reads of the object, which a write before it may change.
fn match_reads(criteria: &Match) -> Vec<passes::Read> {
    let value = |names: &[&str]| passes::Read {
        path: passes::fields(names),
        existence: false,
    };
    let mut reads = Vec::new();
    // A namespaceSelector reads a Namespace's own labels.
    for selector in [&criteria.label_selector, &criteria.namespace_selector]
        .into_iter()
        .flatten()
    {
        let keys = selector
            .match_labels
            .keys()
            .chain(selector.match_expressions.iter().map(|r| &r.key));
        for key in keys {
            reads.push(value(&["metadata", "labels", key]));
        }
    }
    if criteria.name.is_some()
        || !criteria.namespaces.is_empty()
        || !criteria.excluded_namespaces.is_empty()
    {
        reads.push(value(&["metadata", "name"]));
        reads.push(value(&["metadata", "generateName"]));
    }
    reads
}

/// Whether the object being admitted is a Namespace.
// sartor_engine::is_namespace_kind, in CEL.
const IS_NAMESPACE: &str = r#"(request.kind.group == "" && request.kind.kind == "Namespace")"#;

/// The namespace the namespace criteria compare: a Namespace's own name,
/// else the request's (`""` for a cluster-scoped object).
const COMPARED_NAMESPACE: &str = r#"((request.kind.group == "" && request.kind.kind == "Namespace") ? (has(object.metadata.name) ? object.metadata.name : "") : request.namespace)"#;

/// `match` as CEL, criterion by criterion as the engine checks them.
fn criteria_guard(criteria: &Match) -> String {
    let mut parts = Vec::new();
    if !criteria.kinds.is_empty() {
        let any = |list: &[String], subject: &str| {
            if list.is_empty() || list.iter().any(|item| item == "*") {
                "true".to_string()
            } else {
                let listed: Vec<String> = list.iter().map(|item| cel::string(item)).collect();
                format!("{subject} in [{}]", listed.join(", "))
            }
        };
        let entries: Vec<String> = criteria
            .kinds
            .iter()
            .map(|entry| {
                format!(
                    "({} && {})",
                    any(&entry.kinds, "request.kind.kind"),
                    any(&entry.api_groups, "request.kind.group")
                )
            })
            .collect();
        parts.push(format!("({})", entries.join(" || ")));
    }
    match criteria.scope {
        Some(Scope::Cluster) => {
            parts.push(format!(r#"({IS_NAMESPACE} || request.namespace == "")"#))
        }
        Some(Scope::Namespaced) => {
            parts.push(format!(r#"(!{IS_NAMESPACE} && request.namespace != "")"#));
        }
        Some(Scope::All) | None => {}
    }
    if !criteria.namespaces.is_empty() {
        let any: Vec<String> = criteria
            .namespaces
            .iter()
            .map(|w| w.cel(COMPARED_NAMESPACE))
            .collect();
        parts.push(format!(
            r#"({COMPARED_NAMESPACE} == "" && !{IS_NAMESPACE} || {})"#,
            any.join(" || ")
        ));
    }
    for excluded in &criteria.excluded_namespaces {
        parts.push(format!(
            r#"!(({IS_NAMESPACE} || {COMPARED_NAMESPACE} != "") && {})"#,
            excluded.cel(COMPARED_NAMESPACE)
        ));
    }
    if let Some(selector) = &criteria.label_selector {
        parts.push(format!("({})", cel::selector("object", selector)));
    }
    if let Some(selector) = &criteria.namespace_selector {
        parts.push(format!(
            r#"({IS_NAMESPACE} ? ({}) : (namespaceObject == null || ({})))"#,
            cel::selector("object", selector),
            cel::selector("namespaceObject", selector)
        ));
    }
    if let Some(name) = &criteria.name {
        let read = |field: &str| {
            format!(r#"(has(object.metadata.{field}) ? object.metadata.{field} : "")"#)
        };
        parts.push(format!(
            "({} || {})",
            name.cel(&read("name")),
            name.cel_generate_name(&read("generateName"))
        ));
    }
    if parts.is_empty() {
        return "true".to_string();
    }
    parts.join(" && ")
}

/// An AssignMetadata's patch: the label or annotation added when it is not
/// there (Gatekeeper never changes one that is), the map too when missing.
fn metadata_patch(names: &[String], value: &cel::Literal) -> String {
    let (Some(key), Some(map)) = (names.last(), names.get(..names.len().saturating_sub(1))) else {
        return "[]".to_string();
    };
    let map_read = cel::read_path("object", map);
    format!(
        "(!({}) ? [JSONPatch{{op: \"add\", path: {}, value: {{{}: {}}}}}] : ({} in {map_read} ? [] : [JSONPatch{{op: \"add\", path: {}, value: {}}}]))",
        cel::has_path("object", map),
        cel::string(&cel::pointer(map)),
        cel::string(key),
        value.render(),
        cel::string(key),
        cel::string(&cel::pointer(names)),
        value.render()
    )
}

/// The policy of `mutations` and its binding.
/// Every mutation's rules.
fn rules_of(mutations: &[Mutation]) -> Vec<&Rule> {
    mutations.iter().flat_map(|m| &m.rules).collect()
}

/// `excludeResourceRules` for what sartor never mutates and a rule can
/// name: Gatekeeper's policy groups, and the admission configuration kinds.
fn protected_resource_rules() -> Vec<Value> {
    let every = ["*"];
    let mut rules: Vec<Value> = GATEKEEPER_PROTECTED_GROUPS
        .iter()
        .map(|group| {
            json!({"apiGroups": [group], "apiVersions": every,
                   "resources": every, "operations": every})
        })
        .collect();
    let configuration: Vec<&str> = ADMISSION_CONFIGURATION_KINDS
        .iter()
        .filter_map(|kind| Scopes::builtin().plural(ADMISSION_REGISTRATION_GROUP, kind))
        .collect();
    rules.push(
        json!({"apiGroups": [ADMISSION_REGISTRATION_GROUP], "apiVersions": every,
                      "resources": configuration, "operations": every}),
    );
    rules
}

fn policy(mutations: &[Mutation], options: &Options) -> Vec<Value> {
    let mut rules: BTreeMap<(String, String, Vec<&'static str>), BTreeSet<String>> =
        BTreeMap::new();
    for rule in rules_of(mutations) {
        rules
            .entry((
                rule.group.clone(),
                rule.version.clone(),
                rule.operations.clone(),
            ))
            .or_default()
            .insert(rule.resource.clone());
    }
    let resource_rules: Vec<Value> = rules
        .into_iter()
        .map(|((group, version, operations), mut resources)| {
            // `*` already names every resource, and the API server refuses
            // it beside others.
            if resources.contains("*") {
                resources = BTreeSet::from(["*".to_string()]);
            }
            json!({"apiGroups": [group], "apiVersions": [version],
                   "resources": resources, "operations": operations})
        })
        .collect();
    // The install's exclusions: the exemption label, sartor's namespace and
    // the excluded namespaces by name; globs as a match condition.
    let mut names: BTreeSet<String> = BTreeSet::from([options.sartor_namespace.clone()]);
    let mut globs = Vec::new();
    for excluded in &options.excluded_namespaces {
        if excluded.as_str().contains('*') {
            globs.push(excluded.cel(COMPARED_NAMESPACE));
        } else {
            names.insert(excluded.as_str().to_string());
        }
    }
    let mut conditions = Vec::new();
    if !globs.is_empty() {
        conditions.push(json!({"name": "not-in-an-excluded-namespace",
                               "expression": format!("!({})", globs.join(" || "))}));
    }
    // What sartor never mutates, where a rule could reach it: Gatekeeper's
    // policy groups and admission configuration by resource, sartor's own
    // groups (any group under its domain) as a condition. The API server
    // exempts admission configuration from webhooks, not from policies.
    let reaches = |group: &str| {
        group == "*" || group == ADMISSION_REGISTRATION_GROUP || protected(group, "").is_some()
    };
    let exclusions = if rules_of(mutations).iter().any(|rule| reaches(&rule.group)) {
        conditions.push(json!({"name": "not-sartors-own-api",
                               "expression": format!(
                                   "!(request.kind.group == {domain} || request.kind.group.endsWith({dot}))",
                                   domain = cel::string(SARTOR_DOMAIN),
                                   dot = cel::string(&format!(".{SARTOR_DOMAIN}")))}));
        protected_resource_rules()
    } else {
        Vec::new()
    };
    let mut policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicy",
        "metadata": {
            "name": options.name,
            "labels": {"app.kubernetes.io/managed-by": "sartor"},
            "annotations": {"mutations.sartor.dev/exported": mutations
                .iter()
                .map(|m| named(&m.id))
                .collect::<Vec<_>>()
                .join(", ")},
        },
        "spec": {
            "failurePolicy": options.failure_policy.as_str(),
            "reinvocationPolicy": "IfNeeded",
            "matchConstraints": {
                "matchPolicy": "Exact",
                "namespaceSelector": {"matchExpressions": [
                    {"key": EXEMPTION_LABEL, "operator": "DoesNotExist"},
                    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": names},
                ]},
                "resourceRules": resource_rules,
            },
            "mutations": mutations.iter().map(|m| json!({
                "patchType": "JSONPatch",
                "jsonPatch": {"expression": m.expression},
            })).collect::<Vec<_>>(),
        },
    });
    if let Some(spec) = policy.get_mut("spec").and_then(Value::as_object_mut) {
        if !conditions.is_empty() {
            spec.insert("matchConditions".to_string(), Value::Array(conditions));
        }
        if !exclusions.is_empty()
            && let Some(constraints) = spec
                .get_mut("matchConstraints")
                .and_then(Value::as_object_mut)
        {
            constraints.insert("excludeResourceRules".to_string(), Value::Array(exclusions));
        }
    }
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": options.name, "labels": {"app.kubernetes.io/managed-by": "sartor"}},
        "spec": {"policyName": options.name},
    });
    vec![policy, binding]
}

#[cfg(test)]
mod tests;
