//! Whether a mutator would leave the object as it is, as CEL that never
//! errors: the half of the webhook's match condition that skips objects
//! which already have what the mutators write.
//!
//! It follows [`patch`](crate::patch) node by node, with the same rules for
//! what is missing (a missing field is created, with its parents, unless a
//! glob is on the way; a keyed element that is not there is appended; a
//! glob visits every element there is and creates none), and says
//! "unchanged" only where the patch would be empty or would write what is
//! there already. A webhook's match condition reads `object` untyped, and an
//! error there falls to the webhook's `failurePolicy`, so every step checks
//! its type first (`type(x) == map`); a value of another type than the one
//! the location needs counts as a change, which sends the object to sartor.
//!
//! ```text
//!  spec.containers[name: *].imagePullPolicy = "Always"
//!  type(object) == map && (has(object.spec) ? type(object.spec) == map &&
//!    (has(object.spec.containers) ? type(object.spec.containers) == list &&
//!      object.spec.containers.all(e, type(e) == map && has(e.imagePullPolicy)
//!        && e.imagePullPolicy == "Always") : true) : true)
//! ```

use sartor_engine::ImageParts;
use sartor_location::{KeyValue, ListSelector, Node};
use serde_json::Value;

use crate::cel::{self, Literal, Step};
use crate::patch::{self, Leaf};

/// What a mutator does at the end of its location.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Effect {
    /// Writes (an Assign's value, an image, a set).
    Write(Leaf),
    /// Removes what is there (an Assign's `remove: true`).
    Remove,
}

/// Whether writing `effect` at `nodes` below `object` leaves it as it is:
/// `None` when that cannot be told exactly in CEL (a location ending at a
/// glob, a value CEL would compare differently than the engine).
pub(crate) fn unchanged(nodes: &[Node], effect: &Effect) -> Option<String> {
    if let Effect::Write(leaf) = effect
        && !comparable(leaf)
    {
        return None;
    }
    below("object", nodes, effect, 0)
}

/// Whether CEL's `==` and `in` on `leaf`'s values give what the engine's
/// comparison gives: not for a number written with a fraction or an
/// exponent (`1.0`), which CEL finds equal to `1` and the engine, which
/// compares the JSON, does not.
fn comparable(leaf: &Leaf) -> bool {
    fn whole(value: &Value) -> bool {
        match value {
            Value::Number(number) => number.is_i64() || number.is_u64(),
            Value::Array(items) => items.iter().all(whole),
            Value::Object(fields) => fields.values().all(whole),
            Value::Null | Value::Bool(_) | Value::String(_) => true,
        }
    }
    fn whole_literal(literal: &Literal) -> bool {
        match literal {
            Literal::Json(value) => whole(value),
            Literal::Expression(_) => true,
            Literal::Map(members) => members.iter().all(|(_, m)| whole_literal(m)),
            Literal::List(items) => items.iter().all(whole_literal),
        }
    }
    match leaf {
        Leaf::Value(value) => whole_literal(value),
        Leaf::Image(_) => true,
        Leaf::Merge(values) | Leaf::Prune(values) => values.iter().all(whole),
    }
}

/// `value` is a map.
fn is_map(value: &str) -> String {
    format!("type({value}) == map")
}

/// `value` is a list.
fn is_list(value: &str) -> String {
    format!("type({value}) == list")
}

/// Whether `effect` at `nodes` leaves `current` as it is, inside `depth`
/// list elements.
fn below(current: &str, nodes: &[Node], effect: &Effect, depth: usize) -> Option<String> {
    let (node, rest) = nodes.split_first()?;
    match node {
        Node::Field(name) => {
            let step = Step::of(name);
            let present = step.present(current);
            let read = step.read(current);
            let here = match (rest.is_empty(), effect) {
                (true, Effect::Write(leaf)) => {
                    let kept = kept(&read, leaf)?;
                    match leaf {
                        // A prune leaves a missing list missing.
                        Leaf::Prune(_) => format!("(!({present}) || {kept})"),
                        _ => format!("{present} && {kept}"),
                    }
                }
                (true, Effect::Remove) => format!("!({present})"),
                (false, Effect::Remove) => {
                    format!("(!({present}) || {})", below(&read, rest, effect, depth)?)
                }
                (false, Effect::Write(leaf)) => {
                    // Missing: created, unless a glob is on the way.
                    let missing = match patch::creates(rest, leaf) {
                        true => "false",
                        false => "true",
                    };
                    format!(
                        "({present} ? {} : {missing})",
                        below(&read, rest, effect, depth)?
                    )
                }
            };
            Some(format!("{} && {here}", is_map(current)))
        }
        Node::List(selector) => element(current, selector, rest, effect, depth),
    }
}

/// Whether `effect` below the elements `selector` picks of the list
/// `current` leaves them as they are. Every element must be a map.
fn element(
    current: &str,
    selector: &ListSelector,
    rest: &[Node],
    effect: &Effect,
    depth: usize,
) -> Option<String> {
    let each = element_name(depth);
    let key = Step::of(&selector.key_field);
    let has_key = format!("{} && ", key.present(&each));
    let all = |body: String| {
        format!(
            "{} && {current}.all({each}, {} && {body})",
            is_list(current),
            is_map(&each)
        )
    };
    match &selector.key_value {
        KeyValue::Glob | KeyValue::NotIn(_) => {
            if rest.is_empty() {
                return None;
            }
            let inner = below(&each, rest, effect, depth + 1)?;
            let skipped = match &selector.key_value {
                KeyValue::NotIn(set) => {
                    let names: Option<Vec<String>> = set
                        .values()
                        .iter()
                        .map(|value| match value {
                            sartor_location::Literal::String(name) => Some(cel::string(name)),
                            sartor_location::Literal::Integer(_) => None,
                        })
                        .collect();
                    format!(
                        "({has_key}{} in [{}]) || ",
                        key.read(&each),
                        names?.join(", ")
                    )
                }
                _ => String::new(),
            };
            Some(all(format!("({skipped}{inner})")))
        }
        KeyValue::String(_) | KeyValue::Integer(_) => {
            let named = named(&each, selector)?;
            let inner = match (rest.is_empty(), effect) {
                (true, Effect::Remove) => "false".to_string(),
                (true, Effect::Write(Leaf::Value(value))) => {
                    format!("{each} == {}", value.render())
                }
                (true, Effect::Write(_)) => return None,
                (false, _) => below(&each, rest, effect, depth + 1)?,
            };
            let checked = all(format!("(!{named} || {inner})"));
            match effect {
                // A missing element is appended.
                Effect::Write(_) => Some(format!(
                    "{checked} && {current}.exists({each}, {} && {named})",
                    is_map(&each)
                )),
                Effect::Remove => Some(checked),
            }
        }
    }
}

/// Whether the value `read` (which is there) is already what `leaf` writes.
fn kept(read: &str, leaf: &Leaf) -> Option<String> {
    Some(match leaf {
        Leaf::Value(value) => format!("{read} == {}", value.render()),
        Leaf::Image(parts) => image_kept(read, parts),
        Leaf::Merge(values) => format!(
            "{} && {}.all(v, v in {read})",
            is_list(read),
            cel::literal(&Value::Array(values.clone()))
        ),
        Leaf::Prune(values) => format!(
            "{} && !{read}.exists(v, v in {})",
            is_list(read),
            cel::literal(&Value::Array(values.clone()))
        ),
    })
}

/// Whether everything `nodes` names is there below `object` (fields, and
/// keyed elements: every element a map, one with the key, and every one
/// with the key holding the rest): false for a missing one and for one
/// below something else. `None` for a glob or `notin`.
pub(crate) fn present(nodes: &[Node]) -> Option<String> {
    fn below(current: &str, nodes: &[Node], depth: usize) -> Option<String> {
        let Some((node, rest)) = nodes.split_first() else {
            return Some("true".to_string());
        };
        let deeper = |read: &str, depth: usize| -> Option<String> {
            match rest.is_empty() {
                true => Some(String::new()),
                false => Some(format!(" && {}", below(read, rest, depth)?)),
            }
        };
        match node {
            Node::Field(name) => {
                let step = Step::of(name);
                Some(format!(
                    "{} && {}{}",
                    is_map(current),
                    step.present(current),
                    deeper(&step.read(current), depth)?
                ))
            }
            Node::List(selector) => {
                let each = element_name(depth);
                let named = named(&each, selector)?;
                let inner = match rest.is_empty() {
                    true => String::new(),
                    false => format!(
                        " && {current}.all({each}, !{named} || {})",
                        below(&each, rest, depth + 1)?
                    ),
                };
                Some(format!(
                    "{} && {current}.all({each}, {}) && {current}.exists({each}, {named}){inner}",
                    is_list(current),
                    is_map(&each)
                ))
            }
        }
    }
    below("object", nodes, 0)
}

/// Whether something `nodes` names is missing below `object`: a field
/// missing from a map on the way, or no element with the key (every element
/// a map), or every one with it missing the rest. False for one below
/// something else, where the engine would not find it missing either.
/// `None` for a glob or `notin`.
pub(crate) fn absent(nodes: &[Node]) -> Option<String> {
    fn below(current: &str, nodes: &[Node], depth: usize) -> Option<String> {
        let Some((node, rest)) = nodes.split_first() else {
            return Some("false".to_string());
        };
        match node {
            Node::Field(name) => {
                let step = Step::of(name);
                let deeper = match rest.is_empty() {
                    true => String::new(),
                    false => format!(" || {}", below(&step.read(current), rest, depth)?),
                };
                Some(format!(
                    "{} && (!({}){deeper})",
                    is_map(current),
                    step.present(current)
                ))
            }
            Node::List(selector) => {
                let each = element_name(depth);
                let named = named(&each, selector)?;
                let missing = match rest.is_empty() {
                    true => format!("!{named}"),
                    false => format!("(!{named} || {})", below(&each, rest, depth + 1)?),
                };
                Some(format!(
                    "{} && {current}.all({each}, {} && {missing})",
                    is_list(current),
                    is_map(&each)
                ))
            }
        }
    }
    below("object", nodes, 0)
}

/// What the element of a list is called inside `depth` lists: `e`, `e1`, ...
fn element_name(depth: usize) -> String {
    match depth {
        0 => "e".to_string(),
        n => format!("e{n}"),
    }
}

/// Whether the element `each` (a map) is the one the keyed `selector`
/// names, as the engine compares keys; `None` for a glob or `notin`.
fn named(each: &str, selector: &ListSelector) -> Option<String> {
    let key = Step::of(&selector.key_field);
    let (value, integer) = match &selector.key_value {
        KeyValue::String(text) => (Value::from(text.as_str()), String::new()),
        // An integer key equals only an integer, as in the engine (CEL
        // would find `8080.0` equal too).
        KeyValue::Integer(number) => (
            Value::from(*number),
            format!("type({}) == int && ", key.read(each)),
        ),
        KeyValue::Glob | KeyValue::NotIn(_) => return None,
    };
    Some(format!(
        "({} && {integer}{} == {})",
        key.present(each),
        key.read(each),
        cel::literal(&value)
    ))
}

/// Whether the image `read` already has `parts`.
fn image_kept(read: &str, parts: &ImageParts) -> String {
    format!(
        "type({read}) == string && {} == {read}",
        patch::image(read, parts)
    )
}

#[cfg(test)]
mod tests;
