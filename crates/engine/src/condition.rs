//! Value conditions (sartor only): "apply only if the object has this value".
//!
//! A condition reads one value of the object, at a path in location syntax
//! without globs or exclusions, and compares it with `In`, `NotIn`, `Exists`
//! or `DoesNotExist`. Conditions are checked after the match criteria, on the
//! object as it is at that moment, so in every pass.
//!
//! Gatekeeper dropped such conditions because two mutators can make each
//! other oscillate: one writes what the other's condition reads. sartor keeps
//! them safe the way it keeps schemas safe: a mutator whose condition reads a
//! path another mutator may write is in [`ConditionConflict`] and skipped
//! until the other one goes ([`may_write`] decides "may write").
//!
//! Reading follows the walk's rules: a keyed selector `[name: foo]` reads the
//! first element whose key equals the value (a string never equals a number);
//! a field of something that is not an object, or a selector on something
//! that is not a list, reads as absent; a present `null` is present, as for a
//! pathTest's `MustExist`.

use std::fmt;

use sartor_api::ValueOperator;
use sartor_location::{ListSelector, Node, Path};
use serde_json::Value;

use crate::mutator::{MutatorId, Problem};
use crate::schema::Binding;
use crate::walk::value_equals;

/// A compiled value condition: a parsed path, an operator and its values.
#[derive(Debug, Clone, PartialEq)]
pub struct CompiledCondition {
    path: Path,
    operator: ValueOperator,
    values: Vec<Value>,
}

/// A mutator whose condition reads what another mutator may write, so it
/// could start or stop applying while the object is mutated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionConflict {
    /// The path the condition reads.
    pub condition: Path,
    /// The mutator that may write it.
    pub with: MutatorId,
    /// Its location.
    pub writes: Path,
    /// The kinds and operations in which both apply; empty when both apply
    /// to every kind and operation (two AssignMetadata).
    pub bindings: Vec<Binding>,
}

// === impl CompiledCondition ===

impl CompiledCondition {
    /// Compiles `spec.parameters.conditions[index]`.
    ///
    /// # Errors
    /// A [`Problem`] naming the field: a path that does not parse or selects
    /// several elements, values missing for `In` / `NotIn` or given to
    /// `Exists` / `DoesNotExist`.
    pub(crate) fn compile(
        index: usize,
        condition: &sartor_api::ValueCondition,
    ) -> Result<CompiledCondition, Problem> {
        let path = Path::parse(&condition.path)
            .map_err(|source| Problem::ConditionPath { index, source })?;
        let several = path.nodes().iter().find_map(|node| match node {
            Node::List(selector) if !selector.key_value.is_concrete() => Some(selector),
            _ => None,
        });
        if let Some(selector) = several {
            return Err(Problem::ConditionSelectsSeveral {
                index,
                selector: selector.clone(),
            });
        }
        let operator = condition.operator;
        if operator.takes_values() && condition.values.is_empty() {
            return Err(Problem::ConditionValuesMissing { index, operator });
        }
        if !operator.takes_values() && !condition.values.is_empty() {
            return Err(Problem::ConditionValuesGiven { index, operator });
        }
        Ok(CompiledCondition {
            path,
            operator,
            values: condition.values.clone(),
        })
    }

    /// The path it reads.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How it compares.
    pub fn operator(&self) -> ValueOperator {
        self.operator
    }

    /// The values `In` and `NotIn` compare with; empty for the others.
    pub fn values(&self) -> &[Value] {
        &self.values
    }

    /// Whether it holds on `object` as it is now.
    pub fn holds(&self, object: &Value) -> bool {
        let value = read(object, &self.path);
        let listed = |value: &Value| self.values.iter().any(|v| json_equal(v, value));
        match self.operator {
            ValueOperator::In => value.is_some_and(listed),
            ValueOperator::NotIn => !value.is_some_and(listed),
            ValueOperator::Exists => value.is_some(),
            ValueOperator::DoesNotExist => value.is_none(),
        }
    }
}

/// The value at `path` in `object`, or `None` when nothing is there (or
/// something of the wrong type is in the way).
fn read<'v>(object: &'v Value, path: &Path) -> Option<&'v Value> {
    let mut current = object;
    for node in path.nodes() {
        current = match node {
            Node::Field(name) => current.as_object()?.get(name)?,
            Node::List(selector) => current
                .as_array()?
                .iter()
                .find(|element| key_equals(element, selector))?,
        };
    }
    Some(current)
}

/// Whether `element` is an object whose key field equals the selector's value.
fn key_equals(element: &Value, selector: &ListSelector) -> bool {
    element
        .get(&selector.key_field)
        .is_some_and(|key| value_equals(key, &selector.key_value))
}

/// Whole-value JSON equality, numbers compared by value (`1` equals `1.0`),
/// as Gatekeeper's float64 numbers compare: how ModifySet and value
/// conditions compare.
pub fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(a), Value::Number(b)) => {
            if let (Some(a), Some(b)) = (a.as_i64(), b.as_i64()) {
                a == b
            } else if let (Some(a), Some(b)) = (a.as_u64(), b.as_u64()) {
                a == b
            } else {
                a.as_f64() == b.as_f64()
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| json_equal(a, b))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(key, a)| b.get(key).is_some_and(|b| json_equal(a, b)))
        }
        _ => a == b,
    }
}

/// Whether a mutator whose location is `location` may change what a
/// condition reading `read` sees. An over-approximation: a missed case would
/// let a mutator oscillate, an extra one only keeps a mutator from being
/// enforced.
///
/// It may when the two paths agree node by node as far as the shorter goes:
/// then one is at or inside the other, and a write at the location changes the
/// value read, replaces a parent of it, or creates the parents of the value
/// it reads (the walk creates missing fields on its way). Two nodes agree when
///
/// - they are the same field;
/// - they are list selectors that may select the same element: a glob may
///   select any; `notin` any but its values; two concrete values must be
///   equal (`"80"` is not `80`); selectors on *different* key fields always
///   may, since one element can carry both keys;
/// - one is a field and the other a list selector: they disagree about the
///   type there, and sartor does not rely on which one the object has.
///
/// Where the paths diverge right after two list selectors, the location may
/// still change which element the condition reads, or make one appear:
/// - a concrete selector creates the element `{key: value}` when it is
///   missing, which writes its key field: a location through
///   `containers[name: x]` may write what `containers[name: x].name` reads;
/// - a location through `containers[id: 1].name` or `containers[name: y].name`
///   writes the key field of the condition's `containers[name: x]`, and so
///   may change which element is the first one named `x`.
pub fn may_write(location: &Path, read: &Path) -> bool {
    let (written, reads) = (location.nodes(), read.nodes());
    let shared = written.len().min(reads.len());
    let agreed = agreed_nodes(location, read);
    if agreed == shared {
        return true;
    }
    // Selectors for different elements of one list: the location may still
    // change the key of an element so that the condition reads it (a key
    // change Assign refuses, but this stays true to any location).
    if let (Some(Node::List(_)), Some(Node::List(theirs)), Some(Node::Field(writes))) = (
        written.get(agreed),
        reads.get(agreed),
        written.get(agreed + 1),
    ) {
        return *writes == theirs.key_field;
    }
    let before = agreed.checked_sub(1);
    match (
        before.and_then(|i| written.get(i)),
        before.and_then(|i| reads.get(i)),
        written.get(agreed),
        reads.get(agreed),
    ) {
        (
            Some(Node::List(mine)),
            Some(Node::List(theirs)),
            Some(Node::Field(writes)),
            Some(Node::Field(reads)),
        ) => {
            (mine.key_value.is_concrete() && *reads == mine.key_field)
                || *writes == theirs.key_field
        }
        _ => false,
    }
}

/// How many leading nodes of a written location and a read path agree (as
/// [`may_write`] defines it): the nodes of `read` a write at `location` may
/// create on its way.
pub(crate) fn agreed_nodes(location: &Path, read: &Path) -> usize {
    location
        .nodes()
        .iter()
        .zip(read.nodes())
        .take_while(|(w, r)| nodes_agree(w, r))
        .count()
}

fn nodes_agree(written: &Node, read: &Node) -> bool {
    match (written, read) {
        (Node::Field(a), Node::Field(b)) => a == b,
        (Node::List(a), Node::List(b)) => may_select_same(a, b),
        (Node::Field(_), Node::List(_)) | (Node::List(_), Node::Field(_)) => true,
    }
}

/// Whether two selectors on one list may select a common element.
fn may_select_same(a: &ListSelector, b: &ListSelector) -> bool {
    if a.key_field != b.key_field {
        return true;
    }
    a.key_value.may_meet(&b.key_value)
}

// === impl ConditionConflict ===

impl fmt::Display for ConditionConflict {
    /// `its condition on spec.type reads what Assign set-type writes
    /// (spec.type) (v1 Service CREATE and 1 more)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "its condition on {} reads what {} writes ({})",
            self.condition, self.with, self.writes
        )?;
        crate::schema::write_bindings(f, &self.bindings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path(s: &str) -> Path {
        Path::parse(s).unwrap()
    }

    #[test]
    fn reading_follows_fields_and_the_first_keyed_element() {
        let object = json!({
            "spec": {
                "type": "LoadBalancer",
                "ports": [{"port": 80, "protocol": "TCP"}, {"port": 80, "protocol": "UDP"}, {"port": "443"}],
                "none": null,
                "list": [1, 2],
            }
        });
        let cases = [
            ("spec.type", Some(json!("LoadBalancer"))),
            ("spec.ports[port: 80].protocol", Some(json!("TCP"))),
            ("spec.ports[port: 443]", None),
            (r#"spec.ports[port: "443"]"#, Some(json!({"port": "443"}))),
            ("spec.none", Some(Value::Null)),
            ("spec.none.x", None),
            ("spec.type.x", None),
            ("spec.type[name: x]", None),
            ("spec.list[name: x]", None),
            ("spec.missing", None),
        ];
        for (at, want) in cases {
            assert_eq!(read(&object, &path(at)).cloned(), want, "{at}");
        }
    }

    #[test]
    fn numbers_are_equal_by_value() {
        assert!(json_equal(&json!(1), &json!(1.0)));
        assert!(json_equal(&json!({"a": [1]}), &json!({"a": [1.0]})));
        assert!(!json_equal(&json!(1), &json!("1")));
        assert!(!json_equal(&json!(-1), &json!(u64::MAX)));
        assert!(!json_equal(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
    }

    #[test]
    fn a_location_may_write_what_is_at_inside_or_around_it() {
        let cases = [
            ("spec.type", "spec.type", true),
            ("spec.type", "spec.type.x", true),
            ("spec", "spec.type", true),
            ("spec.type.x", "spec.type", true),
            ("spec.other", "spec.type", false),
            ("spec.typeX", "spec.type", false),
            ("metadata.labels.a", "metadata.labels.b", false),
            ("metadata.labels.a", "metadata.labels", true),
            ("spec.c[name: x].image", "spec.c[name: x].image", true),
            ("spec.c[name: x].image", "spec.c[name: y].image", false),
            ("spec.c[name: *].image", "spec.c[name: y].image", true),
            (
                "spec.c[name notin (y)].image",
                "spec.c[name: y].image",
                false,
            ),
            (
                "spec.c[name notin (z)].image",
                "spec.c[name: y].image",
                true,
            ),
            ("spec.c[port: 80].x", r#"spec.c[port: "80"].x"#, false),
            ("spec.c[id: 1].image", "spec.c[name: y].image", true),
            ("spec.c[name: x].image", "spec.c[name: x].name", true),
            ("spec.c[name: x].image", "spec.c[name: x].other", false),
            ("spec.c[name: *].image", "spec.c[name: x].name", false),
            ("spec.c[name: x].image", "spec.c.name", true),
            ("spec.c[id: 1].name", "spec.c[name: x].image", true),
            ("spec.c[id: 1].other", "spec.c[name: x].image", false),
            ("spec.c[name: y].name", "spec.c[name: x].image", true),
        ];
        for (location, read, want) in cases {
            assert_eq!(
                may_write(&path(location), &path(read)),
                want,
                "{location} / {read}"
            );
        }
    }
}
