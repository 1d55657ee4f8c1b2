//! The typed form of a location: a [`Path`] of [`Node`]s.

use std::fmt;
use std::str::FromStr;

use crate::error::{ParseError, Result};

/// A parsed location such as `spec.containers[name: *].imagePullPolicy`.
///
/// A path is a non-empty sequence of nodes. It always starts with a
/// [`Node::Field`], and a [`Node::List`] only ever directly follows a field
/// (`containers[name: *]`): the grammar has no other place for a list selector.
/// The constructors keep that shape, so code walking a path can rely on it.
///
/// `Display` prints the canonical form, which parses back to an equal path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Path {
    nodes: Vec<Node>,
}

/// One step of a [`Path`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Node {
    /// An object field, by name (`spec`, `"example.com/owner"`).
    Field(String),
    /// A selector on a keyed list (`[name: foo]`, `[containerPort: 80]`, `[name: *]`).
    List(ListSelector),
}

/// A keyed-list selector, `[key_field: key_value]` or `[key_field notin (...)]`.
///
/// Kubernetes "map lists" (containers by `name`, ports by `containerPort`) are
/// addressed by the value of their key field rather than by index.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ListSelector {
    /// The field of each element that identifies it, such as `name`.
    pub key_field: String,
    /// Which elements are selected.
    pub key_value: KeyValue,
}

/// The value side of a [`ListSelector`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum KeyValue {
    /// `*`: every element of the list. A glob never creates elements.
    Glob,
    /// A quoted value, or an unquoted one that is not all digits. A string
    /// never equals a number: `"8080"` does not select `containerPort: 8080`.
    String(String),
    /// An unquoted, all-digit value, read as a decimal integer (`0080` is 80).
    Integer(i64),
    /// `notin (a, 80)`: every element a glob selects except those whose key
    /// equals one of the values (elements without the key are selected). Like
    /// a glob it never creates elements. A sartor extension: Gatekeeper's
    /// parser rejects it (see [`Path::uses_exclusion`]).
    NotIn(KeySet),
}

/// One concrete key value, as listed in a `notin` set. Ordered integers first,
/// then strings byte-wise: the canonical order of a [`KeySet`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Literal {
    /// An unquoted, all-digit value (`0080` is 80).
    Integer(i64),
    /// A quoted value, or an unquoted one that is not all digits.
    String(String),
}

/// The values of a `notin` selector: at least one, none twice, kept in
/// canonical order so that two sets with the same values are equal however
/// they were written (`(b, a)` is `(a, b)`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeySet(Vec<Literal>);

/// Why values do not make a [`KeySet`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeySetError {
    /// A `notin` set needs at least one value.
    #[error("a notin set needs at least one value")]
    Empty,
    /// A value listed twice.
    #[error("{0} is listed twice")]
    Duplicate(Literal),
}

/// Why a sequence of nodes is not a [`Path`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    /// A path needs at least one node.
    #[error("a path needs at least one node")]
    Empty,
    /// A list selector must directly follow a field.
    #[error("node {index} is a list selector that does not follow a field")]
    MisplacedList {
        /// Position of the offending node.
        index: usize,
    },
}

// === impl Path ===

impl Path {
    /// Parses a location string.
    ///
    /// ```
    /// use sartor_location::{KeyValue, Node, Path};
    ///
    /// let path = Path::parse("spec.containers[name: *].imagePullPolicy")?;
    /// assert_eq!(path.nodes().len(), 4);
    /// assert!(matches!(&path.nodes()[2], Node::List(l) if l.key_value == KeyValue::Glob));
    /// # Ok::<(), sartor_location::ParseError>(())
    /// ```
    ///
    /// # Errors
    /// A [`ParseError`] carrying the byte offset of the fault; its `Display`
    /// renders the location with a caret under it.
    pub fn parse(location: &str) -> Result<Path> {
        crate::parser::parse(location)
    }

    /// Builds a path from nodes, checking the shape the grammar guarantees.
    ///
    /// # Errors
    /// [`ShapeError`] when `nodes` is empty or a list selector does not follow a field.
    pub fn from_nodes(nodes: Vec<Node>) -> Result<Path, ShapeError> {
        if nodes.is_empty() {
            return Err(ShapeError::Empty);
        }
        let mut previous_is_field = false;
        for (index, node) in nodes.iter().enumerate() {
            match node {
                Node::Field(_) => previous_is_field = true,
                Node::List(_) if previous_is_field => previous_is_field = false,
                Node::List(_) => return Err(ShapeError::MisplacedList { index }),
            }
        }
        Ok(Path { nodes })
    }

    /// The nodes, first to last. Never empty.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Number of nodes. A pathTest's depth is an index into these.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Always false: a path has at least one node. Present for API symmetry with `len`.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Whether `self` is `other` or an ancestor of it, node by node.
    ///
    /// Nodes compare exactly: a glob is a prefix only of a glob, `[port: 80]`
    /// is not a prefix of `[port: "80"]`, and `[name: "b"]` is a prefix of
    /// `[name: b]` (both are the string `b`). An exclusion matches only an
    /// exclusion of the same values, in any order: `[name notin (b, a)]` is
    /// `[name notin (a, b)]`.
    pub fn is_prefix_of(&self, other: &Path) -> bool {
        other.nodes.starts_with(&self.nodes)
    }

    /// The first `len` nodes as a path (the subPath a pathTest at depth `len - 1`
    /// names); `None` when `len` is 0 or more than [`len`](Self::len).
    pub fn prefix(&self, len: usize) -> Option<Path> {
        let nodes = self.nodes.get(..len)?;
        Path::from_nodes(nodes.to_vec()).ok()
    }

    /// Whether any list selector on the path is a glob.
    pub fn has_glob(&self) -> bool {
        self.nodes
            .iter()
            .any(|n| matches!(n, Node::List(l) if l.key_value == KeyValue::Glob))
    }

    /// Whether any list selector on the path is a `notin` exclusion, the
    /// sartor extension Gatekeeper's parser rejects.
    ///
    /// ```
    /// use sartor_location::Path;
    ///
    /// assert!(Path::parse("spec.containers[name notin (istio-proxy)].image")?.uses_exclusion());
    /// assert!(!Path::parse("spec.containers[name: *].image")?.uses_exclusion());
    /// # Ok::<(), sartor_location::ParseError>(())
    /// ```
    pub fn uses_exclusion(&self) -> bool {
        self.nodes
            .iter()
            .any(|n| matches!(n, Node::List(l) if matches!(l.key_value, KeyValue::NotIn(_))))
    }
}

impl FromStr for Path {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self> {
        Path::parse(s)
    }
}

impl TryFrom<Vec<Node>> for Path {
    type Error = ShapeError;

    fn try_from(nodes: Vec<Node>) -> Result<Self, ShapeError> {
        Path::from_nodes(nodes)
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, node) in self.nodes.iter().enumerate() {
            if i > 0 && matches!(node, Node::Field(_)) {
                f.write_str(".")?;
            }
            write!(f, "{node}")?;
        }
        Ok(())
    }
}

impl serde::Serialize for Path {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Path {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Path::parse(&s).map_err(serde::de::Error::custom)
    }
}

// === impl Node ===

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Node::Field(name) => write_name(f, name),
            Node::List(list) => write!(f, "{list}"),
        }
    }
}

impl fmt::Display for ListSelector {
    /// `[name: foo]`, or `[name notin (a, b)]` for an exclusion.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        write_name(f, &self.key_field)?;
        match &self.key_value {
            KeyValue::NotIn(_) => write!(f, " {}]", self.key_value),
            other => write!(f, ": {other}]"),
        }
    }
}

// === impl KeyValue ===

impl KeyValue {
    /// Whether it names one key value (a string or an integer): such a
    /// selector creates its element when missing and may end a location. A
    /// glob or an exclusion selects by pattern, creates nothing and may not.
    pub fn is_concrete(&self) -> bool {
        matches!(self, KeyValue::String(_) | KeyValue::Integer(_))
    }

    /// Whether two selectors on the same key field may select a common
    /// element: a glob meets anything, two exclusions always meet (keys
    /// outside both sets), an exclusion meets a concrete key it does not
    /// list, and two concrete keys meet when equal (`"80"` is not `80`).
    ///
    /// ```
    /// use sartor_location::{KeyValue, Path};
    ///
    /// let key = |location: &str| match Path::parse(location).unwrap().nodes() {
    ///     [_, sartor_location::Node::List(list)] => list.key_value.clone(),
    ///     _ => unreachable!(),
    /// };
    /// assert!(key("c[name: *]").may_meet(&key("c[name: x]")));
    /// assert!(!key("c[name notin (x)]").may_meet(&key("c[name: x]")));
    /// assert!(!key("c[port: 80]").may_meet(&key("c[port: \"80\"]")));
    /// ```
    pub fn may_meet(&self, other: &KeyValue) -> bool {
        match (self, other) {
            (KeyValue::Glob, _) | (_, KeyValue::Glob) => true,
            (KeyValue::NotIn(set), concrete) | (concrete, KeyValue::NotIn(set))
                if concrete.is_concrete() =>
            {
                !set.values()
                    .iter()
                    .any(|literal| KeyValue::from(literal.clone()) == *concrete)
            }
            (KeyValue::NotIn(_), _) | (_, KeyValue::NotIn(_)) => true,
            (a, b) => a == b,
        }
    }
}

impl fmt::Display for KeyValue {
    /// The value side as written after `:`; an exclusion as `notin (a, b)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyValue::Glob => f.write_str("*"),
            KeyValue::String(s) => write_name(f, s),
            KeyValue::Integer(n) => write!(f, "{n}"),
            KeyValue::NotIn(set) => write!(f, "notin {set}"),
        }
    }
}

impl From<Literal> for KeyValue {
    fn from(literal: Literal) -> Self {
        match literal {
            Literal::Integer(n) => KeyValue::Integer(n),
            Literal::String(s) => KeyValue::String(s),
        }
    }
}

// === impl Literal ===

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Literal::Integer(n) => write!(f, "{n}"),
            Literal::String(s) => write_name(f, s),
        }
    }
}

// === impl KeySet ===

impl KeySet {
    /// A set of the given values, in canonical order.
    ///
    /// # Errors
    /// [`KeySetError`] when `values` is empty or lists a value twice
    /// (`0080` and `80` are the same integer).
    pub fn new(values: impl IntoIterator<Item = Literal>) -> Result<KeySet, KeySetError> {
        let mut unique = std::collections::BTreeSet::new();
        for value in values {
            if let Some(twice) = unique.replace(value) {
                return Err(KeySetError::Duplicate(twice));
            }
        }
        KeySet::from_unique(unique).ok_or(KeySetError::Empty)
    }

    /// A set from values already known to be distinct; `None` when empty.
    pub(crate) fn from_unique(values: std::collections::BTreeSet<Literal>) -> Option<KeySet> {
        if values.is_empty() {
            return None;
        }
        Some(KeySet(values.into_iter().collect()))
    }

    /// The values in canonical order (integers, then strings byte-wise). Never empty.
    pub fn values(&self) -> &[Literal] {
        &self.0
    }
}

impl fmt::Display for KeySet {
    /// `(80, 443, http)`: canonical order, each value as a key value is written.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(")?;
        for (i, value) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{value}")?;
        }
        f.write_str(")")
    }
}

/// Characters allowed in an unquoted name (Gatekeeper's scanner: `[A-Za-z0-9_-]`).
pub(crate) fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Whether `s` reads back as the same string without quotes: a non-empty
/// identifier that does not start with a digit (that would be an integer).
fn is_bare(s: &str) -> bool {
    s.chars().next().is_some_and(|c| !c.is_ascii_digit()) && s.chars().all(is_ident_char)
}

/// Writes a name bare when it reads back unchanged, otherwise double-quoted
/// with `\` and `"` escaped (the only escapes the syntax has).
fn write_name(f: &mut fmt::Formatter<'_>, name: &str) -> fmt::Result {
    if is_bare(name) {
        return f.write_str(name);
    }
    f.write_str("\"")?;
    for c in name.chars() {
        if c == '"' || c == '\\' {
            f.write_str("\\")?;
        }
        write!(f, "{c}")?;
    }
    f.write_str("\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(s: &str) -> Node {
        Node::Field(s.to_string())
    }

    fn list(key: &str, value: KeyValue) -> Node {
        Node::List(ListSelector {
            key_field: key.to_string(),
            key_value: value,
        })
    }

    #[test]
    fn display_quotes_only_what_needs_it() {
        let path = Path::from_nodes(vec![
            field("metadata"),
            field("annotations"),
            field("example.com/owner"),
        ])
        .unwrap();
        assert_eq!(
            path.to_string(),
            r#"metadata.annotations."example.com/owner""#
        );

        let path = Path::from_nodes(vec![
            field("spec"),
            field("containers"),
            list("name", KeyValue::Glob),
            field("ports"),
            list("containerPort", KeyValue::Integer(8080)),
            field("x"),
            list("name", KeyValue::String("-80".into())),
            field("y"),
            list("name", KeyValue::String("80".into())),
            field("z"),
            list("", KeyValue::String("*".into())),
        ])
        .unwrap();
        assert_eq!(
            path.to_string(),
            r#"spec.containers[name: *].ports[containerPort: 8080].x[name: -80].y[name: "80"].z["": "*"]"#
        );
    }

    #[test]
    fn display_escapes_quotes_and_backslashes_and_keeps_whitespace() {
        let path = Path::from_nodes(vec![field("a\"b\\c"), field("tab\there\nnl\r")]).unwrap();
        assert_eq!(path.to_string(), "\"a\\\"b\\\\c\".\"tab\there\nnl\r\"");
    }

    #[test]
    fn display_quotes_characters_gatekeeper_forgets() {
        // Gatekeeper's quote() leaves `a/b` and `a\rb` bare, which do not parse back.
        let path = Path::from_nodes(vec![field("a/b"), field("é")]).unwrap();
        assert_eq!(path.to_string(), r#""a/b"."é""#);
    }

    #[test]
    fn from_nodes_checks_the_shape() {
        assert_eq!(Path::from_nodes(vec![]), Err(ShapeError::Empty));
        assert_eq!(
            Path::from_nodes(vec![list("name", KeyValue::Glob)]),
            Err(ShapeError::MisplacedList { index: 0 })
        );
        assert_eq!(
            Path::from_nodes(vec![
                field("a"),
                list("name", KeyValue::Glob),
                list("name", KeyValue::Glob)
            ]),
            Err(ShapeError::MisplacedList { index: 2 })
        );
        assert_eq!(
            ShapeError::MisplacedList { index: 2 }.to_string(),
            "node 2 is a list selector that does not follow a field"
        );
    }

    #[test]
    fn prefixes_compare_nodes_exactly() {
        let cases = [
            ("a.b.c", "a.b.c.d", true),
            ("a.b.c", "a.b.c", true),
            ("a[name: b].c", "a[name: b].c", true),
            (r#"a[name: "b"]"#, "a[name: b].c", true),
            ("a[name: *]", "a[name: *].c", true),
            ("a.b.q", "a.b.c.d", false),
            ("a[name: b].c", "a[name: b]", false),
            (r#"a[name: "r"]"#, "a[name: b].c", false),
            (r#"a[other: "b"]"#, "a[name: b].c", false),
            ("a[name: b]", "a[name: *].c", false),
            ("a[name: *]", "a[name: b].c", false),
            (r#"a[port: "80"]"#, "a[port: 80]", false),
            ("a[port: 0080]", "a[port: 80]", true),
        ];
        for (short, long, want) in cases {
            let short_path = Path::parse(short).unwrap();
            let long_path = Path::parse(long).unwrap();
            assert_eq!(
                short_path.is_prefix_of(&long_path),
                want,
                "{short} prefix of {long}"
            );
        }
    }

    #[test]
    fn has_glob() {
        assert!(Path::parse("a[name: *].b").unwrap().has_glob());
        assert!(!Path::parse(r#"a[name: "*"].b"#).unwrap().has_glob());
    }

    fn set(values: &[Literal]) -> KeySet {
        KeySet::new(values.iter().cloned()).unwrap()
    }

    #[test]
    fn display_prints_exclusions_in_canonical_order() {
        let path = Path::from_nodes(vec![
            field("spec"),
            field("containers"),
            list(
                "name",
                KeyValue::NotIn(set(&[
                    Literal::String("linkerd-proxy".into()),
                    Literal::String("80".into()),
                    Literal::Integer(443),
                    Literal::String("istio-proxy".into()),
                    Literal::Integer(80),
                    Literal::String("a b".into()),
                ])),
            ),
            field("image"),
        ])
        .unwrap();
        assert_eq!(
            path.to_string(),
            r#"spec.containers[name notin (80, 443, "80", "a b", istio-proxy, linkerd-proxy)].image"#
        );
        let quoted_key = list(
            "a\"b",
            KeyValue::NotIn(set(&[Literal::String(String::new())])),
        );
        assert_eq!(quoted_key.to_string(), r#"["a\"b" notin ("")]"#);
    }

    #[test]
    fn key_sets_hold_each_value_once() {
        assert_eq!(KeySet::new([]), Err(KeySetError::Empty));
        assert_eq!(
            KeySet::new([Literal::Integer(80), Literal::Integer(80)]),
            Err(KeySetError::Duplicate(Literal::Integer(80)))
        );
        assert_eq!(
            KeySetError::Duplicate(Literal::String("a b".into())).to_string(),
            r#""a b" is listed twice"#
        );
        assert_eq!(
            KeySetError::Empty.to_string(),
            "a notin set needs at least one value"
        );
        // A string never equals a number.
        let mixed = set(&[Literal::String("80".into()), Literal::Integer(80)]);
        assert_eq!(
            mixed.values(),
            [Literal::Integer(80), Literal::String("80".into())]
        );
    }

    #[test]
    fn exclusions_are_prefixes_of_the_same_set_only() {
        let cases = [
            ("a[name notin (x, y)]", "a[name notin (y, x)].c", true),
            ("a[name notin (x)]", "a[name notin (x)].c", true),
            ("a[name notin (x)]", "a[name notin (x, y)].c", false),
            ("a[name notin (x)]", "a[name: *].c", false),
            ("a[name: *]", "a[name notin (x)].c", false),
            ("a[name: x]", "a[name notin (x)].c", false),
            (r#"a[port notin ("80")]"#, "a[port notin (80)].c", false),
            ("a[port notin (0080)]", "a[port notin (80)].c", true),
        ];
        for (short, long, want) in cases {
            let short_path = Path::parse(short).unwrap();
            let long_path = Path::parse(long).unwrap();
            assert_eq!(
                short_path.is_prefix_of(&long_path),
                want,
                "{short} prefix of {long}"
            );
        }
    }

    #[test]
    fn uses_exclusion_and_is_concrete() {
        assert!(Path::parse("a[name notin (x)].b").unwrap().uses_exclusion());
        assert!(
            Path::parse("a[name: *].b[port notin (80)].c")
                .unwrap()
                .uses_exclusion()
        );
        assert!(!Path::parse("a[name: *].b").unwrap().uses_exclusion());
        assert!(!Path::parse("a[name: notin].b").unwrap().uses_exclusion());
        assert!(!Path::parse("a[name notin (x)].b").unwrap().has_glob());
        assert!(KeyValue::String("x".into()).is_concrete());
        assert!(KeyValue::Integer(1).is_concrete());
        assert!(!KeyValue::Glob.is_concrete());
        assert!(!KeyValue::NotIn(set(&[Literal::Integer(1)])).is_concrete());
    }

    #[test]
    fn serde_uses_the_string_form() {
        let path: Path = serde_json::from_str(r#""spec.containers[name: *].image""#).unwrap();
        assert_eq!(path, Path::parse("spec.containers[name: *].image").unwrap());
        assert_eq!(
            serde_json::to_string(&path).unwrap(),
            r#""spec.containers[name: *].image""#
        );
        let err = serde_json::from_str::<Path>(r#""spec.""#).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid location \"spec.\": trailing '.' at 4\n  spec.\n      ^"
        );
    }
}
