//! What can be proven about a mutator set without an object: which mutators
//! can never apply, never have an effect, break updates, fight a controller,
//! write the same place as another, or may keep an object from converging.
//!
//! ```text
//!  System ──analyze──▶ for every enforced mutator: the objects it may touch
//!                      (kinds x operations from applyTo and match.kinds, and
//!                      the rest of match), what it writes (its location and
//!                      effect) and what it reads (selectors' label keys)
//!                  ──▶ rules over single mutators and pairs ──▶ Vec<Finding>
//! ```
//!
//! Every rule is an over-approximation in the direction that keeps it free of
//! false alarms: a finding is only reported when the pattern holds on every
//! object the mutators can match (shadowed, never applies), or when the
//! mutators name a kind and field for which Kubernetes itself is known to
//! behave so (breaks UPDATE, fights a controller). docs/semantics.md's "What
//! sartor proves about a mutator set" gives each rule its argument and limits.
//!
//! Mutators in schema conflict are left out: they are not enforced, and the
//! conflict is reported on its own.

pub mod gatekeeper;
pub mod immutable;

use std::collections::HashMap;
use std::fmt;

use sartor_api::{MutatorKind, Scope, SourcePattern};
use sartor_location::{KeyValue, Node, Path};
use serde_json::{Map, Value, json};

use crate::mutator::{Applies, Effect, Mutator, MutatorId};
use crate::request::{Gvk, Operation};
use crate::scope::Scopes;
use crate::system::System;
use crate::targets::{KindPattern, Targets};

/// One thing the analysis found, naming the mutators involved.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// Which rule found it.
    pub rule: Rule,
    /// The mutators involved; the first is the one the finding is about.
    pub mutators: Vec<MutatorId>,
    /// The place of the object the finding is about, when there is one.
    pub path: Option<Path>,
    /// A minimal object on which it plays out, when one exists.
    pub example: Option<Value>,
    /// What happens, and what to do about it.
    pub message: String,
}

/// The rules, each a kind of finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rule {
    /// Its applyTo and match can never hold together.
    NeverApplies,
    /// A later mutator replaces or removes what it writes on every object it
    /// applies to: it never has an effect.
    Shadowed,
    /// What it writes lies inside what an earlier mutator replaces on every
    /// object: it survives only because its name sorts after the other's.
    KeptByOrder,
    /// It applies on UPDATE and writes a field the API server refuses to
    /// change once the object exists.
    BreaksUpdate,
    /// It writes objects (or fields) that a Kubernetes controller owns and
    /// rewrites.
    FightsController,
    /// Two mutators write the same place on objects both may match, with
    /// different values: the order decides.
    Overlap,
    /// A pattern under which passes may keep changing the object.
    MayNotConverge,
}

/// How much a finding matters: `sartor lint` fails on errors (and on
/// warnings with `--strict`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    /// Certainly a mistake.
    Error,
    /// Very likely a mistake, or a risk for the cluster.
    Warning,
    /// Worth knowing; often intended.
    Info,
}

/// Runs every rule over the enforced mutators of `system`; `scopes` says
/// which kinds are namespaced (what `never-applies` reads of a mutator's
/// `match.scope`; a kind it does not know is never judged by scope).
///
/// Pure and independent of any object; its cost grows with the number of
/// pairs of mutators writing under the same top-level field.
pub fn analyze(system: &System, scopes: &Scopes) -> Vec<Finding> {
    let facts: Vec<Facts<'_>> = system
        .mutators()
        .filter(|m| !system.is_conflicted(m.id()))
        .map(|m| Facts::of(m))
        .collect();
    let mut findings = Vec::new();
    for fact in &facts {
        never_applies(fact, scopes, &mut findings);
        breaks_update(fact, &mut findings);
        fights_controller(fact, &mut findings);
    }
    pairs(&facts, &mut findings);
    may_not_converge(&facts, &mut findings);
    findings.sort_by(|a, b| {
        (a.severity(), a.rule, &a.mutators).cmp(&(b.severity(), b.rule, &b.mutators))
    });
    findings
}

// === impl Finding ===

impl Finding {
    /// The rule's severity.
    pub fn severity(&self) -> Severity {
        self.rule.severity()
    }

    /// Whether `id` is one of the mutators involved.
    pub fn involves(&self, id: &MutatorId) -> bool {
        self.mutators.contains(id)
    }
}

impl fmt::Display for Finding {
    /// `Assign a: shadowed: message`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(first) = self.mutators.first() {
            write!(f, "{first}: ")?;
        }
        write!(f, "{}: {}", self.rule, self.message)
    }
}

// === impl Rule ===

impl Rule {
    /// Every rule, in order.
    pub const ALL: [Rule; 7] = [
        Rule::NeverApplies,
        Rule::Shadowed,
        Rule::KeptByOrder,
        Rule::BreaksUpdate,
        Rule::FightsController,
        Rule::Overlap,
        Rule::MayNotConverge,
    ];

    /// Its name in reports: `never-applies`, `shadowed`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::NeverApplies => "never-applies",
            Rule::Shadowed => "shadowed",
            Rule::KeptByOrder => "kept-by-order",
            Rule::BreaksUpdate => "breaks-update",
            Rule::FightsController => "fights-controller",
            Rule::Overlap => "overlap",
            Rule::MayNotConverge => "may-not-converge",
        }
    }

    /// How much a finding of this rule matters.
    pub fn severity(self) -> Severity {
        match self {
            Rule::NeverApplies => Severity::Error,
            Rule::Shadowed
            | Rule::KeptByOrder
            | Rule::BreaksUpdate
            | Rule::FightsController
            | Rule::MayNotConverge => Severity::Warning,
            Rule::Overlap => Severity::Info,
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

// === impl Severity ===

impl Severity {
    /// `error`, `warning` or `info`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the analysis knows about one mutator.
struct Facts<'s> {
    mutator: &'s Mutator,
    /// The kinds (any version for AssignMetadata) and operations it may touch.
    targets: Targets,
    effect: Effect<'s>,
    /// Whether it applies to every object it matches: no pathTests of its
    /// own (a removal's implicit MustExist on its location aside) and no
    /// value conditions.
    unconditional: bool,
}

impl<'s> Facts<'s> {
    fn of(mutator: &'s Mutator) -> Facts<'s> {
        let effect = mutator.effect();
        let last = mutator.location().len().saturating_sub(1);
        // A removal's implicit MustExist, and AssignMetadata's MustNotExist
        // (the key's presence decides), are part of what they do.
        let own = |depth: usize| {
            depth == last && matches!(effect, Effect::Remove | Effect::AddIfAbsent { .. })
        };
        let unconditional = mutator.conditions().is_empty()
            && (0..mutator.location().len())
                .all(|depth| mutator.tests().condition_at(depth).is_none() || own(depth));
        Facts {
            mutator,
            targets: Targets::of([mutator]),
            effect,
            unconditional,
        }
    }

    fn id(&self) -> &'s MutatorId {
        self.mutator.id()
    }

    fn location(&self) -> &'s Path {
        self.mutator.location()
    }

    /// Whether every object `other` may touch, `self` touches too, in the
    /// same operation.
    fn covers(&self, other: &Facts<'_>) -> bool {
        !other.targets.is_empty()
            && other.targets.iter().all(|(theirs, their_ops)| {
                self.targets.iter().any(|(mine, my_ops)| {
                    pattern_covers(mine, theirs) && my_ops.union(their_ops) == my_ops
                })
            })
            && self.mutator.matcher().covers(other.mutator.matcher())
    }

    /// A kind both may touch in a common operation, when some object may
    /// meet both.
    fn overlap(&self, other: &Facts<'_>) -> Option<KindPattern> {
        self.overlap_with(other, true)
    }

    /// [`Self::overlap`], with label selectors compared or not.
    fn overlap_with(&self, other: &Facts<'_>, labels: bool) -> Option<KindPattern> {
        if !self
            .mutator
            .matcher()
            .may_overlap(other.mutator.matcher(), labels)
        {
            return None;
        }
        self.targets.iter().find_map(|(mine, my_ops)| {
            other.targets.iter().find_map(|(theirs, their_ops)| {
                let common = Operation::ALL
                    .into_iter()
                    .any(|op| my_ops.contains(op) && their_ops.contains(op));
                common.then(|| pattern_meet(mine, theirs)).flatten()
            })
        })
    }

    /// The first kind it may touch, for examples.
    fn some_kind(&self) -> Option<&KindPattern> {
        self.targets.iter().next().map(|(pattern, _)| pattern)
    }
}

// === never applies ===

fn never_applies(fact: &Facts<'_>, scopes: &Scopes, findings: &mut Vec<Finding>) {
    let mutator = fact.mutator;
    let matcher = mutator.matcher();
    let mut report = |message: String| {
        findings.push(Finding {
            rule: Rule::NeverApplies,
            mutators: vec![fact.id().clone()],
            path: None,
            example: None,
            message,
        });
    };
    if let Applies::Kinds(kinds) = mutator.applies()
        && !kinds.keys().any(|gvk| matcher.kinds_match(gvk))
    {
        let listed: Vec<String> = kinds.keys().map(ToString::to_string).collect();
        report(format!(
            "no kind in its applyTo ({}) is allowed by its match.kinds, so it applies to nothing",
            listed.join(", ")
        ));
        return;
    }
    if let Some(why) = matcher.never_matches() {
        report(format!("{why}, so it matches no object"));
        return;
    }
    if matcher.source() == SourcePattern::Generated && !mutator.applies_to_generated() {
        report(
            "its match.source is Generated, and what expansion generates is admitted by no \
             operation, which only an applyTo entry allowing every operation takes (as in \
             Gatekeeper); each of its applyTo entries lists operations without \"*\", so it \
             matches no object"
                .to_string(),
        );
        return;
    }
    // What the scope of the kinds it applies to is known to be.
    let scopes: Option<Vec<(bool, bool)>> = match mutator.applies() {
        Applies::Everything => None,
        Applies::Kinds(kinds) => kinds
            .keys()
            .filter(|gvk| matcher.kinds_match(gvk))
            .map(|gvk| {
                scopes
                    .namespaced(&gvk.group, &gvk.kind)
                    .map(|ns| (ns, gvk.is_namespace()))
            })
            .collect(),
    };
    let Some(scopes) = scopes else {
        if matcher.scope() == Scope::Namespaced
            && let Some(why) = matcher.never_matches_namespaced()
        {
            report(format!(
                "{why}, and its scope is Namespaced, so it matches no object"
            ));
        }
        return;
    };
    let names = |namespaced: bool| -> String {
        let listed: Vec<String> = match mutator.applies() {
            Applies::Kinds(kinds) => kinds
                .keys()
                .filter(|gvk| matcher.kinds_match(gvk))
                .map(ToString::to_string)
                .collect(),
            Applies::Everything => Vec::new(),
        };
        format!(
            "{} {}",
            listed.join(", "),
            if namespaced {
                "are namespaced"
            } else {
                "are cluster-scoped"
            }
        )
    };
    match matcher.scope() {
        Scope::Cluster if scopes.iter().all(|(namespaced, _)| *namespaced) => {
            report(format!(
                "its scope is Cluster but the kinds it applies to ({}), so it matches no object in a cluster",
                names(true)
            ));
        }
        Scope::Namespaced if scopes.iter().all(|(namespaced, _)| !*namespaced) => {
            report(format!(
                "its scope is Namespaced but the kinds it applies to ({}), so it matches no object",
                names(false)
            ));
        }
        _ => {
            // Namespaced kinds fail the namespace criteria; cluster-scoped
            // ones pass them (a Namespace is its own namespace, so it is
            // counted as namespaced here).
            if (matcher.scope() == Scope::Namespaced
                || scopes
                    .iter()
                    .all(|(namespaced, namespace)| *namespaced || *namespace))
                && let Some(why) = matcher.never_matches_namespaced()
            {
                report(format!(
                    "{why}, and the kinds it applies to are namespaced, so it matches no object"
                ));
            }
        }
    }
}

// === breaks UPDATE ===

fn breaks_update(fact: &Facts<'_>, findings: &mut Vec<Finding>) {
    let mutator = fact.mutator;
    // Labels and annotations can always change.
    if mutator.id().kind == MutatorKind::AssignMetadata {
        return;
    }
    let Applies::Kinds(kinds) = mutator.applies() else {
        return;
    };
    let location = mutator.location();
    for (gvk, ops) in kinds {
        if !ops.contains(Operation::Update) || !mutator.matcher().kinds_match(gvk) {
            continue;
        }
        let Some((field, path)) = immutable::IMMUTABLE_FIELDS.iter().find_map(|field| {
            if field.group != gvk.group || field.kind != gvk.kind {
                return None;
            }
            let path = Path::parse(field.path).ok()?;
            let exempt = field
                .except
                .iter()
                .any(|except| Path::parse(except).is_ok_and(|except| within(location, &except)));
            (paths_meet(location, &path) && !exempt).then_some((field, path))
        }) else {
            continue;
        };
        let shared = if path.len() > location.len() {
            path.clone()
        } else {
            location.clone()
        };
        findings.push(Finding {
            rule: Rule::BreaksUpdate,
            mutators: vec![mutator.id().clone()],
            example: Some(example(
                &KindPattern {
                    group: Some(gvk.group.clone()),
                    version: Some(gvk.version.clone()),
                    kind: Some(gvk.kind.clone()),
                },
                &shared,
            )),
            path: Some(shared),
            message: format!(
                "it applies to {gvk} on UPDATE and writes {location}, which the API server does not let change once the object exists ({} is immutable: {}, Kubernetes {}); an update of a {} created before this mutator, or that it did not mutate, is then refused. Limit its applyTo operations to CREATE",
                field.path,
                field.source(),
                immutable::KUBERNETES_VERSION,
                gvk.kind,
            ),
        });
    }
}

// === fights a controller ===

/// A field a Kubernetes controller writes and compares, so a webhook that
/// changes it makes the controller act again.
struct OwnedField {
    group: &'static str,
    kind: &'static str,
    path: &'static str,
    /// Only a removal fights (an AssignMetadata add never changes a label
    /// that is there).
    removal_only: bool,
    why: &'static str,
}

const CONTROLLER_OWNED: &[OwnedField] = &[
    OwnedField {
        group: "apps",
        kind: "ReplicaSet",
        path: "spec.template",
        removal_only: false,
        why: "the Deployment controller makes a Deployment's ReplicaSets from its Pod template and looks for the one whose template equals it; a ReplicaSet whose template a webhook changed never equals it, so the controller makes another, and another (gatekeeper#2963, \"ReplicaSet explosion\"). Mutate the Deployment, or the Pods, instead",
    },
    OwnedField {
        group: "apps",
        kind: "ControllerRevision",
        path: "data",
        removal_only: false,
        why: "the StatefulSet and DaemonSet controllers write ControllerRevisions and find the current one by comparing their data with the template; a changed revision never matches, so they write new ones",
    },
    OwnedField {
        group: "discovery.k8s.io",
        kind: "EndpointSlice",
        path: "endpoints",
        removal_only: false,
        why: "the EndpointSlice controller writes them from the Service's Pods and rewrites any difference it sees",
    },
    OwnedField {
        group: "discovery.k8s.io",
        kind: "EndpointSlice",
        path: "ports",
        removal_only: false,
        why: "the EndpointSlice controller writes them from the Service and rewrites any difference it sees",
    },
    OwnedField {
        group: "",
        kind: "Endpoints",
        path: "subsets",
        removal_only: false,
        why: "the Endpoints controller writes them from the Service's Pods and rewrites any difference it sees",
    },
    OwnedField {
        group: "",
        kind: "Pod",
        path: "metadata.labels.pod-template-hash",
        removal_only: true,
        why: "the ReplicaSet controller finds its Pods by this label; a Pod without it is not counted, so the controller creates another",
    },
    OwnedField {
        group: "",
        kind: "Pod",
        path: "metadata.labels.controller-revision-hash",
        removal_only: true,
        why: "the StatefulSet and DaemonSet controllers read a Pod's revision from this label; without it they replace the Pod",
    },
];

fn fights_controller(fact: &Facts<'_>, findings: &mut Vec<Finding>) {
    let mutator = fact.mutator;
    for owned in CONTROLLER_OWNED {
        if owned.removal_only && fact.effect != Effect::Remove {
            continue;
        }
        let gvk = match mutator.applies() {
            Applies::Kinds(kinds) => kinds.keys().find(|gvk| {
                gvk.group == owned.group
                    && gvk.kind == owned.kind
                    && mutator.matcher().kinds_match(gvk)
            }),
            Applies::Everything => None,
        };
        let any_version = Gvk::new(owned.group, "v1", owned.kind);
        let applies = gvk.is_some()
            || (matches!(mutator.applies(), Applies::Everything)
                && mutator.matcher().kinds_match(&any_version));
        let Ok(path) = Path::parse(owned.path) else {
            continue;
        };
        if !applies || !paths_meet(mutator.location(), &path) {
            continue;
        }
        let pattern = KindPattern {
            group: Some(owned.group.to_string()),
            version: gvk.map(|g| g.version.clone()),
            kind: Some(owned.kind.to_string()),
        };
        findings.push(Finding {
            rule: Rule::FightsController,
            mutators: vec![mutator.id().clone()],
            example: Some(example(&pattern, mutator.location())),
            path: Some(mutator.location().clone()),
            message: format!(
                "it writes {} of {} objects: {}",
                mutator.location(),
                pattern,
                owned.why
            ),
        });
    }
}

// === pairs: shadowed, kept by order, overlap ===

fn pairs(facts: &[Facts<'_>], findings: &mut Vec<Finding>) {
    // Only mutators whose locations start with the same field can meet.
    let mut by_root: HashMap<&Node, Vec<&Facts<'_>>> = HashMap::new();
    for fact in facts {
        if let Some(root) = fact.location().nodes().first() {
            by_root.entry(root).or_default().push(fact);
        }
    }
    for group in by_root.values() {
        for (i, first) in group.iter().enumerate() {
            for second in group.iter().skip(i + 1) {
                pair(first, second, findings);
            }
        }
    }
}

/// One pair; `first` comes before `second` in the order.
fn pair(first: &Facts<'_>, second: &Facts<'_>, findings: &mut Vec<Finding>) {
    if !paths_meet(first.location(), second.location()) {
        return;
    }
    // A later overwrite hides an earlier write inside it.
    if let Some(finding) = shadow(first, second, Rule::Shadowed) {
        findings.push(finding);
        return;
    }
    // An earlier overwrite: a later write inside it survives by order only.
    if let Some(finding) = shadow(second, first, Rule::KeptByOrder) {
        findings.push(finding);
        return;
    }
    // Two AssignMetadata adds of one key: the earlier one wins.
    if let Some(finding) = first_add_wins(first, second) {
        findings.push(finding);
        return;
    }
    if let Some(finding) = overlap(first, second) {
        findings.push(finding);
    }
}

/// What an overwrite leaves at its location.
enum Overwrite<'a> {
    Value(&'a Value),
    /// A string from the object's metadata.
    String,
}

fn overwrite<'a>(fact: &Facts<'a>) -> Option<Overwrite<'a>> {
    if !fact.unconditional {
        return None;
    }
    match fact.effect {
        Effect::Replace(Some(value)) => Some(Overwrite::Value(value)),
        Effect::Replace(None) => Some(Overwrite::String),
        // A removal never creates: the parents an earlier write created on
        // the way stay, so that write is not without effect.
        _ => None,
    }
}

/// `inner` writes at or inside the place `outer` overwrites, on every object
/// `inner` applies to: `Shadowed` when `outer` runs later (`inner` never
/// has an effect), `KeptByOrder` when it runs earlier.
fn shadow(inner: &Facts<'_>, outer: &Facts<'_>, rule: Rule) -> Option<Finding> {
    let overwrite = overwrite(outer)?;
    let (at, within) = (outer.location(), inner.location());
    // Equal nodes on the way: whatever `inner` creates there, `outer`
    // creates too.
    if !at.is_prefix_of(within) {
        return None;
    }
    let rest = within.nodes().get(at.len()..).unwrap_or_default();
    let fits = match (&overwrite, rest.is_empty()) {
        // Same place: the value must be one `inner` can work on, or the
        // next pass would fail rather than be undone.
        (Overwrite::Value(value), true) => match inner.effect {
            Effect::ModifySet => value.is_array(),
            Effect::Image => value.is_string(),
            _ => true,
        },
        (Overwrite::String, true) => !matches!(inner.effect, Effect::ModifySet),
        (Overwrite::Value(value), false) => walkable(value, rest),
        (Overwrite::String, false) => false,
    };
    if !fits || !outer.covers(inner) {
        return None;
    }
    if let (Effect::Replace(Some(mine)), Overwrite::Value(theirs)) = (inner.effect, &overwrite)
        && rest.is_empty()
        && mine == *theirs
    {
        return None;
    }
    let what = "replaces";
    let kind = inner.some_kind()?;
    let message = match rule {
        Rule::Shadowed => format!(
            "it never has an effect: {} comes later in the order and {what} {at} on every object it applies to, so what it writes at {within} is undone in every pass",
            outer.id()
        ),
        _ => format!(
            "what it writes at {within} survives only because its name sorts after {}, which {what} {at} on every object it applies to; renamed, or with the other renamed, it would never have an effect",
            outer.id()
        ),
    };
    Some(Finding {
        rule,
        mutators: vec![inner.id().clone(), outer.id().clone()],
        path: Some(at.clone()),
        example: Some(example(kind, within)),
        message,
    })
}

/// Whether walking `rest` into `value` (what an overwrite leaves) never
/// meets a value of the wrong type: a missing field is created, a scalar on
/// the way would fail the walk.
fn walkable(value: &Value, rest: &[Node]) -> bool {
    let Some((node, rest)) = rest.split_first() else {
        return true;
    };
    match (node, value) {
        (Node::Field(name), Value::Object(fields)) => {
            fields.get(name).is_none_or(|child| walkable(child, rest))
        }
        (Node::List(selector), Value::Array(elements)) => elements.iter().all(|element| {
            element.as_object().is_some_and(|fields| {
                let key = fields.get(&selector.key_field);
                let selected = match (&selector.key_value, key) {
                    (KeyValue::Glob | KeyValue::NotIn(_), _) => true,
                    (KeyValue::String(s), Some(Value::String(k))) => s == k,
                    (KeyValue::Integer(i), Some(Value::Number(n))) => n.as_i64() == Some(*i),
                    _ => false,
                };
                !selected || walkable(element, rest)
            })
        }),
        _ => false,
    }
}

/// Two AssignMetadata that add the same label or annotation: the earlier
/// one sets it, the later never changes a key that is there.
fn first_add_wins(first: &Facts<'_>, second: &Facts<'_>) -> Option<Finding> {
    let (
        Effect::AddIfAbsent {
            value: mine,
            always: true,
        },
        Effect::AddIfAbsent { value: theirs, .. },
    ) = (first.effect, second.effect)
    else {
        return None;
    };
    if first.location() != second.location()
        || !first.unconditional
        || !first.covers(second)
        || (mine.is_some() && mine == theirs)
    {
        return None;
    }
    let kind = second.some_kind()?;
    Some(Finding {
        rule: Rule::Shadowed,
        mutators: vec![second.id().clone(), first.id().clone()],
        path: Some(second.location().clone()),
        example: Some(example(kind, second.location())),
        message: format!(
            "it never has an effect: {} comes earlier in the order and sets {} on every object it applies to, and AssignMetadata never changes a label or annotation that is there",
            first.id(),
            second.location()
        ),
    })
}

fn overlap(first: &Facts<'_>, second: &Facts<'_>) -> Option<Finding> {
    let writes = |fact: &Facts<'_>| !matches!(fact.effect, Effect::ModifySet);
    if !writes(first) || !writes(second) {
        return None;
    }
    let same_value = match (first.effect, second.effect) {
        (Effect::Replace(Some(a)), Effect::Replace(Some(b))) => a == b,
        (
            Effect::AddIfAbsent { value: Some(a), .. },
            Effect::AddIfAbsent { value: Some(b), .. },
        ) => a == b,
        (Effect::Remove, Effect::Remove) => true,
        _ => false,
    };
    if same_value {
        return None;
    }
    let kind = first.overlap(second)?;
    let (a, b) = (first.location(), second.location());
    // The same place; one inside the other is the shadowing rules' business.
    if a.len() != b.len() {
        return None;
    }
    let shared = a;
    let winner = match (first.effect, second.effect) {
        (Effect::AddIfAbsent { .. }, Effect::AddIfAbsent { .. }) => {
            format!("{} wins where both apply (it comes first)", first.id())
        }
        (Effect::Replace(_) | Effect::Remove, Effect::Replace(_) | Effect::Remove) => {
            format!("{} wins where both apply (it comes last)", second.id())
        }
        _ => "the order decides what stays".to_string(),
    };
    Some(Finding {
        rule: Rule::Overlap,
        mutators: vec![first.id().clone(), second.id().clone()],
        path: Some(shared.clone()),
        example: Some(example(&kind, shared)),
        message: format!(
            "it and {} both write {shared} on {kind} objects with different values; {winner}",
            second.id(),
        ),
    })
}

// === may not converge ===

/// A label a selector reads, that one mutator adds and another removes, can
/// flip a match back and forth from pass to pass.
fn may_not_converge(facts: &[Facts<'_>], findings: &mut Vec<Finding>) {
    let label = |fact: &Facts<'_>| -> Option<String> {
        match fact.location().nodes() {
            [Node::Field(m), Node::Field(l), Node::Field(key)]
                if m == "metadata" && l == "labels" =>
            {
                Some(key.clone())
            }
            _ => None,
        }
    };
    for reader in facts {
        let may_be_namespace = match reader.mutator.applies() {
            Applies::Everything => true,
            Applies::Kinds(kinds) => kinds.keys().any(Gvk::is_namespace),
        };
        let mut keys = reader.mutator.matcher().label_keys(may_be_namespace);
        keys.sort_unstable();
        keys.dedup();
        for key in keys {
            let touches = |wanted: fn(&Effect<'_>) -> bool| {
                facts.iter().find(|fact| {
                    wanted(&fact.effect)
                        && label(fact).as_deref() == Some(key)
                        && fact.overlap_with(reader, false).is_some()
                })
            };
            let adder = touches(|e| matches!(e, Effect::AddIfAbsent { .. }));
            let remover = touches(|e| *e == Effect::Remove);
            // A mutator reading the key it writes itself decides on the
            // value it is about to change; that alone does not flip.
            let (adder, remover) = (
                adder.filter(|a| a.id() != reader.id()),
                remover.filter(|r| r.id() != reader.id()),
            );
            let (Some(adder), Some(remover)) = (adder, remover) else {
                continue;
            };
            if adder.overlap_with(remover, false).is_none() {
                continue;
            }
            let path = remover.location().clone();
            let Some(kind) = reader.overlap_with(adder, false) else {
                continue;
            };
            findings.push(Finding {
                rule: Rule::MayNotConverge,
                mutators: vec![reader.id().clone(), adder.id().clone(), remover.id().clone()],
                example: Some(example(&kind, &path)),
                path: Some(path),
                message: format!(
                    "its selector reads the label {key:?}, which {} adds and {} removes on the same objects; whether it matches can change from one pass to the next, so the set may not converge. Keep one of them off objects the other touches",
                    adder.id(),
                    remover.id()
                ),
            });
        }
    }
}

// === paths and kinds ===

/// Whether two locations may address the same place of one object, or one
/// a place inside the other's.
pub(crate) fn paths_meet(a: &Path, b: &Path) -> bool {
    a.nodes()
        .iter()
        .zip(b.nodes())
        .all(|(a, b)| nodes_meet(a, b))
}

fn nodes_meet(a: &Node, b: &Node) -> bool {
    match (a, b) {
        (Node::Field(a), Node::Field(b)) => a == b,
        (Node::List(a), Node::List(b)) => {
            a.key_field == b.key_field && a.key_value.may_meet(&b.key_value)
        }
        _ => false,
    }
}

/// Whether `path` lies at or inside `outer`, where a glob of `outer` stands
/// for every element.
fn within(path: &Path, outer: &Path) -> bool {
    outer.len() <= path.len()
        && outer
            .nodes()
            .iter()
            .zip(path.nodes())
            .all(|(o, p)| match (o, p) {
                (Node::List(o), Node::List(p)) if o.key_value == KeyValue::Glob => {
                    o.key_field == p.key_field
                }
                _ => o == p,
            })
}

fn pattern_covers(outer: &KindPattern, inner: &KindPattern) -> bool {
    let part = |o: &Option<String>, i: &Option<String>| o.is_none() || o == i;
    part(&outer.group, &inner.group)
        && part(&outer.version, &inner.version)
        && part(&outer.kind, &inner.kind)
}

fn pattern_meet(a: &KindPattern, b: &KindPattern) -> Option<KindPattern> {
    let part = |a: &Option<String>, b: &Option<String>| match (a, b) {
        (Some(a), Some(b)) if a != b => Err(()),
        (Some(a), _) | (None, Some(a)) => Ok(Some(a.clone())),
        (None, None) => Ok(None),
    };
    Some(KindPattern {
        group: part(&a.group, &b.group).ok()?,
        version: part(&a.version, &b.version).ok()?,
        kind: part(&a.kind, &b.kind).ok()?,
    })
}

/// A minimal object of `kind` in which `path` exists (up to its last node):
/// where a finding plays out. Globs and exclusions become an element named
/// `example`.
fn example(kind: &KindPattern, path: &Path) -> Value {
    let group = kind.group.as_deref().unwrap_or("example.com");
    let version = kind.version.as_deref().unwrap_or("v1");
    let api_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let mut object = json!({
        "apiVersion": api_version,
        "kind": kind.kind.as_deref().unwrap_or("Example"),
        "metadata": {"name": "example"},
    });
    let nodes = path.nodes();
    let parents = nodes
        .get(..nodes.len().saturating_sub(1))
        .unwrap_or_default();
    grow(&mut object, parents);
    object
}

fn grow(value: &mut Value, nodes: &[Node]) {
    let Some((node, rest)) = nodes.split_first() else {
        return;
    };
    match node {
        Node::Field(name) => {
            if !value.is_object() {
                *value = Value::Object(Map::new());
            }
            if let Value::Object(fields) = value {
                let child = fields.entry(name.clone()).or_insert(Value::Null);
                if rest.is_empty() && child.is_null() {
                    *child = Value::Object(Map::new());
                }
                grow(child, rest);
            }
        }
        Node::List(selector) => {
            let key = match &selector.key_value {
                KeyValue::String(s) => Value::String(s.clone()),
                KeyValue::Integer(i) => Value::from(*i),
                KeyValue::Glob | KeyValue::NotIn(_) => Value::String("example".to_string()),
            };
            let mut element = Map::new();
            element.insert(selector.key_field.clone(), key);
            let mut element = Value::Object(element);
            grow(&mut element, rest);
            *value = Value::Array(vec![element]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(location: &str) -> Path {
        Path::parse(location).unwrap()
    }

    #[test]
    fn paths_meet_when_one_may_address_a_place_of_the_other() {
        let cases = [
            ("spec.a", "spec.a.b", true),
            ("spec.a", "spec.b", false),
            ("spec.c[name: x].image", "spec.c[name: *]", true),
            ("spec.c[name: x].image", "spec.c[name: y].image", false),
            (
                "spec.c[name notin (x)].image",
                "spec.c[name: x].image",
                false,
            ),
            (
                "spec.c[name notin (x)].image",
                "spec.c[name: y].image",
                true,
            ),
            ("spec.c[port: 80]", "spec.c[port: \"80\"]", false),
            ("spec.c[name: x]", "spec.c[id: x]", false),
        ];
        for (a, b, want) in cases {
            assert_eq!(paths_meet(&path(a), &path(b)), want, "{a} / {b}");
            assert_eq!(paths_meet(&path(b), &path(a)), want, "{b} / {a}");
        }
    }

    #[test]
    fn within_reads_a_glob_as_every_element() {
        let image = path("spec.containers[name: *].image");
        assert!(within(&path("spec.containers[name: app].image"), &image));
        assert!(within(&path("spec.containers[name: *].image"), &image));
        assert!(!within(&path("spec.containers[name: app]"), &image));
        assert!(!within(
            &path("spec.containers[name: app].imagePullPolicy"),
            &image
        ));
    }

    #[test]
    fn walkable_refuses_a_scalar_on_the_way() {
        let rest = path("a.b.c");
        let nodes = rest.nodes();
        assert!(walkable(&json!({}), nodes));
        assert!(walkable(&json!({"a": {"x": 1}}), nodes));
        assert!(!walkable(&json!({"a": "text"}), nodes));
        assert!(!walkable(&json!("text"), nodes));
    }

    #[test]
    fn an_example_holds_the_parents_of_the_path() {
        let pod = KindPattern {
            group: Some(String::new()),
            version: Some("v1".to_string()),
            kind: Some("Pod".to_string()),
        };
        assert_eq!(
            example(
                &pod,
                &path("spec.containers[name: *].securityContext.privileged")
            ),
            json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "example"},
                "spec": {"containers": [{"name": "example", "securityContext": {}}]},
            })
        );
    }
}
