//! Kubernetes label selectors, validated once when a mutator is compiled and
//! then matched without allocating.
//!
//! ```text
//!   matchLabels + matchExpressions ──▶ Selector::new (validate) ──▶ Selector::matches(labels)
//! ```
//!
//! Gatekeeper matches `match.labelSelector` and `match.namespaceSelector` with
//! `metav1.LabelSelectorAsSelector` and `selector.Matches(labels.Set(...))`.
//! This module ports those rules from k8s.io/apimachinery v0.36.3, the version
//! Gatekeeper vendors:
//!
//! - `LabelSelectorAsSelector` (`pkg/apis/meta/v1/helpers.go`): each
//!   `matchLabels` entry is one requirement `key = value`, each
//!   `matchExpressions` entry one requirement, and every requirement must
//!   hold. A selector with neither matches everything.
//! - `NewRequirement` and `Requirement.Matches` (`pkg/labels/selector.go`):
//!   `In` and `NotIn` need at least one value, `Exists` and `DoesNotExist`
//!   none; keys must be label keys and values label values.
//! - `IsLabelKey` (formerly `validation.IsQualifiedName`), `IsLabelValue`
//!   (formerly `validation.IsValidLabelValue`) and `IsDNS1123Subdomain`
//!   (`pkg/api/validate/content`), with their exact messages. apimachinery
//!   v0.35 changed two of them: lengths are "no more than N bytes" (before:
//!   "characters") and a key with two slashes is "a valid label key ..."
//!   (before: "a qualified name ...").
//!
//! Where Kubernetes reports every problem of a requirement at once,
//! [`Selector::new`] reports the first one, checked in Kubernetes' order:
//! `matchLabels` before `matchExpressions`, and within a requirement the key,
//! then the number of values, then each value.
//!
//! The checks are written by hand over bytes rather than with regexes; each
//! one documents the Kubernetes pattern it stands for. Like Go's `regexp`,
//! they are ASCII-only, and a trailing newline does not match `$`.

pub use sartor_api::SelectorOperator;
use sartor_api::validation::{validate_label_key, validate_label_value};
use serde_json::{Map, Value};

/// A compiled label selector: every requirement must hold.
///
/// Built by [`Selector::new`], which validates keys and values like the API
/// server; matched by [`Selector::matches`], which does not allocate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

/// Why a label selector is invalid. Each variant is one Kubernetes rule; the
/// message names the offending key and value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SelectorError {
    /// A key is not a valid label key (an optional DNS-1123 subdomain prefix
    /// of at most 253 bytes and a `/`, then a name of at most 63 bytes).
    #[error("invalid label selector key {key:?}: {message}")]
    InvalidKey {
        /// The key as written.
        key: String,
        /// Kubernetes' messages, joined with `"; "`.
        message: String,
    },
    /// A value is not a valid label value (at most 63 bytes; empty allowed).
    #[error("invalid label selector value {value:?} for key {key:?}: {message}")]
    InvalidValue {
        /// The key the value belongs to.
        key: String,
        /// The value as written.
        value: String,
        /// Kubernetes' messages, joined with `"; "`.
        message: String,
    },
    /// An `In` or `NotIn` requirement has no values.
    #[error(
        "invalid label selector requirement on key {key:?} ({operator}): for 'in', 'notin' operators, values set can't be empty"
    )]
    MissingValues {
        /// The requirement's key.
        key: String,
        /// `In` or `NotIn`.
        operator: SelectorOperator,
    },
    /// An `Exists` or `DoesNotExist` requirement has values.
    #[error(
        "invalid label selector requirement on key {key:?} ({operator}, values {values:?}): values set must be empty for exists and does not exist"
    )]
    UnexpectedValues {
        /// The requirement's key.
        key: String,
        /// `Exists` or `DoesNotExist`.
        operator: SelectorOperator,
        /// The values that should not be there.
        values: Vec<String>,
    },
}

// === impl Selector ===

impl Selector {
    /// Builds a selector from `matchLabels` and `matchExpressions` (key,
    /// operator, values), validating keys and values like the API server.
    /// Each `matchLabels` entry becomes `key In [value]` (Kubernetes makes it
    /// `key = value`, which validates and matches alike). A key that appears
    /// in both keeps both requirements. With neither, the selector is empty
    /// and matches everything (Kubernetes' `labels.Everything()`); a selector
    /// that is not set at all is the caller's business (Gatekeeper then
    /// matches every object).
    ///
    /// # Errors
    ///
    /// The first rule broken, in Kubernetes' order: [`SelectorError::InvalidKey`],
    /// [`SelectorError::MissingValues`] or [`SelectorError::UnexpectedValues`],
    /// then [`SelectorError::InvalidValue`].
    pub fn new<'a>(
        match_labels: impl IntoIterator<Item = (&'a str, &'a str)>,
        match_expressions: impl IntoIterator<Item = (&'a str, SelectorOperator, &'a [String])>,
    ) -> Result<Selector, SelectorError> {
        let mut requirements = Vec::new();
        for (key, value) in match_labels {
            requirements.push(Requirement::new(
                key,
                SelectorOperator::In,
                vec![value.to_owned()],
            )?);
        }
        for (key, operator, values) in match_expressions {
            requirements.push(Requirement::new(key, operator, values.to_vec())?);
        }
        Ok(Selector { requirements })
    }

    /// Whether a label set matches: every requirement holds.
    ///
    /// `labels` is an object's `metadata.labels`, or `None` when it is
    /// absent, `null` or not an object (all of which Kubernetes reads as no
    /// labels).
    ///
    /// Label values are read like Gatekeeper's `Unstructured.GetLabels()`:
    /// a `null` value is the empty string, and if any value is neither a
    /// string nor `null` the whole map cannot be read as labels and the
    /// object is matched as having no labels at all. (The API server never
    /// admits such an object; this only matters for objects read from files.)
    ///
    /// Does not allocate.
    #[must_use]
    pub fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        if self.requirements.is_empty() {
            return true;
        }
        let labels = labels.filter(|labels| is_label_map(labels));
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Whether the selector has no requirement (matches everything).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The label keys it reads.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.requirements.iter().map(|r| r.key.as_str())
    }

    /// Whether some label set matches both `self` and `other` (with
    /// `other` `None`, `self` alone): no key is required both present and
    /// absent, or to hold a value that no `In` and `NotIn` of it allows.
    #[must_use]
    pub fn satisfiable_with(&self, other: Option<&Selector>) -> bool {
        let all: Vec<&Requirement> = self
            .requirements
            .iter()
            .chain(other.into_iter().flat_map(|o| o.requirements.iter()))
            .collect();
        all.iter().all(|first| {
            let on_key = || all.iter().filter(|r| r.key == first.key);
            let absent = on_key().any(|r| r.operator == SelectorOperator::DoesNotExist);
            let present = on_key()
                .any(|r| matches!(r.operator, SelectorOperator::In | SelectorOperator::Exists));
            if absent {
                return !present;
            }
            let mut allowed: Option<Vec<&String>> = None;
            for r in on_key().filter(|r| r.operator == SelectorOperator::In) {
                allowed = Some(match allowed {
                    None => r.values.iter().collect(),
                    Some(values) => values
                        .into_iter()
                        .filter(|v| r.values.contains(v))
                        .collect(),
                });
            }
            allowed.is_none_or(|values| {
                values.iter().any(|v| {
                    !on_key().any(|r| r.operator == SelectorOperator::NotIn && r.values.contains(v))
                })
            })
        })
    }

    /// Whether every label set `other` matches, `self` matches too: each of
    /// its requirements is one of `other`'s (a sufficient test, not a
    /// complete one).
    #[must_use]
    pub fn is_implied_by(&self, other: &Selector) -> bool {
        self.requirements
            .iter()
            .all(|r| other.requirements.contains(r))
    }
}

/// One requirement: `key operator values`, valid by construction.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    key: String,
    operator: SelectorOperator,
    values: Vec<String>,
}

// === impl Requirement ===

impl Requirement {
    /// Kubernetes' `NewRequirement`, reporting the first problem.
    fn new(
        key: &str,
        operator: SelectorOperator,
        values: Vec<String>,
    ) -> Result<Self, SelectorError> {
        validate_label_key(key).map_err(|message| SelectorError::InvalidKey {
            key: key.to_owned(),
            message,
        })?;
        match operator {
            SelectorOperator::In | SelectorOperator::NotIn if values.is_empty() => {
                return Err(SelectorError::MissingValues {
                    key: key.to_owned(),
                    operator,
                });
            }
            SelectorOperator::Exists | SelectorOperator::DoesNotExist if !values.is_empty() => {
                return Err(SelectorError::UnexpectedValues {
                    key: key.to_owned(),
                    operator,
                    values,
                });
            }
            _ => {}
        }
        if let Some((value, message)) = values
            .iter()
            .find_map(|v| validate_label_value(v).err().map(|message| (v, message)))
        {
            return Err(SelectorError::InvalidValue {
                key: key.to_owned(),
                value: value.clone(),
                message,
            });
        }
        Ok(Requirement {
            key: key.to_owned(),
            operator,
            values,
        })
    }

    /// Kubernetes' `Requirement.Matches`. `labels` has already been checked
    /// with [`is_label_map`].
    fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        let value = lookup(labels, &self.key);
        match self.operator {
            SelectorOperator::In => value.is_some_and(|v| self.has_value(v)),
            SelectorOperator::NotIn => value.is_none_or(|v| !self.has_value(v)),
            SelectorOperator::Exists => value.is_some(),
            SelectorOperator::DoesNotExist => value.is_none(),
        }
    }

    fn has_value(&self, value: &str) -> bool {
        self.values.iter().any(|v| v == value)
    }
}

/// Whether every value of `labels` reads as a label value (a string, or
/// `null` for the empty string), as `NestedNullCoercingStringMap` requires.
fn is_label_map(labels: &Map<String, Value>) -> bool {
    labels.values().all(|v| v.is_string() || v.is_null())
}

/// The value of label `key`, with `null` read as the empty string.
fn lookup<'l>(labels: Option<&'l Map<String, Value>>, key: &str) -> Option<&'l str> {
    match labels?.get(key)? {
        Value::String(s) => Some(s),
        // Only strings and nulls get past `is_label_map`.
        _ => Some(""),
    }
}

// === validation ===

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Kubernetes' message for a name part that does not match its pattern.
    const NAME_PATTERN: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    /// Kubernetes' message for a prefix that is not a DNS-1123 subdomain.
    const PREFIX_PATTERN: &str = r"prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    /// Kubernetes' message for a key with more than one '/'.
    const TOO_MANY_SLASHES: &str = "a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')";
    /// Kubernetes' message for a value that does not match its pattern.
    const VALUE_PATTERN: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

    /// One `matchExpressions` entry: key, operator, values.
    type Req<'a> = (&'a str, SelectorOperator, &'a [&'a str]);
    /// What [`Selector::matches`] takes.
    type Labels<'a> = Option<&'a Map<String, Value>>;

    fn a(n: usize) -> String {
        "a".repeat(n)
    }

    fn strings(values: &[&str]) -> Vec<String> {
        values.iter().map(|v| (*v).to_owned()).collect()
    }

    /// A selector from `matchExpressions` only.
    fn exprs(expressions: &[Req<'_>]) -> Result<Selector, SelectorError> {
        let owned: Vec<(&str, SelectorOperator, Vec<String>)> = expressions
            .iter()
            .map(|(k, op, vs)| (*k, *op, strings(vs)))
            .collect();
        Selector::new([], owned.iter().map(|(k, op, vs)| (*k, *op, vs.as_slice())))
    }

    fn labels(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    // --- keys (content.TestIsLabelKey, plus exact messages) ---

    #[test]
    fn valid_keys() {
        let long_prefixed = format!("{}/{}", a(253), "b".repeat(63));
        let cases = [
            "simple",
            "now-with-dashes",
            "1-starts-with-num",
            "1234",
            "simple/simple",
            "now-with-dashes/simple",
            "now-with-dashes/now-with-dashes",
            "now.with.dots/simple",
            "now-with.dashes-and.dots/simple",
            "1-num.2-num/3-num",
            "1234/5678",
            "1.2.3.4/5678",
            "Uppercase_Is_OK_123",
            "example.com/Uppercase_Is_OK_123",
            "requests.storage-foo",
            "example.com/foo",
            "example/com",
            "a",
            "a.b_c-d",
            &a(63),
            &long_prefixed,
        ];
        for key in cases {
            assert_eq!(validate_label_key(key), Ok(()), "{key:?}");
        }
    }

    #[test]
    fn invalid_keys_exact_messages() {
        let too_long_name = "name part must be no more than 63 bytes".to_owned();
        let cases: Vec<(String, String)> = vec![
            ("Example.com/abc".into(), PREFIX_PATTERN.into()),
            ("UPPER/abc".into(), PREFIX_PATTERN.into()),
            ("example_com/abc".into(), PREFIX_PATTERN.into()),
            ("example..com/abc".into(), PREFIX_PATTERN.into()),
            ("-example.com/abc".into(), PREFIX_PATTERN.into()),
            ("example.com-/abc".into(), PREFIX_PATTERN.into()),
            (a(64), too_long_name.clone()),
            (a(254), too_long_name.clone()),
            (format!("example.com/{}", a(64)), too_long_name.clone()),
            ("a/b/c".into(), TOO_MANY_SLASHES.into()),
            ("only/one/slash".into(), TOO_MANY_SLASHES.into()),
            ("//".into(), TOO_MANY_SLASHES.into()),
            (
                "".into(),
                format!("name part must be non-empty; {NAME_PATTERN}"),
            ),
            ("-a".into(), NAME_PATTERN.into()),
            // validation_test.go TestIsDomainPrefixedKey, whose messages come from IsLabelKey.
            ("example/foo/bar".into(), TOO_MANY_SLASHES.into()),
            ("/example/foo".into(), TOO_MANY_SLASHES.into()),
            ("example.com/_e".into(), NAME_PATTERN.into()),
            ("example.com/e_".into(), NAME_PATTERN.into()),
            ("example.com/e?".into(), NAME_PATTERN.into()),
            ("example.com/e_$".into(), NAME_PATTERN.into()),
            ("a-".into(), NAME_PATTERN.into()),
            ("-cantstartwithadash-".into(), NAME_PATTERN.into()),
            ("cantendwithadash-".into(), NAME_PATTERN.into()),
            ("_a".into(), NAME_PATTERN.into()),
            (".a".into(), NAME_PATTERN.into()),
            ("nospecialchars%^=@".into(), NAME_PATTERN.into()),
            ("has space".into(), NAME_PATTERN.into()),
            ("Māori".into(), NAME_PATTERN.into()),
            // Go's `$` does not match before a trailing newline.
            ("abc\n".into(), NAME_PATTERN.into()),
            (
                "example.com/".into(),
                format!("name part must be non-empty; {NAME_PATTERN}"),
            ),
            ("/simple".into(), "prefix part must be non-empty".into()),
            (
                "/".into(),
                format!(
                    "prefix part must be non-empty; name part must be non-empty; {NAME_PATTERN}"
                ),
            ),
            (
                format!("{}/abc", a(254)),
                "prefix part must be no more than 253 bytes".into(),
            ),
            (
                format!("{}/abc", "A".repeat(254)),
                format!("prefix part must be no more than 253 bytes; {PREFIX_PATTERN}"),
            ),
            (
                format!("_/-{}", a(63)),
                format!("{PREFIX_PATTERN}; {too_long_name}; {NAME_PATTERN}"),
            ),
        ];
        for (key, want) in cases {
            assert_eq!(validate_label_key(&key), Err(want), "{key:?}");
        }
    }

    // --- values (content.TestIsLabelValue, plus exact messages) ---

    #[test]
    fn valid_values() {
        for value in [
            "",
            "simple",
            "now-with-dashes",
            "1-starts-with-num",
            "end-with-num-1",
            "1234",
            "a",
            "MyValue",
            "my_value",
            "a.b_c-D",
            &a(63),
        ] {
            assert_eq!(validate_label_value(value), Ok(()), "{value:?}");
        }
    }

    #[test]
    fn invalid_values_exact_messages() {
        let too_long = "must be no more than 63 bytes";
        let cases: Vec<(String, String)> = vec![
            (a(64), too_long.into()),
            (
                format!("-{}", a(63)),
                format!("{too_long}; {VALUE_PATTERN}"),
            ),
            ("nospecialchars%^=@".into(), VALUE_PATTERN.into()),
            ("Tama-nui-te-rā.is.Māori.sun".into(), VALUE_PATTERN.into()),
            ("\\backslashes\\are\\bad".into(), VALUE_PATTERN.into()),
            ("-starts-with-dash".into(), VALUE_PATTERN.into()),
            ("ends-with-dash-".into(), VALUE_PATTERN.into()),
            (".starts.with.dot".into(), VALUE_PATTERN.into()),
            ("ends.with.dot.".into(), VALUE_PATTERN.into()),
            ("a b".into(), VALUE_PATTERN.into()),
            ("a/b".into(), VALUE_PATTERN.into()),
            (" ".into(), VALUE_PATTERN.into()),
            ("abc\n".into(), VALUE_PATTERN.into()),
        ];
        for (value, want) in cases {
            assert_eq!(validate_label_value(&value), Err(want), "{value:?}");
        }
    }

    // --- building selectors (TestRequirementConstructor, LabelSelectorAsSelector) ---

    #[test]
    fn constructor_accepts() {
        let cases: [Req<'_>; 8] = [
            ("x3", SelectorOperator::In, &["foo"]),
            ("x4", SelectorOperator::NotIn, &["foo"]),
            ("x6", SelectorOperator::Exists, &[]),
            ("x7", SelectorOperator::DoesNotExist, &[]),
            ("x9", SelectorOperator::In, &["bar", "foo", ""]),
            ("x10", SelectorOperator::NotIn, &[""]),
            ("example.com/x", SelectorOperator::In, &["A_b.c-1"]),
            ("k", SelectorOperator::In, &["a", "a"]),
        ];
        for (key, op, values) in cases {
            let selector = exprs(&[(key, op, values)]);
            assert!(selector.is_ok(), "{key} {op} {values:?}: {selector:?}");
            assert!(!selector.is_ok_and(|s| s.is_empty()));
        }
    }

    #[test]
    fn constructor_rejects() {
        let cases: Vec<(&str, SelectorOperator, &[&str], SelectorError)> = vec![
            (
                "x1",
                SelectorOperator::In,
                &[],
                SelectorError::MissingValues {
                    key: "x1".into(),
                    operator: SelectorOperator::In,
                },
            ),
            (
                "x2",
                SelectorOperator::NotIn,
                &[],
                SelectorError::MissingValues {
                    key: "x2".into(),
                    operator: SelectorOperator::NotIn,
                },
            ),
            (
                "x8",
                SelectorOperator::Exists,
                &["foo"],
                SelectorError::UnexpectedValues {
                    key: "x8".into(),
                    operator: SelectorOperator::Exists,
                    values: strings(&["foo"]),
                },
            ),
            (
                "x8b",
                SelectorOperator::DoesNotExist,
                &[""],
                SelectorError::UnexpectedValues {
                    key: "x8b".into(),
                    operator: SelectorOperator::DoesNotExist,
                    values: strings(&[""]),
                },
            ),
            (
                "x17",
                SelectorOperator::In,
                &["ok", "a b", "-"],
                SelectorError::InvalidValue {
                    key: "x17".into(),
                    value: "a b".into(),
                    message: VALUE_PATTERN.into(),
                },
            ),
            (
                "Example.com/abc",
                SelectorOperator::Exists,
                &[],
                SelectorError::InvalidKey {
                    key: "Example.com/abc".into(),
                    message: PREFIX_PATTERN.into(),
                },
            ),
            // The key is checked first, then the number of values, then each value.
            (
                "-a",
                SelectorOperator::In,
                &[],
                SelectorError::InvalidKey {
                    key: "-a".into(),
                    message: NAME_PATTERN.into(),
                },
            ),
            (
                "a/b/c",
                SelectorOperator::Exists,
                &["-"],
                SelectorError::InvalidKey {
                    key: "a/b/c".into(),
                    message: TOO_MANY_SLASHES.into(),
                },
            ),
            (
                "x",
                SelectorOperator::Exists,
                &["-"],
                SelectorError::UnexpectedValues {
                    key: "x".into(),
                    operator: SelectorOperator::Exists,
                    values: strings(&["-"]),
                },
            ),
        ];
        for (key, op, values, want) in cases {
            assert_eq!(
                exprs(&[(key, op, values)]),
                Err(want),
                "{key} {op} {values:?}"
            );
        }
    }

    #[test]
    fn match_labels_are_validated_first() {
        let long = a(64);
        let got = Selector::new(
            [("Key", "ok"), ("key", long.as_str())],
            [("-bad", SelectorOperator::Exists, &[][..])],
        );
        assert_eq!(
            got,
            Err(SelectorError::InvalidValue {
                key: "key".into(),
                value: long.clone(),
                message: "must be no more than 63 bytes".into(),
            })
        );
        let got = Selector::new([("a/b/c", "")], []);
        assert_eq!(
            got,
            Err(SelectorError::InvalidKey {
                key: "a/b/c".into(),
                message: TOO_MANY_SLASHES.into(),
            })
        );
        // The first bad expression wins.
        let got = exprs(&[
            ("ok", SelectorOperator::Exists, &[]),
            ("x", SelectorOperator::In, &[]),
            ("", SelectorOperator::Exists, &[]),
        ]);
        assert_eq!(
            got,
            Err(SelectorError::MissingValues {
                key: "x".into(),
                operator: SelectorOperator::In,
            })
        );
    }

    #[test]
    fn error_messages() {
        let cases = [
            (
                SelectorError::InvalidKey {
                    key: "-a".into(),
                    message: NAME_PATTERN.into(),
                },
                format!("invalid label selector key \"-a\": {NAME_PATTERN}"),
            ),
            (
                SelectorError::InvalidValue {
                    key: "app".into(),
                    value: "a b".into(),
                    message: VALUE_PATTERN.into(),
                },
                format!("invalid label selector value \"a b\" for key \"app\": {VALUE_PATTERN}"),
            ),
            (
                SelectorError::MissingValues {
                    key: "app".into(),
                    operator: SelectorOperator::NotIn,
                },
                "invalid label selector requirement on key \"app\" (NotIn): for 'in', 'notin' operators, values set can't be empty".into(),
            ),
            (
                SelectorError::UnexpectedValues {
                    key: "app".into(),
                    operator: SelectorOperator::DoesNotExist,
                    values: strings(&["web", ""]),
                },
                "invalid label selector requirement on key \"app\" (DoesNotExist, values [\"web\", \"\"]): values set must be empty for exists and does not exist".into(),
            ),
        ];
        for (err, want) in cases {
            assert_eq!(err.to_string(), want);
        }
    }

    #[test]
    fn operator_names() {
        let got: Vec<String> = [
            SelectorOperator::In,
            SelectorOperator::NotIn,
            SelectorOperator::Exists,
            SelectorOperator::DoesNotExist,
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(got, ["In", "NotIn", "Exists", "DoesNotExist"]);
    }

    // --- matching (TestRequirementSelectorMatching, TestSelectorMatches) ---

    #[test]
    fn empty_selector_matches_everything() {
        let selector = Selector::new([], []).unwrap();
        assert!(selector.is_empty());
        assert!(selector.matches(None));
        assert!(selector.matches(Some(&Map::new())));
        assert!(selector.matches(Some(&labels(json!({"x": "y"})))));
        assert!(selector.matches(Some(&labels(json!({"x": 1})))));
    }

    #[test]
    fn operators() {
        let present = labels(json!({"app": "web", "tier": "", "other": "x"}));
        let present = Some(&present);
        let empty = Map::new();
        let empty = Some(&empty);
        // (requirement, labels, want)
        let cases: Vec<(Req<'_>, Labels<'_>, bool)> = vec![
            // In: present with one of the values.
            (("app", SelectorOperator::In, &["web"]), present, true),
            (("app", SelectorOperator::In, &["db", "web"]), present, true),
            (("app", SelectorOperator::In, &["db"]), present, false),
            (("app", SelectorOperator::In, &["Web"]), present, false),
            (("app", SelectorOperator::In, &["web"]), empty, false),
            (("app", SelectorOperator::In, &["web"]), None, false),
            (("missing", SelectorOperator::In, &[""]), present, false),
            (("tier", SelectorOperator::In, &[""]), present, true),
            (("tier", SelectorOperator::In, &["web"]), present, false),
            // NotIn: absent, or present with none of the values.
            (("app", SelectorOperator::NotIn, &["web"]), present, false),
            (
                ("app", SelectorOperator::NotIn, &["db", "web"]),
                present,
                false,
            ),
            (("app", SelectorOperator::NotIn, &["db"]), present, true),
            (("app", SelectorOperator::NotIn, &["web"]), empty, true),
            (("app", SelectorOperator::NotIn, &["web"]), None, true),
            (("missing", SelectorOperator::NotIn, &[""]), present, true),
            (("tier", SelectorOperator::NotIn, &[""]), present, false),
            // Exists: present, whatever the value.
            (("app", SelectorOperator::Exists, &[]), present, true),
            (("tier", SelectorOperator::Exists, &[]), present, true),
            (("missing", SelectorOperator::Exists, &[]), present, false),
            (("app", SelectorOperator::Exists, &[]), empty, false),
            (("app", SelectorOperator::Exists, &[]), None, false),
            // DoesNotExist: absent.
            (("app", SelectorOperator::DoesNotExist, &[]), present, false),
            (
                ("tier", SelectorOperator::DoesNotExist, &[]),
                present,
                false,
            ),
            (
                ("missing", SelectorOperator::DoesNotExist, &[]),
                present,
                true,
            ),
            (("app", SelectorOperator::DoesNotExist, &[]), empty, true),
            (("app", SelectorOperator::DoesNotExist, &[]), None, true),
            // Keys are compared exactly.
            (("App", SelectorOperator::Exists, &[]), present, false),
        ];
        for (req, ls, want) in cases {
            let selector = exprs(&[req]).unwrap();
            assert_eq!(selector.matches(ls), want, "{req:?} on {ls:?}");
        }
    }

    #[test]
    fn kubernetes_requirement_selector_matching() {
        let cases: Vec<(Value, Vec<Req<'_>>, bool)> = vec![
            (
                json!({"x": "foo", "y": "baz"}),
                vec![
                    ("x", SelectorOperator::In, &["foo"]),
                    ("y", SelectorOperator::NotIn, &["alpha"]),
                ],
                true,
            ),
            (
                json!({"x": "foo", "y": "baz"}),
                vec![
                    ("x", SelectorOperator::In, &["foo"]),
                    ("y", SelectorOperator::In, &["alpha"]),
                ],
                false,
            ),
            (
                json!({"y": ""}),
                vec![
                    ("x", SelectorOperator::NotIn, &[""]),
                    ("y", SelectorOperator::Exists, &[]),
                ],
                true,
            ),
            (
                json!({"y": ""}),
                vec![
                    ("x", SelectorOperator::DoesNotExist, &[]),
                    ("y", SelectorOperator::Exists, &[]),
                ],
                true,
            ),
            (
                json!({"y": ""}),
                vec![
                    ("x", SelectorOperator::NotIn, &[""]),
                    ("y", SelectorOperator::DoesNotExist, &[]),
                ],
                false,
            ),
            (
                json!({"y": "baz"}),
                vec![("x", SelectorOperator::In, &[""])],
                false,
            ),
            // TestSelectorMatches, with `=` as In and `!=` as NotIn.
            (
                json!({"x": "z", "z": "a"}),
                vec![
                    ("x", SelectorOperator::NotIn, &["y"]),
                    ("z", SelectorOperator::NotIn, &["w"]),
                ],
                true,
            ),
            (
                json!({"x": "z", "z": "w"}),
                vec![
                    ("x", SelectorOperator::NotIn, &["y"]),
                    ("z", SelectorOperator::NotIn, &["w"]),
                ],
                false,
            ),
            (
                json!({"notin": "in"}),
                vec![("notin", SelectorOperator::In, &["in"])],
                true,
            ),
            (
                json!({"x": "z"}),
                vec![("x", SelectorOperator::Exists, &[])],
                true,
            ),
            (
                json!({"y": "z"}),
                vec![("x", SelectorOperator::DoesNotExist, &[])],
                true,
            ),
            (
                json!({"y": "z"}),
                vec![("x", SelectorOperator::Exists, &[])],
                false,
            ),
            (
                json!({"x": "z"}),
                vec![("x", SelectorOperator::DoesNotExist, &[])],
                false,
            ),
            (json!({}), vec![("x", SelectorOperator::In, &["z"])], false),
            (
                json!({"foo": "bar", "baz": "blah"}),
                vec![
                    ("foo", SelectorOperator::In, &["bar"]),
                    ("foobar", SelectorOperator::In, &["bar"]),
                    ("baz", SelectorOperator::In, &["blah"]),
                ],
                false,
            ),
        ];
        for (ls, reqs, want) in cases {
            let selector = exprs(&reqs).unwrap();
            assert_eq!(
                selector.matches(Some(&labels(ls.clone()))),
                want,
                "{reqs:?} on {ls}"
            );
        }
    }

    #[test]
    fn match_labels() {
        let selector = Selector::new([("foo", "bar"), ("baz", "blah")], []).unwrap();
        assert!(!selector.is_empty());
        let cases = [
            (json!({"foo": "bar", "baz": "blah"}), true),
            (json!({"foo": "bar", "baz": "blah", "extra": "x"}), true),
            (json!({"foo": "bar"}), false),
            (json!({"foo": "bar", "baz": "bar"}), false),
            (json!({}), false),
        ];
        for (ls, want) in cases {
            assert_eq!(selector.matches(Some(&labels(ls.clone()))), want, "{ls}");
        }
        assert!(!selector.matches(None));

        // An empty matchLabels value requires the label, empty.
        let selector = Selector::new([("x", "")], []).unwrap();
        assert!(selector.matches(Some(&labels(json!({"x": ""})))));
        assert!(!selector.matches(Some(&labels(json!({"x": "y"})))));
        assert!(!selector.matches(Some(&labels(json!({})))));
    }

    #[test]
    fn key_in_match_labels_and_expressions_keeps_both() {
        let web = strings(&["web"]);
        let contradiction = Selector::new(
            [("app", "web")],
            [("app", SelectorOperator::NotIn, web.as_slice())],
        )
        .unwrap();
        for ls in [json!({"app": "web"}), json!({"app": "db"}), json!({})] {
            assert!(!contradiction.matches(Some(&labels(ls.clone()))), "{ls}");
        }
        let both = Selector::new(
            [("app", "web")],
            [("app", SelectorOperator::Exists, &[][..])],
        )
        .unwrap();
        assert!(both.matches(Some(&labels(json!({"app": "web"})))));
        assert!(!both.matches(Some(&labels(json!({"app": "db"})))));
    }

    #[test]
    fn label_values_read_like_unstructured_get_labels() {
        // `null` reads as the empty string.
        let ls = labels(json!({"x": null, "y": "v"}));
        let cases: [(Req<'_>, bool); 5] = [
            (("x", SelectorOperator::Exists, &[]), true),
            (("x", SelectorOperator::In, &[""]), true),
            (("x", SelectorOperator::NotIn, &[""]), false),
            (("x", SelectorOperator::DoesNotExist, &[]), false),
            (("y", SelectorOperator::In, &["v"]), true),
        ];
        for (req, want) in cases {
            assert_eq!(exprs(&[req]).unwrap().matches(Some(&ls)), want, "{req:?}");
        }

        // Any other non-string value: the object has no labels at all.
        for bad in [json!(1), json!(true), json!(["v"]), json!({"v": "v"})] {
            let ls = labels(json!({"x": bad, "y": "v"}));
            let cases: [(Req<'_>, bool); 6] = [
                (("y", SelectorOperator::In, &["v"]), false),
                (("y", SelectorOperator::Exists, &[]), false),
                (("y", SelectorOperator::NotIn, &["v"]), true),
                (("y", SelectorOperator::DoesNotExist, &[]), true),
                (("x", SelectorOperator::Exists, &[]), false),
                (("x", SelectorOperator::DoesNotExist, &[]), true),
            ];
            for (req, want) in cases {
                assert_eq!(
                    exprs(&[req]).unwrap().matches(Some(&ls)),
                    want,
                    "{req:?} on {ls:?}"
                );
            }
        }
    }

    #[test]
    fn equality_and_clone() {
        let one = Selector::new([("a", "b")], []).unwrap();
        let same = exprs(&[("a", SelectorOperator::In, &["b"])]).unwrap();
        assert_eq!(one, same);
        assert_eq!(one.clone(), one);
        assert_ne!(
            one,
            exprs(&[("a", SelectorOperator::NotIn, &["b"])]).unwrap()
        );
    }
}
