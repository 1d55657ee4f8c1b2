//! What a system's enforced mutators can mutate, as kinds and operations:
//! what the API server has to send the webhook, and nothing else.
//!
//! A mutator with `applyTo` (Assign, ModifySet, AssignImage) targets exactly
//! the kinds it lists that its `match.kinds` also allows; AssignMetadata,
//! which has no `applyTo`, targets what its `match.kinds` names, in every
//! version. A mutator in schema conflict mutates nothing and targets nothing.

use std::collections::BTreeMap;
use std::fmt;

use crate::matching::Matcher;
use crate::mutator::{Applies, Mutator, Operations};
use crate::request::Operation;

/// A set of kinds, each part either exact or any (`None`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KindPattern {
    /// The API group (`""` is the core group); `None` is every group.
    pub group: Option<String>,
    /// The version; `None` is every version.
    pub version: Option<String>,
    /// The kind; `None` is every kind.
    pub kind: Option<String>,
}

/// The kinds a system can mutate, each with the operations it is mutated on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Targets {
    kinds: BTreeMap<KindPattern, Operations>,
}

// === impl KindPattern ===

impl KindPattern {
    /// Every kind of every group and version.
    pub const ANY: KindPattern = KindPattern {
        group: None,
        version: None,
        kind: None,
    };

    /// Whether it names every kind of every group and version.
    pub fn is_any(&self) -> bool {
        self.group.is_none() && self.version.is_none() && self.kind.is_none()
    }
}

impl fmt::Display for KindPattern {
    /// `Kind.group/version`, with `*` for any part and `core` for the core group.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let any = |part: &Option<String>| part.clone().unwrap_or_else(|| "*".to_string());
        let group = match self.group.as_deref() {
            Some("") => "core".to_string(),
            _ => any(&self.group),
        };
        write!(f, "{}.{group}/{}", any(&self.kind), any(&self.version))
    }
}

// === impl Targets ===

impl Targets {
    /// The targets of `mutators`.
    pub fn of<'a>(mutators: impl IntoIterator<Item = &'a Mutator>) -> Targets {
        let mut targets = Targets::default();
        for mutator in mutators {
            targets.add(mutator);
        }
        targets
    }

    /// Adds what `mutator` targets.
    pub fn add(&mut self, mutator: &Mutator) {
        match mutator.applies() {
            Applies::Kinds(kinds) => {
                for (gvk, operations) in kinds {
                    if mutator.matcher().kinds_match(gvk) {
                        self.insert(
                            KindPattern {
                                group: Some(gvk.group.clone()),
                                version: Some(gvk.version.clone()),
                                kind: Some(gvk.kind.clone()),
                            },
                            *operations,
                        );
                    }
                }
            }
            Applies::Everything => {
                for pattern in match_kinds(mutator.matcher()) {
                    self.insert(pattern, Operations::ALL);
                }
            }
        }
    }

    fn insert(&mut self, pattern: KindPattern, operations: Operations) {
        let slot = self.kinds.entry(pattern).or_default();
        *slot = slot.union(operations);
    }

    /// Whether no kind is targeted (no mutator is enforced).
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }

    /// Whether some mutator can mutate every kind.
    pub fn is_everything(&self) -> bool {
        self.kinds.keys().any(KindPattern::is_any)
    }

    /// Each pattern with its operations, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&KindPattern, Operations)> {
        self.kinds.iter().map(|(pattern, ops)| (pattern, *ops))
    }

    /// The patterns mutated on `operation` (with all their operations):
    /// the kinds an audit of that operation lists.
    pub fn on(&self, operation: Operation) -> Targets {
        self.iter()
            .filter(|(_, ops)| ops.contains(operation))
            .map(|(pattern, ops)| (pattern.clone(), ops))
            .collect()
    }
}

impl FromIterator<(KindPattern, Operations)> for Targets {
    /// A pattern given twice is mutated on the union of its operations.
    fn from_iter<I: IntoIterator<Item = (KindPattern, Operations)>>(patterns: I) -> Targets {
        let mut targets = Targets::default();
        for (pattern, operations) in patterns {
            targets.insert(pattern, operations);
        }
        targets
    }
}

impl fmt::Display for Targets {
    /// One pattern per line: `Kind.group/version: CREATE, UPDATE`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (pattern, ops) in self.iter() {
            let ops: Vec<&str> = Operation::ALL
                .into_iter()
                .filter(|op| ops.contains(*op))
                .map(Operation::as_str)
                .collect();
            writeln!(f, "{pattern}: {}", ops.join(", "))?;
        }
        Ok(())
    }
}

/// The patterns of `match.kinds`: any version; an empty or `*` list is any.
fn match_kinds(matcher: &Matcher) -> Vec<KindPattern> {
    let kinds = matcher.kinds();
    if kinds.is_empty() {
        return vec![KindPattern::ANY];
    }
    let parts = |list: &[String]| -> Vec<Option<String>> {
        if list.is_empty() || list.iter().any(|item| item == "*") {
            vec![None]
        } else {
            list.iter().cloned().map(Some).collect()
        }
    };
    let mut patterns = Vec::new();
    for entry in kinds {
        for group in parts(&entry.api_groups) {
            for kind in parts(&entry.kinds) {
                patterns.push(KindPattern {
                    group: group.clone(),
                    version: None,
                    kind,
                });
            }
        }
    }
    patterns
}
