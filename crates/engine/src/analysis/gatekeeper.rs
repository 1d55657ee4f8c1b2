//! Where Gatekeeper v3.23.1 would treat a mutator of its apiVersion
//! (`mutations.gatekeeper.sh/...`) differently from sartor, for an admin
//! moving a set from one to the other.
//!
//! ```text
//!  System + the Gatekeeper-apiVersion objects in it ──differences──▶ what
//!    Gatekeeper would do otherwise at admission, or refuse (warnings)
//!  a Gatekeeper-apiVersion document sartor refuses ──refusal_notes──▶ what
//!    Gatekeeper would have done with it instead (notes beside the error)
//! ```
//!
//! The classes are those a differential test against Gatekeeper's own
//! mutation library found, and each is reported only where its pattern holds:
//! sartor keeps its behaviour in all of them (docs/gatekeeper-differences.md).
//! Mutators with sartor's apiVersion get none of these.

use std::collections::HashMap;
use std::fmt;

use sartor_api::{
    GATEKEEPER_GROUP, Invalid, MutatorKind, MutatorObject, PathTest, SelectorOperator,
    SetOperation, api_group, parse_mutator,
};
use sartor_location::{Condition, KeyValue, Node, Path, PathTestError};
use serde_json::Value;

use super::{Facts, Severity, paths_meet, within};
use crate::labels::SelectorError;
use crate::matching::MatchCompileError;
use crate::mutator::{Effect, Mutator, MutatorId, Problem};
use crate::system::System;

/// The Gatekeeper release the classes were checked against.
pub const GATEKEEPER_VERSION: &str = "v3.23.1";

/// Integers above this (2^53) have no exact float64.
const FLOAT_EXACT: u64 = 1 << 53;

/// One place where Gatekeeper would behave differently.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// Which difference.
    pub class: Class,
    /// The mutators involved; the first is the one it is about.
    pub mutators: Vec<MutatorId>,
    /// What Gatekeeper would do, and what sartor does.
    pub message: String,
}

/// The differences, each a class of the differential test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    /// An Assign with a glob sets one shared map or list in every element,
    /// and another mutator writes below one element.
    GlobAliasing,
    /// A ModifySet merges a value with a number that an Assign has put in
    /// the list: float64 against int64, so it is added twice.
    NumberTypes,
    /// An Assign value holds an integer beyond 2^53, which float64 rounds.
    BigIntegers,
    /// A MustNotExist pathTest listed before a MustExist on its ancestor:
    /// Gatekeeper refuses the mutator.
    PathTestsParentFirst,
    /// A MustExist pathTest listed before a MustNotExist on its parent:
    /// Gatekeeper accepts a mutator that never applies.
    PathTestsChildFirst,
    /// A pathTest without a condition: Gatekeeper accepts a mutator that
    /// never applies.
    PathTestWithoutCondition,
    /// A label selector Kubernetes refuses: Gatekeeper accepts the mutator
    /// and fails every admission it is asked to match.
    MalformedSelector,
    /// Fields the CRD does not have: the API server prunes them.
    UnknownFields,
    /// A `match.scope` other than `*`, `Cluster` and `Namespaced`: Gatekeeper
    /// reads it as `*`.
    MatchScope,
}

impl Class {
    /// Every class, in order.
    pub const ALL: [Class; 9] = [
        Class::GlobAliasing,
        Class::NumberTypes,
        Class::BigIntegers,
        Class::PathTestsParentFirst,
        Class::PathTestsChildFirst,
        Class::PathTestWithoutCondition,
        Class::MalformedSelector,
        Class::UnknownFields,
        Class::MatchScope,
    ];

    /// Its name in reports: `glob-aliasing`, `number-types`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            Class::GlobAliasing => "glob-aliasing",
            Class::NumberTypes => "number-types",
            Class::BigIntegers => "big-integers",
            Class::PathTestsParentFirst => "pathtests-parent-first",
            Class::PathTestsChildFirst => "pathtests-child-first",
            Class::PathTestWithoutCondition => "pathtest-without-condition",
            Class::MalformedSelector => "malformed-selector",
            Class::UnknownFields => "unknown-fields",
            Class::MatchScope => "match-scope",
        }
    }

    /// A warning where sartor enforces something Gatekeeper would not, or
    /// does something else at admission; a note beside the error sartor
    /// already reports where it refuses what Gatekeeper accepts.
    pub fn severity(self) -> Severity {
        match self {
            Class::GlobAliasing
            | Class::NumberTypes
            | Class::BigIntegers
            | Class::PathTestsParentFirst => Severity::Warning,
            Class::PathTestsChildFirst
            | Class::PathTestWithoutCondition
            | Class::MalformedSelector
            | Class::UnknownFields
            | Class::MatchScope => Severity::Info,
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether a document has a Gatekeeper apiVersion (`mutations.gatekeeper.sh/...`).
pub fn is_gatekeeper(document: &Value) -> bool {
    api_group(document) == Some(GATEKEEPER_GROUP)
}

// === differences of an accepted set ===

/// The differences among the enforced mutators of `system` that were read
/// with a Gatekeeper apiVersion (`gatekeeper`: their objects as read; the
/// others are ignored, and so are the objects not in `system`).
pub fn differences(system: &System, gatekeeper: &[&MutatorObject]) -> Vec<Difference> {
    let read: Vec<(&MutatorObject, Facts<'_>)> = gatekeeper
        .iter()
        .filter_map(|object| {
            let id = MutatorId::new(object.kind(), object.name());
            let mutator = system.get(&id).filter(|_| !system.is_conflicted(&id))?;
            Some((*object, Facts::of(mutator)))
        })
        .collect();
    let mut found = Vec::new();
    for (object, fact) in &read {
        found.extend(big_integers(object, fact));
        found.extend(parent_first(object, fact));
        for (other, theirs) in &read {
            if theirs.id() != fact.id() {
                found.extend(glob_aliasing(object, fact, theirs));
                found.extend(number_types(object, fact, other, theirs));
            }
        }
    }
    found.sort_by(|a, b| (a.class, &a.mutators).cmp(&(b.class, &b.mutators)));
    found
}

/// A glob in an Assign's location gives every element it matches one shared
/// map or list (Gatekeeper's setter stores its one value in each), and
/// `other` writes below the element it names at a glob's position: in
/// Gatekeeper, every element shows that write.
///
/// A ModifySet under a glob is left out: it copies the list it creates into
/// each element, and what it appends to a list that is there can only be
/// written below through a keyed-list location, a schema conflict with a
/// set in Gatekeeper as in sartor.
fn glob_aliasing(
    object: &MutatorObject,
    fact: &Facts<'_>,
    other: &Facts<'_>,
) -> Option<Difference> {
    let location = fact.location();
    let shared = matches!(
        (object, fact.effect),
        (MutatorObject::Assign(_), Effect::Replace(Some(value))) if value.is_object() || value.is_array()
    );
    let below = other.location();
    // A glob where the other names one element: with globs everywhere the
    // glob is, it writes below every element, as sartor does.
    let specific = location
        .nodes()
        .iter()
        .zip(below.nodes())
        .any(|(mine, theirs)| is_glob(mine) && !is_glob(theirs));
    if !shared
        || below.len() <= location.len()
        || !within(below, location)
        || !specific
        || fact.overlap(other).is_none()
    {
        return None;
    }
    let last_glob = location.nodes().iter().rposition(is_glob)?;
    let matched = location.prefix(last_glob + 1)?;
    Some(Difference {
        class: Class::GlobAliasing,
        mutators: vec![fact.id().clone(), other.id().clone()],
        message: format!(
            "Gatekeeper {GATEKEEPER_VERSION} would store one shared copy of its value at {location} in every element {matched} matches, so what {} writes at {below} would show in all of them; sartor gives each element its own copy",
            other.id()
        ),
    })
}

fn is_glob(node: &Node) -> bool {
    matches!(node, Node::List(selector) if selector.key_value == KeyValue::Glob)
}

/// A ModifySet merge of a value with a number, into a list where an Assign
/// puts that same value: Gatekeeper reads the Assign's numbers as float64 and
/// the ModifySet's as int64, compares them type-strictly and adds it again.
fn number_types(
    object: &MutatorObject,
    fact: &Facts<'_>,
    other: &MutatorObject,
    theirs: &Facts<'_>,
) -> Option<Difference> {
    let (MutatorObject::ModifySet(set), MutatorObject::Assign(_), Effect::Replace(Some(value))) =
        (object, other, theirs.effect)
    else {
        return None;
    };
    if set.spec.parameters.operation != SetOperation::Merge {
        return None;
    }
    let (list, assigned) = (fact.location(), theirs.location());
    if !paths_meet(list, assigned) || fact.overlap(theirs).is_none() {
        return None;
    }
    // What the Assign leaves in the list: the elements of the list inside
    // its value, or the element it sets.
    let elements: Vec<&Value> = if assigned.len() <= list.len() {
        let rest = list.nodes().get(assigned.len()..).unwrap_or_default();
        landing(value, rest)
            .into_iter()
            .filter_map(Value::as_array)
            .flatten()
            .collect()
    } else if assigned.len() == list.len() + 1
        && matches!(assigned.nodes().last(), Some(Node::List(_)))
    {
        vec![value]
    } else {
        return None;
    };
    let twice =
        set.spec.parameters.values.from_list.iter().find(|v| {
            has_number(v) && elements.iter().any(|e| crate::condition::json_equal(e, v))
        })?;
    Some(Difference {
        class: Class::NumberTypes,
        mutators: vec![fact.id().clone(), theirs.id().clone()],
        message: format!(
            "Gatekeeper {GATEKEEPER_VERSION} would merge {twice} into {list} a second time where {} has put it: it reads Assign values' numbers as float64 and ModifySet values' as int64 and compares them type-strictly; sartor adds it once",
            theirs.id()
        ),
    })
}

/// The values at `rest` inside `value` (every element a glob selects).
fn landing<'v>(value: &'v Value, rest: &[Node]) -> Vec<&'v Value> {
    let Some((node, rest)) = rest.split_first() else {
        return vec![value];
    };
    match (node, value) {
        (Node::Field(name), Value::Object(fields)) => fields
            .get(name)
            .map(|child| landing(child, rest))
            .unwrap_or_default(),
        (Node::List(selector), Value::Array(elements)) => elements
            .iter()
            .filter(|element| {
                let key = element.get(&selector.key_field);
                match (&selector.key_value, key) {
                    (KeyValue::Glob, _) => true,
                    (KeyValue::String(s), Some(Value::String(k))) => s == k,
                    (KeyValue::Integer(i), Some(Value::Number(n))) => n.as_i64() == Some(*i),
                    _ => false,
                }
            })
            .flat_map(|element| landing(element, rest))
            .collect(),
        _ => Vec::new(),
    }
}

fn has_number(value: &Value) -> bool {
    match value {
        Value::Number(_) => true,
        Value::Array(items) => items.iter().any(has_number),
        Value::Object(fields) => fields.values().any(has_number),
        _ => false,
    }
}

/// An Assign value or ModifySet values holding integers beyond 2^53:
/// Gatekeeper decodes the first as float64 and the second through float64
/// (then keeps whole numbers as int64), which rounds them.
fn big_integers(object: &MutatorObject, fact: &Facts<'_>) -> Option<Difference> {
    let mut big = Vec::new();
    let (what, decoding) = match (object, fact.effect) {
        (MutatorObject::Assign(_), Effect::Replace(Some(value))) => {
            beyond_float(value, &mut big);
            ("its value", "it decodes Assign values as float64")
        }
        (MutatorObject::ModifySet(set), _) => {
            for value in &set.spec.parameters.values.from_list {
                beyond_float(value, &mut big);
            }
            ("its values", "it decodes ModifySet values through float64")
        }
        _ => return None,
    };
    let (exact, rounded) = big.first()?;
    let more = match big.len() {
        1 => String::new(),
        2 => " (and 1 more such integer)".to_string(),
        n => format!(" (and {} more such integers)", n - 1),
    };
    Some(Difference {
        class: Class::BigIntegers,
        mutators: vec![fact.id().clone()],
        message: format!(
            "Gatekeeper {GATEKEEPER_VERSION} would store the integer {exact} of {what} at {} as {rounded}{more}: {decoding}, exact only up to 2^53; sartor stores it exactly",
            fact.location()
        ),
    })
}

/// The integers beyond 2^53 in `value`, each with the float64 Gatekeeper
/// would make of it, written as an integer.
fn beyond_float(value: &Value, big: &mut Vec<(String, String)>) {
    match value {
        Value::Number(n) => {
            let rounded = if let Some(u) = n.as_u64() {
                (u > FLOAT_EXACT).then_some(u as f64)
            } else if let Some(i) = n.as_i64() {
                (i.unsigned_abs() > FLOAT_EXACT).then_some(i as f64)
            } else {
                None
            };
            if let Some(rounded) = rounded {
                big.push((n.to_string(), format!("{rounded:.0}")));
            }
        }
        Value::Array(items) => items.iter().for_each(|item| beyond_float(item, big)),
        Value::Object(fields) => fields.values().for_each(|child| beyond_float(child, big)),
        _ => {}
    }
}

/// pathTests that sartor accepts and Gatekeeper refuses, because it compares
/// their positions in the list rather than their depths.
fn parent_first(object: &MutatorObject, fact: &Facts<'_>) -> Option<Difference> {
    let tests = parsed(path_tests(object))?;
    let refusal = tester_refusal(&tests)?;
    let lowest_forbidden = tests.iter().find(|(_, c)| *c == Condition::MustNotExist)?;
    let highest_required = tests
        .iter()
        .rev()
        .find(|(_, c)| *c == Condition::MustExist)?;
    Some(Difference {
        class: Class::PathTestsParentFirst,
        mutators: vec![fact.id().clone()],
        message: format!(
            "Gatekeeper {GATEKEEPER_VERSION} would refuse this mutator ({refusal:?}): it compares pathTests by their positions in the list, and MustNotExist on {} comes before MustExist on its ancestor {}; sartor accepts it and enforces both",
            lowest_forbidden.0, highest_required.0
        ),
    })
}

fn path_tests(object: &MutatorObject) -> &[PathTest] {
    match object {
        MutatorObject::Assign(m) => &m.spec.parameters.path_tests,
        MutatorObject::ModifySet(m) => &m.spec.parameters.path_tests,
        MutatorObject::AssignImage(m) => &m.spec.parameters.path_tests,
        MutatorObject::AssignMetadata(_) => &[],
    }
}

/// The pathTests with their subPaths parsed, in order; `None` when one does
/// not parse.
fn parsed(tests: &[PathTest]) -> Option<Vec<(Path, Condition)>> {
    tests
        .iter()
        .map(|t| Path::parse(&t.sub_path).ok().map(|p| (p, t.condition)))
        .collect()
}

/// Gatekeeper v3.23.1's conflict checks on pathTests (`path/tester.New`),
/// to the letter: its error when it refuses them. It indexes subPaths by
/// depth but tests "a MustExist below a MustNotExist" on list positions
/// (the highest MustExist position against the lowest MustNotExist one), and
/// looks the paths for its message up by position in the depth index, so
/// they are mostly `<nil>`.
fn tester_refusal(tests: &[(Path, Condition)]) -> Option<String> {
    let depth = |path: &Path| path.len().saturating_sub(1);
    let mut conditions: HashMap<usize, Condition> = HashMap::new();
    let mut paths: HashMap<usize, &Path> = HashMap::new();
    let (mut lowest_forbidden, mut highest_required) = (usize::MAX, 0);
    for (position, (path, condition)) in tests.iter().enumerate() {
        conditions.insert(depth(path), *condition);
        paths.insert(depth(path), path);
        match condition {
            Condition::MustNotExist => lowest_forbidden = lowest_forbidden.min(position),
            Condition::MustExist => highest_required = highest_required.max(position),
        }
    }
    let quoted =
        |path: Option<&&Path>| path.map_or("<nil>".to_string(), |p| format!("{:?}", p.to_string()));
    const CONFLICT: &str = "conflicting path test conditions";
    if let Some((path, _)) = tests
        .iter()
        .find(|(path, condition)| conditions.get(&depth(path)) != Some(condition))
    {
        return Some(format!(
            "{CONFLICT}: path {} is marked both MustExist and MustNotExist",
            quoted(Some(&path))
        ));
    }
    (highest_required > lowest_forbidden).then(|| {
        format!(
            "{CONFLICT}: path {} is marked MustExist but parent {} MustNotExist",
            quoted(paths.get(&highest_required)),
            quoted(paths.get(&lowest_forbidden))
        )
    })
}

// === documents sartor refuses ===

/// Why sartor refuses a document.
enum Refusal {
    /// It is not a valid mutator.
    Parse(Invalid),
    /// It is one, but does not compile.
    Compile(Box<MutatorObject>, Problem),
}

/// What Gatekeeper would have done with a Gatekeeper-apiVersion `document`
/// that sartor refuses (it is not a valid mutator, or does not compile):
/// one note per leniency of Gatekeeper's it needs, when with those it would
/// be accepted; nothing when Gatekeeper would refuse it too, or when it has
/// another apiVersion or loads.
pub fn refusal_notes(document: &Value) -> Vec<Difference> {
    let id = document
        .get("kind")
        .and_then(Value::as_str)
        .and_then(|kind| kind.parse::<MutatorKind>().ok())
        .zip(
            document
                .get("metadata")
                .and_then(|m| m.get("name"))
                .and_then(Value::as_str),
        )
        .map(|(kind, name)| MutatorId::new(kind, name));
    let Some(id) = id.filter(|_| is_gatekeeper(document)) else {
        return Vec::new();
    };
    let mut document = document.clone();
    let mut notes: Vec<Difference> = Vec::new();
    // Each leniency at most once; after them the document loads, or
    // Gatekeeper would refuse it too.
    for _ in 0..=Class::ALL.len() {
        let refusal = match parse_mutator(&document) {
            Err(error) => Refusal::Parse(*error.problem),
            Ok(object) => match Mutator::compile(&object) {
                Ok(_) => return notes,
                Err(error) => Refusal::Compile(Box::new(object), *error.problem),
            },
        };
        let Some((class, message, repaired)) = lenient(&document, &refusal) else {
            return Vec::new();
        };
        if notes.iter().any(|n| n.class == class) {
            return Vec::new();
        }
        notes.push(Difference {
            class,
            mutators: vec![id.clone()],
            message,
        });
        document = repaired;
    }
    Vec::new()
}

/// The leniency of Gatekeeper's behind `refusal`: its class, the note, and
/// the document as Gatekeeper would go on with it.
fn lenient(document: &Value, refusal: &Refusal) -> Option<(Class, String, Value)> {
    match refusal {
        Refusal::Parse(Invalid::Field { path, .. }) => unknown_fields(document)
            .or_else(|| without_condition(document, path))
            .or_else(|| unknown_operator(document, path))
            .or_else(|| unknown_scope(document, path)),
        Refusal::Compile(
            object,
            Problem::PathTests(PathTestError::ChildOfMissing { child, parent }),
        ) => {
            let tests = parsed(path_tests(object))?;
            if tester_refusal(&tests).is_some() {
                return None;
            }
            let repaired = without(document, &["spec", "parameters", "pathTests"]);
            Some((
                Class::PathTestsChildFirst,
                format!(
                    "Gatekeeper {GATEKEEPER_VERSION} would accept these pathTests, since MustExist on {child} is listed before MustNotExist on its parent {parent} (it compares positions in the list), and the mutator would never apply; sartor refuses it"
                ),
                repaired,
            ))
        }
        Refusal::Compile(_, Problem::Match(MatchCompileError::Selector { field, source })) => {
            let what = match source {
                SelectorError::MissingValues { key, operator } => {
                    format!("{operator} on key {key:?} without values")
                }
                SelectorError::UnexpectedValues { key, operator, .. } => {
                    format!("{operator} on key {key:?} with values")
                }
                _ => return None,
            };
            Some(malformed_selector(document, field, &what))
        }
        _ => None,
    }
}

/// The note for a label selector Kubernetes refuses, and the document
/// without it.
fn malformed_selector(document: &Value, field: &str, what: &str) -> (Class, String, Value) {
    let repaired = without(document, &["spec", "match", field]);
    (
        Class::MalformedSelector,
        format!(
            "Gatekeeper {GATEKEEPER_VERSION} would accept this match.{field} ({what}) and then fail every admission of an object it is asked to match with a match error; sartor refuses it"
        ),
        repaired,
    )
}

/// Fields the CRD does not have, which the API server prunes when the
/// object is applied without strict field validation.
fn unknown_fields(document: &Value) -> Option<(Class, String, Value)> {
    let kind: MutatorKind = document.get("kind")?.as_str()?.parse().ok()?;
    let crd = serde_json::to_value(sartor_api::crd::crd(kind)).ok()?;
    let schema = crd.pointer("/spec/versions/0/schema/openAPIV3Schema")?;
    let mut repaired = document.clone();
    let mut pruned = Vec::new();
    if let Value::Object(fields) = &mut repaired {
        let properties = schema.get("properties").and_then(Value::as_object);
        fields.retain(|key, _| {
            let known = ["apiVersion", "kind", "metadata"].contains(&key.as_str())
                || properties.is_some_and(|p| p.contains_key(key));
            if !known {
                pruned.push(key.clone());
            }
            known
        });
        for (key, child) in fields.iter_mut() {
            if let Some(schema) = properties.and_then(|p| p.get(key)) {
                prune(child, schema, key, &mut pruned);
            }
        }
    }
    if pruned.is_empty() {
        return None;
    }
    Some((
        Class::UnknownFields,
        format!(
            "with Gatekeeper {GATEKEEPER_VERSION}, the API server would prune {} (not in the CRD) unless the object is applied with strict field validation, and the mutator would work without {}; sartor refuses it, as kubectl apply's default (strict) field validation does",
            pruned.join(", "),
            if pruned.len() == 1 { "it" } else { "them" }
        ),
        repaired,
    ))
}

/// Removes below `value` what `schema` (an OpenAPI v3 structural schema)
/// does not declare, as the API server does, naming each at `at`.
fn prune(value: &mut Value, schema: &Value, at: &str, pruned: &mut Vec<String>) {
    if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
        return;
    }
    match value {
        Value::Object(fields) => {
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                fields.retain(|key, _| {
                    let known = properties.contains_key(key);
                    if !known {
                        pruned.push(format!("{at}.{key}"));
                    }
                    known
                });
                for (key, child) in fields.iter_mut() {
                    if let Some(schema) = properties.get(key) {
                        prune(child, schema, &format!("{at}.{key}"), pruned);
                    }
                }
            } else if let Some(values) =
                schema.get("additionalProperties").filter(|s| s.is_object())
            {
                for (key, child) in fields.iter_mut() {
                    prune(child, values, &format!("{at}.{key}"), pruned);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                for (index, child) in items.iter_mut().enumerate() {
                    prune(child, item, &format!("{at}[{index}]"), pruned);
                }
            }
        }
        _ => {}
    }
}

/// pathTests without a condition, where the error is: Gatekeeper accepts
/// them, and a mutator with one never applies.
fn without_condition(document: &Value, at: &str) -> Option<(Class, String, Value)> {
    let tests = document.pointer("/spec/parameters/pathTests")?.as_array()?;
    let missing: Vec<usize> = tests
        .iter()
        .enumerate()
        .filter(|(_, test)| {
            test.as_object()
                .is_some_and(|t| !t.contains_key("condition"))
        })
        .map(|(index, _)| index)
        .collect();
    if !missing
        .iter()
        .any(|index| at == format!("spec.parameters.pathTests[{index}]"))
    {
        return None;
    }
    let mut repaired = document.clone();
    if let Some(Value::Array(tests)) = repaired.pointer_mut("/spec/parameters/pathTests") {
        let mut index = 0;
        tests.retain(|_| {
            index += 1;
            !missing.contains(&(index - 1))
        });
    }
    let named: Vec<String> = missing
        .iter()
        .map(|index| format!("spec.parameters.pathTests[{index}]"))
        .collect();
    Some((
        Class::PathTestWithoutCondition,
        format!(
            "Gatekeeper {GATEKEEPER_VERSION} would accept {} without a condition, and the mutator would never apply; sartor refuses it",
            named.join(", ")
        ),
        repaired,
    ))
}

/// A matchExpressions operator that is none of Kubernetes', where the error
/// is.
fn unknown_operator(document: &Value, at: &str) -> Option<(Class, String, Value)> {
    let selectors = document.pointer("/spec/match")?.as_object()?;
    for field in ["labelSelector", "namespaceSelector"] {
        let Some(expressions) = selectors
            .get(field)
            .and_then(|s| s.get("matchExpressions"))
            .and_then(Value::as_array)
        else {
            continue;
        };
        for (index, expression) in expressions.iter().enumerate() {
            let Some(operator) = expression.get("operator").filter(|o| o.is_string()) else {
                continue;
            };
            if at == format!("spec.match.{field}.matchExpressions[{index}].operator")
                && serde_json::from_value::<SelectorOperator>(operator.clone()).is_err()
            {
                return Some(malformed_selector(
                    document,
                    field,
                    &format!("the unknown operator {operator}"),
                ));
            }
        }
    }
    None
}

/// A `match.scope` that is none of `*`, `Cluster` and `Namespaced`, where the
/// error is: Gatekeeper's CRD takes any string and its matcher reads one it
/// does not know as `*` (found by tests/differential).
fn unknown_scope(document: &Value, at: &str) -> Option<(Class, String, Value)> {
    let scope = document.pointer("/spec/match/scope")?.as_str()?;
    if at != "spec.match.scope" || ["*", "Cluster", "Namespaced"].contains(&scope) {
        return None;
    }
    let repaired = without(document, &["spec", "match", "scope"]);
    Some((
        Class::MatchScope,
        format!(
            "Gatekeeper {GATEKEEPER_VERSION} would accept match.scope {scope:?} and read it as \"*\" (cluster-scoped and namespaced objects alike); sartor refuses it"
        ),
        repaired,
    ))
}

/// `document` without the field at `path` (object keys), if it is there:
/// the repaired document a note offers.
fn without(document: &Value, path: &[&str]) -> Value {
    let mut repaired = document.clone();
    let Some((last, parents)) = path.split_last() else {
        return repaired;
    };
    let mut at = &mut repaired;
    for key in parents {
        match at.get_mut(*key) {
            Some(child) => at = child,
            None => return repaired,
        }
    }
    if let Value::Object(fields) = at {
        fields.remove(*last);
    }
    repaired
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use serde_json::json;

    use super::*;

    const GK: &str = "mutations.gatekeeper.sh/v1";

    fn pods() -> Value {
        json!([{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}])
    }

    fn assign(name: &str, location: &str, value: Value) -> Value {
        json!({"apiVersion": GK, "kind": "Assign", "metadata": {"name": name},
               "spec": {"applyTo": pods(), "location": location,
                        "parameters": {"assign": {"value": value}}}})
    }

    fn modify_set(name: &str, location: &str, values: Value) -> Value {
        json!({"apiVersion": GK, "kind": "ModifySet", "metadata": {"name": name},
               "spec": {"applyTo": pods(), "location": location,
                        "parameters": {"operation": "merge", "values": {"fromList": values}}}})
    }

    /// The differences among `documents` (all read as Gatekeeper's), as
    /// `class: message` lines.
    fn differ(documents: &[Value]) -> Vec<String> {
        let objects: Vec<MutatorObject> = documents
            .iter()
            .map(|d| parse_mutator(d).unwrap())
            .collect();
        let mut system = System::new();
        for object in &objects {
            system.upsert(Mutator::compile(object).unwrap());
        }
        let read: Vec<&MutatorObject> = objects.iter().collect();
        differences(&system, &read)
            .into_iter()
            .map(|d| format!("{}: {}", d.class, d.message))
            .collect()
    }

    fn notes(document: &Value) -> Vec<String> {
        refusal_notes(document)
            .into_iter()
            .map(|d| format!("{}: {}", d.class, d.message))
            .collect()
    }

    #[test]
    fn a_glob_assigning_a_map_aliases_what_another_writes_below_one_element() {
        let glob = assign("a", "spec.containers[name: *].securityContext", json!({}));
        let below = assign(
            "b",
            "spec.containers[name: app].securityContext.privileged",
            json!(false),
        );
        assert_eq!(
            differ(&[glob.clone(), below]),
            [
                "glob-aliasing: Gatekeeper v3.23.1 would store one shared copy of its value at spec.containers[name: *].securityContext in every element spec.containers[name: *] matches, so what Assign b writes at spec.containers[name: app].securityContext.privileged would show in all of them; sartor gives each element its own copy"
            ]
        );
        // Near misses: a scalar value; a glob below (every element gets it
        // either way); a sibling field; another kind.
        let scalar = assign("a", "spec.containers[name: *].securityContext", json!("x"));
        let every = assign(
            "b",
            "spec.containers[name: *].securityContext.privileged",
            json!(false),
        );
        let sibling = assign("b", "spec.containers[name: app].image", json!("x"));
        let mut node = assign(
            "b",
            "spec.containers[name: app].securityContext.privileged",
            json!(false),
        );
        node["spec"]["applyTo"][0]["kinds"] = json!(["Node"]);
        assert!(differ(&[scalar, every.clone()]).is_empty());
        assert!(differ(&[glob.clone(), every]).is_empty());
        assert!(differ(&[glob.clone(), sibling]).is_empty());
        assert!(differ(&[glob, node]).is_empty());
    }

    #[test]
    fn a_merge_below_a_shared_map_shows_in_every_element() {
        let glob = assign(
            "a",
            "spec.containers[name: *].securityContext",
            json!({"capabilities": {"add": ["NET_RAW"]}}),
        );
        let merge = modify_set(
            "b",
            "spec.containers[name: app].securityContext.capabilities.add",
            json!(["NET_ADMIN"]),
        );
        assert_eq!(
            differ(&[glob, merge]),
            [
                "glob-aliasing: Gatekeeper v3.23.1 would store one shared copy of its value at spec.containers[name: *].securityContext in every element spec.containers[name: *] matches, so what ModifySet b writes at spec.containers[name: app].securityContext.capabilities.add would show in all of them; sartor gives each element its own copy"
            ]
        );
        // A ModifySet under a glob copies the list into each element; what
        // it appends can only be reached through a keyed list, a conflict.
        let set = modify_set(
            "env",
            "spec.containers[name: *].env",
            json!([{"name": "A", "value": "1"}]),
        );
        let below = assign(
            "b",
            "spec.containers[name: app].env[name: A].value",
            json!("2"),
        );
        assert!(differ(&[set, below]).is_empty());
    }

    #[test]
    fn a_merge_of_what_an_assign_put_with_numbers_is_added_twice() {
        let toleration = json!({"key": "k", "operator": "Exists", "tolerationSeconds": 300});
        let put = assign("put", "spec.tolerations", json!([toleration.clone()]));
        let merge = modify_set("merge", "spec.tolerations", json!([toleration.clone()]));
        assert_eq!(
            differ(&[put.clone(), merge]),
            [
                r#"number-types: Gatekeeper v3.23.1 would merge {"key":"k","operator":"Exists","tolerationSeconds":300} into spec.tolerations a second time where Assign put has put it: it reads Assign values' numbers as float64 and ModifySet values' as int64 and compares them type-strictly; sartor adds it once"#
            ]
        );
        // An ancestor holding the list counts too.
        let spec = assign("put", "spec", json!({"tolerations": [toleration.clone()]}));
        let merge = modify_set("merge", "spec.tolerations", json!([toleration]));
        assert_eq!(differ(&[spec, merge]).len(), 1);
        // Near misses: no number; another value.
        let plain = json!({"key": "k", "operator": "Exists"});
        let put = assign("put", "spec.tolerations", json!([plain.clone()]));
        let merge = modify_set("merge", "spec.tolerations", json!([plain]));
        assert!(differ(&[put, merge]).is_empty());
        let put = assign(
            "put",
            "spec.tolerations",
            json!([{"key": "k", "tolerationSeconds": 300}]),
        );
        let merge = modify_set(
            "merge",
            "spec.tolerations",
            json!([{"key": "j", "tolerationSeconds": 300}]),
        );
        assert!(differ(&[put, merge]).is_empty());
    }

    #[test]
    fn integers_beyond_2_53_are_rounded_by_float64() {
        let big = assign("big", "spec.x", json!({"n": 9_007_199_254_740_993_u64}));
        assert_eq!(
            differ(&[big]),
            [
                "big-integers: Gatekeeper v3.23.1 would store the integer 9007199254740993 of its value at spec.x as 9007199254740992: it decodes Assign values as float64, exact only up to 2^53; sartor stores it exactly"
            ]
        );
        assert_eq!(
            differ(&[modify_set(
                "bigger",
                "spec.tags",
                json!([1, 9_007_199_254_740_995_u64])
            )]),
            [
                "big-integers: Gatekeeper v3.23.1 would store the integer 9007199254740995 of its values at spec.tags as 9007199254740996: it decodes ModifySet values through float64, exact only up to 2^53; sartor stores it exactly"
            ]
        );
        assert!(differ(&[assign("exact", "spec.x", json!(9_007_199_254_740_992_u64))]).is_empty());
        assert!(
            differ(&[assign(
                "negative",
                "spec.x",
                json!(-9_007_199_254_740_992_i64)
            )])
            .is_empty()
        );
    }

    #[test]
    fn a_forbidden_child_listed_before_its_required_ancestor_is_refused_by_gatekeeper() {
        let mut tested = assign(
            "t",
            "spec.containers[name: app].securityContext.runAsNonRoot",
            json!(true),
        );
        tested["spec"]["parameters"]["pathTests"] = json!([
            {"subPath": "spec.containers[name: app].securityContext.runAsNonRoot", "condition": "MustNotExist"},
            {"subPath": "spec.containers[name: app]", "condition": "MustExist"},
        ]);
        assert_eq!(
            differ(&[tested.clone()]),
            [
                r#"pathtests-parent-first: Gatekeeper v3.23.1 would refuse this mutator ("conflicting path test conditions: path <nil> is marked MustExist but parent <nil> MustNotExist"): it compares pathTests by their positions in the list, and MustNotExist on spec.containers[name: app].securityContext.runAsNonRoot comes before MustExist on its ancestor spec.containers[name: app]; sartor accepts it and enforces both"#
            ]
        );
        // The other order: both accept it.
        let tests = tested["spec"]["parameters"]["pathTests"]
            .as_array()
            .unwrap()
            .clone();
        tested["spec"]["parameters"]["pathTests"] = json!([tests[1], tests[0]]);
        assert!(differ(&[tested]).is_empty());
    }

    #[test]
    fn gatekeepers_tester_looks_paths_up_by_position_in_the_depth_index() {
        let test = |p: &str, c| (Path::parse(p).unwrap(), c);
        use Condition::{MustExist, MustNotExist};
        // Position 1 is depth 1 (`spec.a`): the message names it.
        assert_eq!(
            tester_refusal(&[test("spec.a.b", MustNotExist), test("spec.a", MustExist)]).unwrap(),
            r#"conflicting path test conditions: path "spec.a" is marked MustExist but parent <nil> MustNotExist"#
        );
        assert_eq!(
            tester_refusal(&[test("spec.a", MustExist), test("spec.a.b", MustNotExist)]),
            None
        );
        assert_eq!(
            tester_refusal(&[test("spec.a", MustExist), test("spec.a", MustNotExist)]).unwrap(),
            r#"conflicting path test conditions: path "spec.a" is marked both MustExist and MustNotExist"#
        );
    }

    #[test]
    fn sartor_apiversion_documents_get_no_notes() {
        let mut unknown = assign("u", "spec.x", json!(1));
        unknown["spec"]["parameters"]["assignIf"] = json!({"in": ["a"]});
        assert_eq!(
            notes(&unknown),
            [
                "unknown-fields: with Gatekeeper v3.23.1, the API server would prune spec.parameters.assignIf (not in the CRD) unless the object is applied with strict field validation, and the mutator would work without it; sartor refuses it, as kubectl apply's default (strict) field validation does"
            ]
        );
        unknown["apiVersion"] = json!("mutations.sartor.dev/v1");
        assert!(notes(&unknown).is_empty());
    }

    #[test]
    fn refused_documents_get_a_note_only_when_gatekeeper_would_accept_them() {
        // A typo'd condition: pruned, then a pathTest without a condition.
        let mut typo = assign("t", "spec.x.y", json!(1));
        typo["spec"]["parameters"]["pathTests"] =
            json!([{"subPath": "spec.x", "conditon": "MustExist"}]);
        assert_eq!(
            notes(&typo),
            [
                "unknown-fields: with Gatekeeper v3.23.1, the API server would prune spec.parameters.pathTests[0].conditon (not in the CRD) unless the object is applied with strict field validation, and the mutator would work without it; sartor refuses it, as kubectl apply's default (strict) field validation does",
                "pathtest-without-condition: Gatekeeper v3.23.1 would accept spec.parameters.pathTests[0] without a condition, and the mutator would never apply; sartor refuses it",
            ]
        );
        // Refused by Gatekeeper too: an unparseable location.
        let mut broken = typo.clone();
        broken["spec"]["location"] = json!("spec..x");
        assert!(notes(&broken).is_empty());

        let mut child_first = assign("c", "spec.x.y", json!(1));
        child_first["spec"]["parameters"]["pathTests"] = json!([
            {"subPath": "spec.x.y", "condition": "MustExist"},
            {"subPath": "spec.x", "condition": "MustNotExist"},
        ]);
        assert_eq!(
            notes(&child_first),
            [
                "pathtests-child-first: Gatekeeper v3.23.1 would accept these pathTests, since MustExist on spec.x.y is listed before MustNotExist on its parent spec.x (it compares positions in the list), and the mutator would never apply; sartor refuses it"
            ]
        );
        let tests = child_first["spec"]["parameters"]["pathTests"]
            .as_array()
            .unwrap()
            .clone();
        child_first["spec"]["parameters"]["pathTests"] = json!([tests[1], tests[0]]);
        assert!(notes(&child_first).is_empty());

        let mut selector = assign("s", "spec.x", json!(1));
        selector["spec"]["match"] =
            json!({"labelSelector": {"matchExpressions": [{"key": "env", "operator": "In"}]}});
        assert_eq!(
            notes(&selector),
            [
                r#"malformed-selector: Gatekeeper v3.23.1 would accept this match.labelSelector (In on key "env" without values) and then fail every admission of an object it is asked to match with a match error; sartor refuses it"#
            ]
        );
        selector["spec"]["match"]["labelSelector"]["matchExpressions"][0]["operator"] =
            json!("Within");
        assert_eq!(
            notes(&selector),
            [
                r#"malformed-selector: Gatekeeper v3.23.1 would accept this match.labelSelector (the unknown operator "Within") and then fail every admission of an object it is asked to match with a match error; sartor refuses it"#
            ]
        );
        // An invalid key is not one of the classes.
        selector["spec"]["match"]["labelSelector"] = json!({"matchLabels": {"-bad": "x"}});
        assert!(notes(&selector).is_empty());
        // A document that loads gets none.
        assert!(notes(&assign("ok", "spec.x", json!(1))).is_empty());
    }
}
