//! CEL text for the policies: literals, reads of the object that cannot
//! fail on a missing field, and label selectors written as expressions
//! (wildcards render themselves: `Wildcard::cel`).

use sartor_api::{LabelSelector, SelectorOperator};
use std::collections::BTreeSet;

use serde_json::Value;

/// CEL's reserved words: a field of that name is read as `__name__`.
const RESERVED: [&str; 21] = [
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// A CEL string literal: sartor-api's one quoting.
pub(crate) use sartor_api::cel_string as string;

/// `value` as a CEL literal: JSON's null, booleans, numbers (integers stay
/// integers), strings, lists and maps. CEL wants a list's or a map's values
/// of one type, so mixed ones are each made `dyn(...)`.
pub(crate) fn literal(value: &Value) -> String {
    match value {
        Value::Array(items) => {
            let mixed = mixed(items.iter());
            let items: Vec<String> = items.iter().map(|item| member(item, mixed)).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(fields) => {
            let mixed = mixed(fields.values());
            let fields: Vec<String> = fields
                .iter()
                .map(|(key, value)| format!("{}: {}", string(key), member(value, mixed)))
                .collect();
            format!("{{{}}}", fields.join(", "))
        }
        scalar => scalar.to_string(),
    }
}

/// A literal being built around values only known in CEL: JSON, a CEL
/// expression (the request's namespace), and maps and lists of them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Literal {
    /// A JSON value.
    Json(Value),
    /// A CEL expression, of a type the export does not know.
    Expression(String),
    /// A map, its members by key.
    Map(Vec<(String, Literal)>),
    /// A list.
    List(Vec<Literal>),
}

impl Literal {
    /// As CEL text: keys in order, mixed members `dyn(...)`.
    pub(crate) fn render(&self) -> String {
        match self {
            Literal::Json(value) => literal(value),
            Literal::Expression(expression) => expression.clone(),
            Literal::Map(members) => {
                let mut members: Vec<&(String, Literal)> = members.iter().collect();
                members.sort_by(|a, b| a.0.cmp(&b.0));
                let mixed = Literal::mixed(members.iter().map(|(_, m)| m));
                let members: Vec<String> = members
                    .iter()
                    .map(|(key, m)| format!("{}: {}", string(key), m.member(mixed)))
                    .collect();
                format!("{{{}}}", members.join(", "))
            }
            Literal::List(items) => {
                let mixed = Literal::mixed(items.iter());
                let items: Vec<String> = items.iter().map(|m| m.member(mixed)).collect();
                format!("[{}]", items.join(", "))
            }
        }
    }

    fn member(&self, mixed: bool) -> String {
        match mixed {
            true => format!("dyn({})", self.render()),
            false => self.render(),
        }
    }

    /// Whether members may be of more than one type: JSON's as [`mixed`]
    /// tells; an expression, a map or a list beside another member may be.
    fn mixed<'a>(members: impl Iterator<Item = &'a Literal>) -> bool {
        let members: Vec<&Literal> = members.collect();
        match members.iter().all(|m| matches!(m, Literal::Json(_))) {
            true => mixed(members.iter().filter_map(|m| match m {
                Literal::Json(value) => Some(value),
                _ => None,
            })),
            false => members.len() > 1,
        }
    }
}

/// A member of a list or map literal, `dyn(...)` among mixed types.
fn member(value: &Value, mixed: bool) -> String {
    match mixed {
        true => format!("dyn({})", literal(value)),
        false => literal(value),
    }
}

/// Whether `values` are of more than one CEL type (integers and other
/// numbers apart; two lists or maps may differ in their members' types).
fn mixed<'a>(values: impl Iterator<Item = &'a Value>) -> bool {
    let kind = |value: &Value| match value {
        Value::Null => 0,
        Value::Bool(_) => 1,
        Value::Number(number) if number.is_i64() || number.is_u64() => 2,
        Value::Number(_) => 3,
        Value::String(_) => 4,
        Value::Array(_) => 5,
        Value::Object(_) => 6,
    };
    let all: Vec<u8> = values.map(kind).collect();
    let kinds: BTreeSet<u8> = all.iter().copied().collect();
    kinds.len() > 1 || (all.len() > 1 && (kinds.contains(&5) || kinds.contains(&6)))
}

/// One step down from `parent`: a field (`parent.name`, a reserved word as
/// `parent.__name__`) or, for a name no field can have, a map key
/// (`parent["name"]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step<'a> {
    /// A struct field, or a map key that reads as one.
    Field(&'a str),
    /// A map key that is not an identifier (`example.com/owner`).
    Key(&'a str),
}

impl<'a> Step<'a> {
    /// How `name` is read: a field when it is an identifier, else a key
    /// (built-in kinds' fields are identifiers; labels' and annotations'
    /// keys often are not).
    pub(crate) fn of(name: &'a str) -> Step<'a> {
        let mut chars = name.chars();
        let identifier = chars
            .next()
            .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
        if identifier {
            Step::Field(name)
        } else {
            Step::Key(name)
        }
    }

    /// `parent` read one step down.
    pub(crate) fn read(self, parent: &str) -> String {
        match self {
            Step::Field(name) if RESERVED.contains(&name) => format!("{parent}.__{name}__"),
            Step::Field(name) => format!("{parent}.{name}"),
            Step::Key(name) => format!("{parent}[{}]", string(name)),
        }
    }

    /// Whether `parent` has this step.
    pub(crate) fn present(self, parent: &str) -> String {
        match self {
            Step::Field(_) => format!("has({})", self.read(parent)),
            Step::Key(name) => format!("{} in {parent}", string(name)),
        }
    }
}

/// Whether `root` has every one of `names`, each below the one before:
/// `has(object.spec) && has(object.spec.securityContext)`. CEL's `&&`
/// stops at the first false, so a missing parent is never read into.
pub(crate) fn has_path(root: &str, names: &[String]) -> String {
    let mut read = root.to_string();
    let mut tests = Vec::new();
    for name in names {
        let step = Step::of(name);
        tests.push(step.present(&read));
        read = step.read(&read);
    }
    if tests.is_empty() {
        return "true".to_string();
    }
    tests.join(" && ")
}

/// `root` read down `names`.
pub(crate) fn read_path(root: &str, names: &[String]) -> String {
    names
        .iter()
        .fold(root.to_string(), |read, name| Step::of(name).read(&read))
}

/// Whether the labels of `holder` (an expression whose `metadata` may have
/// no `labels`) satisfy `selector`, as Kubernetes label selectors do.
pub(crate) fn selector(holder: &str, selector: &LabelSelector) -> String {
    let labels = format!("{holder}.metadata.labels");
    let has_key = |key: &str| format!("(has({labels}) && {} in {labels})", string(key));
    let value = |key: &str| format!("{labels}[{}]", string(key));
    let mut tests = Vec::new();
    for (key, wanted) in &selector.match_labels {
        tests.push(format!(
            "({} && {} == {})",
            has_key(key),
            value(key),
            string(wanted)
        ));
    }
    for requirement in &selector.match_expressions {
        let key = &requirement.key;
        let values: Vec<String> = requirement.values.iter().map(|v| string(v)).collect();
        let values = format!("[{}]", values.join(", "));
        tests.push(match requirement.operator {
            SelectorOperator::In => format!("({} && {} in {values})", has_key(key), value(key)),
            SelectorOperator::NotIn => {
                format!("(!{} || !({} in {values}))", has_key(key), value(key))
            }
            SelectorOperator::Exists => has_key(key),
            SelectorOperator::DoesNotExist => format!("!{}", has_key(key)),
        });
    }
    if tests.is_empty() {
        return "true".to_string();
    }
    tests.join(" && ")
}

/// Whether `expression` is one parenthesized group, `(...)`, so it needs no
/// more parentheses to be an operand (string literals' parentheses aside).
pub(crate) fn is_grouped(expression: &str) -> bool {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let last = expression.len().saturating_sub(1);
    for (at, c) in expression.char_indices() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '(' => depth += 1,
            ')' => {
                depth = depth.saturating_sub(1);
                if depth == 0 && at != last {
                    return false;
                }
            }
            _ if depth == 0 => return false,
            _ => {}
        }
    }
    depth == 0 && expression.starts_with('(')
}

/// `/a/b~1c`: the JSON pointer of `names` (RFC 6901 escapes).
pub(crate) fn pointer(names: &[String]) -> String {
    names
        .iter()
        .map(|name| format!("/{}", name.replace('~', "~0").replace('/', "~1")))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|name| (*name).to_string()).collect()
    }

    #[test]
    fn literals_keep_json_types() {
        assert_eq!(
            literal(&json!({"a": [1, 2.5, "x\"y"], "b": null, "c": true})),
            r#"{"a": dyn([dyn(1), dyn(2.5), dyn("x\"y")]), "b": dyn(null), "c": dyn(true)}"#
        );
    }

    #[test]
    fn paths_read_fields_keys_and_reserved_words() {
        let path = names(&["metadata", "annotations", "example.com/owner"]);
        assert_eq!(
            has_path("object", &path),
            r#"has(object.metadata) && has(object.metadata.annotations) && "example.com/owner" in object.metadata.annotations"#
        );
        assert_eq!(
            read_path("object", &names(&["metadata", "namespace"])),
            "object.metadata.__namespace__"
        );
        assert_eq!(pointer(&path), "/metadata/annotations/example.com~1owner");
    }

    #[test]
    fn one_type_needs_no_dyn() {
        assert_eq!(
            literal(&json!({"type": "RuntimeDefault"})),
            r#"{"type": "RuntimeDefault"}"#
        );
        assert_eq!(literal(&json!(["a", "b"])), r#"["a", "b"]"#);
    }

    #[test]
    fn one_group_is_told_from_two() {
        assert!(is_grouped(r#"(a == "(" && b)"#));
        assert!(!is_grouped("(a) && (b)"));
        assert!(!is_grouped("a && b"));
    }
}
