//! pathTests (Gatekeeper's `path/tester`): conditions on the parts of a location
//! that must (not) exist before a mutator may set it.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;

use crate::path::Path;

/// MustExist: mutate only if something is at the subPath; MustNotExist: only if nothing is.
///
/// The one pathTest condition type: the mutator API (`parameters.pathTests`)
/// deserializes into it and the walk checks it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, JsonSchema,
)]
pub enum Condition {
    /// Something must be at the subPath (an empty object counts).
    MustExist,
    /// Nothing may be at the subPath.
    MustNotExist,
}

/// One pathTest: a prefix of the location and a [`Condition`] on it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PathTest {
    /// A prefix of the mutator's location (or the location itself).
    pub sub_path: Path,
    /// What must hold at `sub_path`.
    pub condition: Condition,
}

/// The pathTests of one mutator, checked against its location and indexed by
/// depth so the walk asks "may this node exist / be missing?" in O(1).
///
/// Depth `d` is the node at index `d` of the location: a subPath with `n` nodes
/// tests depth `n - 1`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PathTests {
    by_depth: Vec<Option<Condition>>,
}

/// A set of pathTests that cannot be used with a location.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathTestError {
    /// A subPath that is not the location or a prefix of it.
    #[error("pathTest subPath \"{sub_path}\" is not a prefix of location \"{location}\"")]
    NotAPrefix {
        /// The offending subPath.
        sub_path: Path,
        /// The mutator's location.
        location: Path,
    },
    /// One subPath tested with both conditions.
    #[error("pathTest subPath \"{sub_path}\" is marked both MustExist and MustNotExist")]
    Contradiction {
        /// The subPath tested twice.
        sub_path: Path,
    },
    /// A subPath required to exist below one required to be absent: no object
    /// can pass both, so the mutator would never apply.
    #[error(
        "pathTest subPath \"{child}\" is marked MustExist but its parent \"{parent}\" is marked MustNotExist"
    )]
    ChildOfMissing {
        /// The subPath marked MustExist.
        child: Path,
        /// Its ancestor marked MustNotExist.
        parent: Path,
    },
}

/// An unknown pathTest condition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown pathTest condition {0:?}: expected \"MustExist\" or \"MustNotExist\"")]
pub struct UnknownCondition(pub String);

// === impl Condition ===

impl Condition {
    /// The name used in mutator specs.
    pub fn as_str(self) -> &'static str {
        match self {
            Condition::MustExist => "MustExist",
            Condition::MustNotExist => "MustNotExist",
        }
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Condition {
    type Err = UnknownCondition;

    /// Case-sensitive, like the CRD enum.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "MustExist" => Ok(Condition::MustExist),
            "MustNotExist" => Ok(Condition::MustNotExist),
            other => Err(UnknownCondition(other.to_string())),
        }
    }
}

// === impl PathTests ===

impl PathTests {
    /// Checks `tests` against `location` and indexes them by depth.
    ///
    /// Every subPath must be a prefix of the location (see [`Path::is_prefix_of`]);
    /// one subPath may not carry both conditions; and a MustExist may not sit
    /// below a MustNotExist, since no object passes both. Repeating a test is fine.
    ///
    /// Gatekeeper makes the same three checks, but compares the *positions in
    /// the list* of MustExist and MustNotExist tests for the last one, so it
    /// rejects `[parent: MustNotExist, child: MustExist]` and accepts the same two
    /// tests in the other order. sartor compares depths, so order never matters.
    ///
    /// # Errors
    /// The first [`PathTestError`] found, in the order of `tests`.
    pub fn new(location: &Path, tests: &[PathTest]) -> Result<PathTests, PathTestError> {
        let mut by_depth: Vec<Option<Condition>> = vec![None; location.len()];
        for test in tests {
            if !test.sub_path.is_prefix_of(location) {
                return Err(PathTestError::NotAPrefix {
                    sub_path: test.sub_path.clone(),
                    location: location.clone(),
                });
            }
            // A prefix has between 1 and location.len() nodes, so the slot exists.
            let Some(slot) = by_depth.get_mut(test.sub_path.len() - 1) else {
                continue;
            };
            match slot {
                Some(existing) if *existing != test.condition => {
                    return Err(PathTestError::Contradiction {
                        sub_path: test.sub_path.clone(),
                    });
                }
                _ => *slot = Some(test.condition),
            }
        }
        let first_forbidden = by_depth
            .iter()
            .position(|c| *c == Some(Condition::MustNotExist));
        let last_required = by_depth
            .iter()
            .rposition(|c| *c == Some(Condition::MustExist));
        if let (Some(parent), Some(child)) = (first_forbidden, last_required)
            && child > parent
            && let (Some(child), Some(parent)) =
                (location.prefix(child + 1), location.prefix(parent + 1))
        {
            return Err(PathTestError::ChildOfMissing { child, parent });
        }
        Ok(PathTests { by_depth })
    }

    /// The condition at `depth`, if a pathTest names it.
    pub fn condition_at(&self, depth: usize) -> Option<Condition> {
        self.by_depth.get(depth).copied().flatten()
    }

    /// Whether the walk may go on when something exists at `depth`.
    pub fn exists_ok(&self, depth: usize) -> bool {
        self.condition_at(depth) != Some(Condition::MustNotExist)
    }

    /// Whether the walk may go on (creating it) when nothing is at `depth`.
    pub fn missing_ok(&self, depth: usize) -> bool {
        self.condition_at(depth) != Some(Condition::MustExist)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test(sub_path: &str, condition: Condition) -> PathTest {
        PathTest {
            sub_path: Path::parse(sub_path).unwrap(),
            condition,
        }
    }

    fn check(location: &str, tests: &[PathTest]) -> Result<PathTests, String> {
        PathTests::new(&Path::parse(location).unwrap(), tests).map_err(|e| e.to_string())
    }

    use Condition::{MustExist, MustNotExist};

    #[test]
    fn indexes_conditions_by_depth() {
        let tests = check(
            "spec.containers[name: *].imagePullPolicy",
            &[
                test("spec.containers", MustExist),
                test("spec.containers[name: *].imagePullPolicy", MustNotExist),
            ],
        )
        .unwrap();
        assert_eq!(tests.condition_at(0), None);
        assert_eq!(tests.condition_at(1), Some(MustExist));
        assert_eq!(tests.condition_at(2), None);
        assert_eq!(tests.condition_at(3), Some(MustNotExist));
        assert_eq!(tests.condition_at(4), None);
        assert!(tests.exists_ok(1) && !tests.missing_ok(1));
        assert!(!tests.exists_ok(3) && tests.missing_ok(3));
        assert!(tests.exists_ok(0) && tests.missing_ok(0));
    }

    #[test]
    fn subpath_must_be_a_prefix() {
        assert_eq!(
            check(
                "spec.containers[name: *].image",
                &[test(r#"spec.containers[name: "foo"]"#, MustExist)]
            ),
            Err(r#"pathTest subPath "spec.containers[name: foo]" is not a prefix of location "spec.containers[name: *].image""#.to_string())
        );
        assert_eq!(
            check("a.b", &[test("a.b.c", MustExist)]),
            Err(r#"pathTest subPath "a.b.c" is not a prefix of location "a.b""#.to_string())
        );
    }

    #[test]
    fn repeated_tests_are_fine() {
        for c in [MustExist, MustNotExist] {
            let tests = check(
                "spec.some.thing",
                &[test("spec.some.thing", c), test("spec.some.thing", c)],
            )
            .unwrap();
            assert_eq!(tests.condition_at(2), Some(c));
        }
    }

    #[test]
    fn contradictions_are_rejected() {
        assert_eq!(
            check(
                "spec.some.thing",
                &[
                    test("spec.some.thing", MustExist),
                    test("spec.some.thing", MustNotExist)
                ]
            ),
            Err(
                r#"pathTest subPath "spec.some.thing" is marked both MustExist and MustNotExist"#
                    .to_string()
            )
        );
    }

    #[test]
    fn required_child_of_forbidden_parent_is_rejected_in_any_order() {
        let want = Err(r#"pathTest subPath "spec.some.thing.more" is marked MustExist but its parent "spec.some" is marked MustNotExist"#.to_string());
        let parent = test("spec.some", MustNotExist);
        let child = test("spec.some.thing.more", MustExist);
        assert_eq!(
            check("spec.some.thing.more", &[parent.clone(), child.clone()]),
            want
        );
        assert_eq!(check("spec.some.thing.more", &[child, parent]), want);
    }

    #[test]
    fn forbidden_child_of_required_parent_is_fine() {
        let tests = check(
            "spec.some.thing",
            &[
                test("spec.some", MustExist),
                test("spec.some.thing", MustNotExist),
            ],
        )
        .unwrap();
        assert_eq!(tests.condition_at(1), Some(MustExist));
        assert_eq!(tests.condition_at(2), Some(MustNotExist));
    }

    #[test]
    fn conditions_parse_case_sensitively() {
        assert_eq!("MustExist".parse(), Ok(MustExist));
        assert_eq!("MustNotExist".parse(), Ok(MustNotExist));
        assert_eq!(
            "mustexist".parse::<Condition>().unwrap_err().to_string(),
            r#"unknown pathTest condition "mustexist": expected "MustExist" or "MustNotExist""#
        );
        let parsed: PathTest = PathTest {
            sub_path: serde_json::from_str(r#""spec.a""#).unwrap(),
            condition: serde_json::from_str(r#""MustNotExist""#).unwrap(),
        };
        assert_eq!(parsed, test("spec.a", MustNotExist));
        assert_eq!(serde_json::to_string(&MustExist).unwrap(), r#""MustExist""#);
    }
}
