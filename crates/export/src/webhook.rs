//! The match condition that lets the API server skip sartor's webhook for
//! every object no enforced mutator would change: one CEL expression, true
//! when some mutator matches the request and would change the object.
//!
//! ```text
//!  each enforced mutator ──▶ term: its match (applyTo, match, as the MAP
//!      export's guard) && its pathTests (when told on fields) && it would
//!      change the object (when told exactly: `unchanged`)
//!  request.operation in ["CREATE", "UPDATE"] && (term || term || ...)
//! ```
//!
//! Every part of a term may only be wider than the engine's decision: a
//! part CEL cannot tell exactly is left out of it (a `namespaceSelector`,
//! which needs the Namespace a webhook's condition does not have; a
//! pathTest through a list; whether a value from a provider or a Namespace
//! would change the object), so such a mutator is decided by the rest.
//! A mutator of generated objects only is left out: it never meets an
//! admission. Every read is typed first, so the condition never errors: an
//! error would fall to the webhook's `failurePolicy`.

use std::collections::BTreeSet;
use std::fmt;

use sartor_api::{MutatorObject, PathTest, SetOperation, SourcePattern};
use sartor_engine::{ImageParts, MutatorId, System};
use sartor_location::{Condition, Path};

use crate::guard::{self, Namespace};
use crate::patch::Leaf;
use crate::unchanged::{self, Effect};
use crate::value::{self, Source};
use crate::{Reason, limits, named};

/// The name sartor's mutating webhook gives the condition
/// (`matchConditions`): the API server calls sartor only when it holds.
pub const WEBHOOK_CONDITION: &str = "sartor-may-change";

/// The operations sartor mutates on: any other is answered unchanged.
const MUTATED: &str = r#"request.operation in ["CREATE", "UPDATE"]"#;

/// What joins two terms: each term starts a line, so a condition reads
/// back into its terms ([`WebhookCondition::terms_of`]).
const OR: &str = "\n|| ";

/// The derived match condition, and how each mutator is decided in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookCondition {
    /// The terms (sorted, each once): the condition holds when one does.
    /// Empty when no mutator can meet an admission.
    pub terms: BTreeSet<String>,
    /// `None` when some mutator matches every request the rules send (the
    /// condition would be `true`) or the condition would be longer or
    /// deeper than the API server takes: then no condition is installed.
    pub expression: Option<String>,
    /// How each enforced mutator is decided, in sartor's order.
    pub mutators: Vec<(MutatorId, Decided)>,
}

/// Why no condition is installed (the rules alone decide what is sent).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Withheld {
    /// Some mutator matches every request the rules send whatever the
    /// object holds: the condition would be `true`.
    #[error(
        "a mutator is sent every object it matches whatever the object holds, with no narrower match CEL can tell"
    )]
    Unbounded,
    /// The condition would be longer or deeper than the API server takes.
    #[error("the condition would pass the API server's limits: {0}")]
    Limits(Reason),
}

/// How many mutators a condition decides each way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// [`Decided::Change`].
    pub change: usize,
    /// [`Decided::Match`].
    pub matched: usize,
    /// [`Decided::Never`].
    pub never: usize,
}

/// How far the condition decides one mutator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decided {
    /// Whether it matches and whether it would change the object.
    Change,
    /// Whether it matches only: an object it matches is sent even when it
    /// would not change it.
    Match(Undecided),
    /// Never: it matches only generated objects, which never meet an
    /// admission.
    Never,
}

/// Why whether a mutator would change an object is not in the condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Undecided {
    /// Its value comes from somewhere the API server cannot read (external
    /// data, a Namespace's label).
    Value(String),
    /// Its value conditions (`parameters.conditions`).
    Conditions,
    /// Its location or value cannot be compared exactly in CEL.
    Location,
}

impl fmt::Display for Undecided {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Undecided::Value(why) => write!(f, "its value comes from {why}"),
            Undecided::Conditions => write!(f, "it has value conditions"),
            Undecided::Location => write!(
                f,
                "whether it changes its location cannot be compared exactly in CEL"
            ),
        }
    }
}

impl fmt::Display for Decided {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Decided::Change => write!(f, "sent when it matches and would change the object"),
            Decided::Match(why) => write!(f, "sent whenever it matches: {why}"),
            Decided::Never => write!(f, "never sent: it matches only generated objects"),
        }
    }
}

impl WebhookCondition {
    /// The condition of `system`'s enforced mutators.
    pub fn of(system: &System) -> WebhookCondition {
        let mut terms = BTreeSet::new();
        let mut mutators = Vec::new();
        for mutator in system.mutators() {
            let id = mutator.id();
            if system.is_conflicted(id) {
                continue;
            }
            let (term, decided) = term(mutator.spec());
            terms.extend(term);
            mutators.push((id.clone(), decided));
        }
        let mut condition = WebhookCondition {
            expression: None,
            terms,
            mutators,
        };
        condition.expression = condition.written();
        condition
    }

    /// The condition holding when any of `terms` does.
    pub fn of_terms(terms: BTreeSet<String>) -> WebhookCondition {
        let mut condition = WebhookCondition {
            terms,
            expression: None,
            mutators: Vec::new(),
        };
        condition.expression = condition.written();
        condition
    }

    /// The terms of an expression [`WebhookCondition::of`] wrote; `None`
    /// for any other expression.
    pub fn terms_of(expression: &str) -> Option<BTreeSet<String>> {
        if expression == "false" {
            return Some(BTreeSet::new());
        }
        let inner = expression
            .strip_prefix(MUTATED)?
            .strip_prefix(" && (\n")?
            .strip_suffix("\n)")?;
        Some(inner.split(OR).map(str::to_string).collect())
    }

    /// The expression: `None` when it would be `true`, or past the API
    /// server's limits.
    fn written(&self) -> Option<String> {
        self.write().ok()
    }

    /// Why no condition is installed; `None` when one is.
    pub fn withheld(&self) -> Option<Withheld> {
        self.write().err()
    }

    fn write(&self) -> Result<String, Withheld> {
        if self.terms.contains("true") {
            return Err(Withheld::Unbounded);
        }
        if self.terms.is_empty() {
            return Ok("false".to_string());
        }
        let terms: Vec<&str> = self.terms.iter().map(String::as_str).collect();
        let expression = format!("{MUTATED} && (\n{}\n)", terms.join(OR));
        limits::check(&expression).map_err(|excess| Withheld::Limits(excess.into()))?;
        Ok(expression)
    }

    /// How many mutators are decided each way.
    pub fn tally(&self) -> Tally {
        let mut tally = Tally::default();
        for (_, decided) in &self.mutators {
            match decided {
                Decided::Change => tally.change += 1,
                Decided::Match(_) => tally.matched += 1,
                Decided::Never => tally.never += 1,
            }
        }
        tally
    }

    /// One line per mutator: `Assign/x: sent whenever it matches: ...`.
    pub fn explained(&self) -> Vec<String> {
        self.mutators
            .iter()
            .map(|(id, decided)| format!("{}: {decided}", named(id)))
            .collect()
    }
}

/// One mutator's term (`None`: it never meets an admission) and how it is
/// decided.
fn term(spec: &MutatorObject) -> (Option<String>, Decided) {
    let criteria = spec.match_criteria();
    if criteria.source == Some(SourcePattern::Generated) {
        return (None, Decided::Never);
    }
    let mut parts = Vec::new();
    if let Some(apply_to) = spec.apply_to() {
        parts.push(guard::apply_to_guard(apply_to));
    }
    parts.push(guard::criteria_guard(criteria, Namespace::Unbound));
    parts.extend(path_tests(spec.path_tests()));
    let decided = match changes(spec) {
        Ok(changes) => {
            parts.push(changes);
            Decided::Change
        }
        Err(why) => Decided::Match(why),
    };
    let parts: Vec<String> = parts.into_iter().filter(|part| part != "true").collect();
    let term = match parts.as_slice() {
        [] => "true".to_string(),
        [one] => one.clone(),
        _ => format!("({})", parts.join(" && ")),
    };
    (Some(term), decided)
}

/// The pathTests CEL can tell, each as "it may pass": a test is left out
/// when it goes through a glob or `notin`.
fn path_tests(tests: &[PathTest]) -> Vec<String> {
    tests
        .iter()
        .filter_map(|test| {
            let path = Path::parse(&test.sub_path).ok()?;
            Some(match test.condition {
                Condition::MustExist => format!("!({})", unchanged::absent(path.nodes())?),
                Condition::MustNotExist => format!("!({})", unchanged::present(path.nodes())?),
            })
        })
        .collect()
}

/// "It would change the object", as CEL, or why that cannot be told.
fn changes(spec: &MutatorObject) -> Result<String, Undecided> {
    if !spec.conditions().is_empty() {
        return Err(Undecided::Conditions);
    }
    let (location, effect) = match spec {
        MutatorObject::Assign(assign) => {
            let effect = match value::source(&assign.spec.parameters.assign) {
                Ok(Source::Set { value, when: None }) => Effect::Write(Leaf::Value(value)),
                Ok(Source::Set { when: Some(_), .. }) => {
                    return Err(Undecided::Value("a Namespace".to_string()));
                }
                Ok(Source::Remove) => Effect::Remove,
                Err(reason) => return Err(Undecided::Value(reason.to_string())),
            };
            (&assign.spec.location, effect)
        }
        MutatorObject::AssignImage(image) => {
            let parameters = &image.spec.parameters;
            let parts = ImageParts {
                domain: parameters.assign_domain.clone(),
                path: parameters.assign_path.clone(),
                tag: parameters.assign_tag.clone(),
            };
            (&image.spec.location, Effect::Write(Leaf::Image(parts)))
        }
        MutatorObject::ModifySet(set) => {
            let parameters = &set.spec.parameters;
            let values = parameters.values.from_list.clone();
            values
                .iter()
                .try_for_each(value::json_safe)
                .map_err(|_| Undecided::Location)?;
            let leaf = match parameters.operation {
                SetOperation::Merge => Leaf::Merge(values),
                SetOperation::Prune => Leaf::Prune(values),
            };
            (&set.spec.location, Effect::Write(leaf))
        }
        MutatorObject::AssignMetadata(meta) => {
            let assign = &meta.spec.parameters.assign;
            if assign.external_data.is_some() {
                return Err(Undecided::Value("external data".to_string()));
            }
            // The key decides, whatever the value: added only when
            // missing, removed only when there.
            let path = Path::parse(&meta.spec.location).map_err(|_| Undecided::Location)?;
            let kept = match assign.remove == Some(true) {
                true => unchanged::absent(path.nodes()),
                false => unchanged::present(path.nodes()),
            };
            return Ok(format!("!({})", kept.ok_or(Undecided::Location)?));
        }
    };
    let path = Path::parse(location).map_err(|_| Undecided::Location)?;
    let unchanged = unchanged::unchanged(path.nodes(), &effect).ok_or(Undecided::Location)?;
    Ok(format!("!({unchanged})"))
}

#[cfg(test)]
mod tests;
