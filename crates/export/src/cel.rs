//! CEL text for the policies: literals, reads of the object that cannot
//! fail on a missing field, and Gatekeeper's match rules (wildcards, label
//! selectors) written as expressions.

use sartor_api::{LabelSelector, SelectorOperator, Wildcard};
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

/// A CEL string literal (a JSON string is one: the same escapes).
pub(crate) fn string(text: &str) -> String {
    Value::from(text).to_string()
}

/// `value` as a CEL literal: JSON's null, booleans, numbers (integers stay
/// integers), strings, lists and maps.
pub(crate) fn literal(value: &Value) -> String {
    match value {
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(literal).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(fields) => {
            let fields: Vec<String> = fields
                .iter()
                .map(|(key, value)| format!("{}: {}", string(key), literal(value)))
                .collect();
            format!("{{{}}}", fields.join(", "))
        }
        scalar => scalar.to_string(),
    }
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

/// Whether the string `subject` matches `pattern` as Gatekeeper matches
/// namespace and name globs: exact, `prefix*`, `*suffix` or `*middle*`.
pub(crate) fn wildcard(subject: &str, pattern: &Wildcard) -> String {
    let p = pattern.as_str();
    match (p.strip_prefix('*'), p.strip_suffix('*')) {
        (Some(rest), Some(_)) => {
            let middle = rest.strip_suffix('*').unwrap_or(rest);
            format!("{subject}.contains({})", string(middle))
        }
        (Some(suffix), None) => format!("{subject}.endsWith({})", string(suffix)),
        (None, Some(prefix)) => format!("{subject}.startsWith({})", string(prefix)),
        (None, None) => format!("{subject} == {}", string(p)),
    }
}

/// Whether an object created with the `generateName` `subject` may match
/// `pattern` (Gatekeeper: only patterns ending in `*` can).
pub(crate) fn wildcard_generate_name(subject: &str, pattern: &Wildcard) -> String {
    let p = pattern.as_str();
    let Some(head) = p.strip_suffix('*') else {
        return "false".to_string();
    };
    match head.strip_prefix('*') {
        Some(middle) => format!("{subject}.contains({})", string(middle)),
        None if p.starts_with('*') => "true".to_string(),
        None => format!("{subject}.startsWith({})", string(head)),
    }
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
            r#"{"a": [1, 2.5, "x\"y"], "b": null, "c": true}"#
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
    fn wildcards_are_gatekeepers() {
        let w = |p: &str| Wildcard::new(p).unwrap();
        assert_eq!(wildcard("n", &w("kube-*")), r#"n.startsWith("kube-")"#);
        assert_eq!(wildcard("n", &w("*-system")), r#"n.endsWith("-system")"#);
        assert_eq!(wildcard("n", &w("*mid*")), r#"n.contains("mid")"#);
        assert_eq!(wildcard("n", &w("shop")), r#"n == "shop""#);
        assert_eq!(wildcard_generate_name("g", &w("shop")), "false");
        assert_eq!(
            wildcard_generate_name("g", &w("web-*")),
            r#"g.startsWith("web-")"#
        );
    }
}
