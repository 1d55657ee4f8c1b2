//! Which objects a mutator applies to: `applyTo` (the schemas it knows) and
//! `match` (which objects of those it mutates). Shapes follow Gatekeeper's
//! `pkg/mutation/match`.

use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A set of group/version/kinds and admission operations a mutator is written for.
///
/// A mutator sets a field of a particular schema, so it names the exact
/// groups, versions and kinds it understands. Globs are not expanded here:
/// `"*"` is a literal name that matches nothing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApplyTo {
    /// API groups, such as `""` (core) or `apps`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Kinds, such as `Pod` or `Deployment`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<String>,
    /// API versions, such as `v1`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<String>,
    /// Admission operations that trigger the mutation: `CREATE`, `UPDATE` or
    /// `*` (every operation sartor mutates). Empty means every operation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operations: Vec<OperationPattern>,
}

/// An admission operation sartor mutates on. Gatekeeper mutates only on
/// these two; DELETE and CONNECT never reach the engine. The one type for the
/// operation everywhere: the engine's request, the webhook's review, the CLI's
/// `--operation` and test cases' `operation`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Operation {
    /// An object being created.
    #[serde(rename = "CREATE")]
    #[cfg_attr(feature = "clap", value(name = "CREATE"))]
    Create,
    /// An object being updated.
    #[serde(rename = "UPDATE")]
    #[cfg_attr(feature = "clap", value(name = "UPDATE"))]
    Update,
}

/// An admission operation that triggers a mutation: CREATE, UPDATE, or `*` for both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum OperationPattern {
    /// Object creation.
    #[serde(rename = "CREATE")]
    Create,
    /// Object update.
    #[serde(rename = "UPDATE")]
    Update,
    /// Every operation sartor mutates (today CREATE and UPDATE).
    #[serde(rename = "*")]
    All,
}

/// Criteria limiting which objects get mutated. Criteria are ANDed; a
/// criterion left out matches everything.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Match {
    /// Whether generated (by expansion) or original resources are matched.
    /// `All` when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourcePattern>,
    /// Groups and kinds of objects to mutate; one entry matching is enough.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<Kinds>,
    /// Whether cluster-scoped and/or namespaced objects are matched. `*` when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Scope>,
    /// Mutate only objects in these namespaces. A leading or trailing `*` is a
    /// glob: `kube-*` matches `kube-system`, `*-system` matches `sartor-system`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<Wildcard>,
    /// Never mutate objects in these namespaces (same globs as `namespaces`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excluded_namespaces: Vec<Wildcard>,
    /// Mutate only objects whose labels match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// Mutate only objects whose namespace's labels match (for a Namespace,
    /// its own labels).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// Mutate only objects with this name; a leading or trailing `*` is a glob.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Wildcard>,
}

/// Groups and kinds, as in a `match.kinds` entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Kinds {
    /// API groups; `*` is every group.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    /// Kinds; `*` is every kind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<String>,
}

/// Whether generated resources (from expansion), original ones, or both (`All`) are matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum SourcePattern {
    /// Both original and generated resources.
    All,
    /// Only resources generated by expansion.
    Generated,
    /// Only resources as submitted.
    Original,
}

/// Whether an object is one a user wrote or one generated from another
/// (Gatekeeper's expansion of a Deployment's Pod template); `match.source`
/// selects on it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Source {
    /// An object as submitted; what the webhook and the CLI mutate.
    #[default]
    Original,
    /// An object generated from another one.
    Generated,
}

/// Which objects are matched by scope: `Cluster` (cluster-scoped, including
/// Namespaces), `Namespaced`, or `*` for both.
//
// Gatekeeper accepts any string here and treats unknown values like `*`;
// sartor rejects them, since a typo (`namespaced`) would otherwise widen the
// mutator to every object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Scope {
    /// Cluster-scoped and namespaced objects.
    #[serde(rename = "*")]
    All,
    /// Only cluster-scoped objects (a Namespace is one).
    Cluster,
    /// Only namespaced objects.
    Namespaced,
}

/// A label selector: `matchLabels` and `matchExpressions`, ANDed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelector {
    /// Labels that must be present with exactly these values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Requirements on labels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

/// One `matchExpressions` requirement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelectorRequirement {
    /// The label key.
    pub key: String,
    /// How the label relates to `values`.
    pub operator: SelectorOperator,
    /// Values for `In` and `NotIn`; empty for `Exists` and `DoesNotExist`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// How a label relates to the values: In, NotIn (also true when the label is absent), Exists, DoesNotExist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum SelectorOperator {
    /// The label is present with one of the values.
    In,
    /// The label is absent or has none of the values.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
}

/// A name that may start and/or end with a `*` glob (`kube-*`, `*-system`,
/// `*prod*`). Like Gatekeeper, only lowercase letters, digits, `-` and `:` may
/// stand between the globs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct Wildcard(String);

/// The pattern Gatekeeper's CRDs enforce on namespace and name globs.
pub const WILDCARD_PATTERN: &str = r"^\*?[-:a-z0-9]*\*?$";

/// A string that is not a valid [`Wildcard`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid glob {0:?}: only lowercase letters, digits, '-' and ':', with an optional '*' at the start and/or end"
)]
pub struct InvalidWildcard(pub String);

// === impl Operation ===

impl Operation {
    /// Both operations, in Gatekeeper's order.
    pub const ALL: [Operation; 2] = [Operation::Create, Operation::Update];

    /// The admission spelling, `CREATE` or `UPDATE`.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An admission operation sartor does not mutate on (DELETE, CONNECT, ...).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an operation sartor mutates on: {0:?} (CREATE or UPDATE)")]
pub struct UnknownOperation(pub String);

impl std::str::FromStr for Operation {
    type Err = UnknownOperation;

    /// `CREATE` or `UPDATE`, as in an AdmissionReview.
    fn from_str(s: &str) -> Result<Operation, UnknownOperation> {
        Operation::ALL
            .into_iter()
            .find(|op| op.as_str() == s)
            .ok_or_else(|| UnknownOperation(s.to_string()))
    }
}

// === impl OperationPattern ===

impl OperationPattern {
    /// The operations it stands for.
    pub fn operations(self) -> &'static [Operation] {
        match self {
            OperationPattern::Create => &[Operation::Create],
            OperationPattern::Update => &[Operation::Update],
            OperationPattern::All => &Operation::ALL,
        }
    }
}

// === impl SourcePattern ===

impl SourcePattern {
    /// Whether an object of `source` is matched.
    pub fn covers(self, source: Source) -> bool {
        match self {
            SourcePattern::All => true,
            SourcePattern::Generated => source == Source::Generated,
            SourcePattern::Original => source == Source::Original,
        }
    }
}

// === impl SelectorOperator ===

impl SelectorOperator {
    /// The operator as written in `matchExpressions`: `In`, `NotIn`,
    /// `Exists` or `DoesNotExist`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            SelectorOperator::In => "In",
            SelectorOperator::NotIn => "NotIn",
            SelectorOperator::Exists => "Exists",
            SelectorOperator::DoesNotExist => "DoesNotExist",
        }
    }
}

impl fmt::Display for SelectorOperator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

// === impl Wildcard ===

impl Wildcard {
    /// Checks `pattern` against [`WILDCARD_PATTERN`].
    ///
    /// # Errors
    /// [`InvalidWildcard`] naming the pattern.
    pub fn new(pattern: impl Into<String>) -> Result<Wildcard, InvalidWildcard> {
        let pattern = pattern.into();
        let inner = pattern.strip_prefix('*').unwrap_or(&pattern);
        let inner = inner.strip_suffix('*').unwrap_or(inner);
        let valid = inner
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == ':');
        if valid {
            Ok(Wildcard(pattern))
        } else {
            Err(InvalidWildcard(pattern))
        }
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `candidate` matches: `*x*` contains, `*x` ends with, `x*`
    /// starts with, anything else is equality.
    pub fn matches(&self, candidate: &str) -> bool {
        self.test().holds(candidate)
    }

    /// Whether an object created with `generateName: prefix` may match: only
    /// patterns ending in `*` can (Gatekeeper: `*x*` and `x*` compare the
    /// prefix, an exact or `*x` pattern never matches a generated name).
    pub fn matches_generate_name(&self, prefix: &str) -> bool {
        self.generate_name_test().holds(prefix)
    }

    /// [`Wildcard::matches`] as a CEL expression on the string expression
    /// `subject`, for the MutatingAdmissionPolicy export.
    pub fn cel(&self, subject: &str) -> String {
        self.test().cel(subject)
    }

    /// [`Wildcard::matches_generate_name`] as a CEL expression on the string
    /// expression `subject`.
    pub fn cel_generate_name(&self, subject: &str) -> String {
        self.generate_name_test().cel(subject)
    }

    /// How a name is compared.
    fn test(&self) -> StringTest<'_> {
        let p = self.0.as_str();
        match (p.strip_prefix('*'), p.strip_suffix('*')) {
            (Some(rest), Some(_)) => StringTest::Contains(rest.strip_suffix('*').unwrap_or(rest)),
            (Some(suffix), None) => StringTest::EndsWith(suffix),
            (None, Some(prefix)) => StringTest::StartsWith(prefix),
            (None, None) => StringTest::Equals(p),
        }
    }

    /// How a `generateName` prefix is compared.
    fn generate_name_test(&self) -> StringTest<'_> {
        let p = self.0.as_str();
        let Some(head) = p.strip_suffix('*') else {
            return StringTest::Never;
        };
        match head.strip_prefix('*') {
            Some(middle) => StringTest::Contains(middle),
            None if p.starts_with('*') => StringTest::Always,
            None => StringTest::StartsWith(head),
        }
    }
}

/// `text` as a CEL string literal: a JSON string is one (the same escapes).
/// The one quoting of every CEL sartor writes.
pub fn cel_string(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// One comparison of a string, so that a [`Wildcard`]'s rule is written once
/// and both evaluated and rendered as CEL from it.
enum StringTest<'a> {
    Contains(&'a str),
    EndsWith(&'a str),
    StartsWith(&'a str),
    Equals(&'a str),
    Always,
    Never,
}

impl StringTest<'_> {
    fn holds(&self, subject: &str) -> bool {
        match *self {
            StringTest::Contains(middle) => subject.contains(middle),
            StringTest::EndsWith(suffix) => subject.ends_with(suffix),
            StringTest::StartsWith(prefix) => subject.starts_with(prefix),
            StringTest::Equals(exact) => subject == exact,
            StringTest::Always => true,
            StringTest::Never => false,
        }
    }

    fn cel(&self, subject: &str) -> String {
        let string = cel_string;
        match *self {
            StringTest::Contains(middle) => format!("{subject}.contains({})", string(middle)),
            StringTest::EndsWith(suffix) => format!("{subject}.endsWith({})", string(suffix)),
            StringTest::StartsWith(prefix) => format!("{subject}.startsWith({})", string(prefix)),
            StringTest::Equals(exact) => format!("{subject} == {}", string(exact)),
            StringTest::Always => "true".to_string(),
            StringTest::Never => "false".to_string(),
        }
    }
}

impl std::str::FromStr for Wildcard {
    type Err = InvalidWildcard;

    fn from_str(pattern: &str) -> Result<Wildcard, InvalidWildcard> {
        Wildcard::new(pattern)
    }
}

impl fmt::Display for Wildcard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Wildcard {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        Wildcard::new(s).map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for Wildcard {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Wildcard".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": WILDCARD_PATTERN,
            "description": "A name with an optional '*' glob at its start and/or end: \"kube-*\" matches \"kube-system\", \"*-system\" matches \"sartor-system\", \"*prod*\" matches \"eu-prod-1\"."
        })
    }

    fn inline_schema() -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_glob_at_either_end() {
        let cases = [
            ("kube-*", "kube-system", true),
            ("kube-*", "kube", false),
            ("*-system", "sartor-system", true),
            ("*-system", "system", false),
            ("*prod*", "eu-prod-1", true),
            ("*prod*", "staging", false),
            ("*", "anything", true),
            ("*", "", true),
            ("**", "x", true),
            ("default", "default", true),
            ("default", "default2", false),
            ("", "", true),
        ];
        for (pattern, candidate, want) in cases {
            let w = Wildcard::new(pattern).unwrap();
            assert_eq!(w.matches(candidate), want, "{pattern} ~ {candidate}");
        }
    }

    #[test]
    fn generate_names_match_only_patterns_open_at_the_end() {
        let cases = [
            ("web-*", "web-", true),
            ("web-*", "api-", false),
            ("*web*", "my-web-", true),
            ("*", "x-", true),
            ("web-", "web-", false),
            ("*-web", "x-web", false),
        ];
        for (pattern, prefix, want) in cases {
            let w = Wildcard::new(pattern).unwrap();
            assert_eq!(
                w.matches_generate_name(prefix),
                want,
                "{pattern} ~ {prefix}"
            );
        }
    }

    #[test]
    fn wildcards_render_as_cel_like_gatekeepers() {
        let w = |p: &str| Wildcard::new(p).unwrap();
        assert_eq!(w("kube-*").cel("n"), r#"n.startsWith("kube-")"#);
        assert_eq!(w("*-system").cel("n"), r#"n.endsWith("-system")"#);
        assert_eq!(w("*mid*").cel("n"), r#"n.contains("mid")"#);
        assert_eq!(w("shop").cel("n"), r#"n == "shop""#);
        assert_eq!(w("shop").cel_generate_name("g"), "false");
        assert_eq!(w("web-*").cel_generate_name("g"), r#"g.startsWith("web-")"#);
    }

    #[test]
    fn wildcards_follow_gatekeepers_pattern() {
        let re = regex::Regex::new(WILDCARD_PATTERN).unwrap();
        for s in [
            "kube-*", "*-system", "*a:b*", "", "*", "**", "a*", "Kube", "a*b", "a_b", "***", "é",
        ] {
            assert_eq!(Wildcard::new(s).is_ok(), re.is_match(s), "{s:?}");
        }
        assert_eq!(
            Wildcard::new("a*b").unwrap_err().to_string(),
            r#"invalid glob "a*b": only lowercase letters, digits, '-' and ':', with an optional '*' at the start and/or end"#
        );
    }

    #[test]
    fn operations_and_enums_use_the_api_spelling() {
        let ops: Vec<OperationPattern> =
            serde_json::from_str(r#"["CREATE", "UPDATE", "*"]"#).unwrap();
        assert_eq!(
            ops,
            [
                OperationPattern::Create,
                OperationPattern::Update,
                OperationPattern::All
            ]
        );
        let scope: Scope = serde_json::from_str(r#""*""#).unwrap();
        assert_eq!(scope, Scope::All);
        let err = serde_json::from_str::<Scope>(r#""namespaced""#).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown variant `namespaced`, expected one of `*`, `Cluster`, `Namespaced` at line 1 column 12"
        );
    }
}

/// A group, version and kind as Kubernetes' JSON spells one (an admission
/// request's `kind`, an ExpansionTemplate's `generatedGVK`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupVersionKind {
    /// The API group; `""` for the core group.
    #[serde(default)]
    pub group: String,
    /// The version, such as `v1`.
    #[serde(default)]
    pub version: String,
    /// The kind, such as `Pod`.
    #[serde(default)]
    pub kind: String,
}
