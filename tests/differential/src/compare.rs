//! Comparing the two answers to a case: which mutators each side accepts,
//! what happened to the object (a skip and "unchanged" are the same to the
//! API server; two errors agree whatever their words), and the mutated
//! objects as JSON values with numbers compared by value.

use std::fmt;

use serde_json::Value;

use crate::case::{Answer, Outcome};

/// One way the answers differ.
#[derive(Debug, Clone, PartialEq)]
pub enum Difference {
    /// One side accepts a mutator the other refuses.
    Acceptance {
        /// Its position in the case.
        index: usize,
        /// `Kind name`.
        mutator: String,
        /// sartor's refusal, `None` when it accepts.
        sartor: Option<String>,
        /// Gatekeeper's refusal, `None` when it accepts.
        gatekeeper: Option<String>,
    },
    /// The object fared differently (mutated, unchanged, error).
    Outcome {
        /// sartor's outcome.
        sartor: &'static str,
        /// Gatekeeper's outcome.
        gatekeeper: &'static str,
    },
    /// Both mutated it, into different objects.
    Object {
        /// JSON pointers to the first places they differ.
        paths: Vec<String>,
    },
    /// Different mutators are left out for schema conflicts.
    Conflicts {
        /// sartor's.
        sartor: Vec<String>,
        /// Gatekeeper's.
        gatekeeper: Vec<String>,
    },
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Difference::Acceptance {
                mutator,
                sartor,
                gatekeeper,
                ..
            } => match (sartor, gatekeeper) {
                (Some(why), None) => {
                    write!(f, "sartor refuses {mutator} ({why}); Gatekeeper accepts it")
                }
                (None, Some(why)) => {
                    write!(f, "Gatekeeper refuses {mutator} ({why}); sartor accepts it")
                }
                _ => write!(f, "{mutator}: accepted by both or neither"),
            },
            Difference::Outcome { sartor, gatekeeper } => {
                write!(f, "sartor: {sartor}, Gatekeeper: {gatekeeper}")
            }
            Difference::Object { paths } => {
                write!(f, "the mutated objects differ at {}", paths.join(", "))
            }
            Difference::Conflicts { sartor, gatekeeper } => write!(
                f,
                "schema conflicts: sartor [{}], Gatekeeper [{}]",
                sartor.join(", "),
                gatekeeper.join(", ")
            ),
        }
    }
}

impl Difference {
    /// `acceptance`, `outcome`, `object` or `conflicts`.
    pub fn kind(&self) -> &'static str {
        match self {
            Difference::Acceptance { .. } => "acceptance",
            Difference::Outcome { .. } => "outcome",
            Difference::Object { .. } => "object",
            Difference::Conflicts { .. } => "conflicts",
        }
    }
}

/// Which mutators the sides disagree on accepting.
pub fn acceptance(sartor: &Answer, gatekeeper: &Answer) -> Vec<Difference> {
    sartor
        .mutators
        .iter()
        .zip(&gatekeeper.mutators)
        .enumerate()
        .filter(|(_, (s, g))| s.accepted != g.accepted)
        .map(|(index, (s, g))| Difference::Acceptance {
            index,
            mutator: format!("{} {}", s.kind, s.name),
            sartor: (!s.accepted).then(|| s.error.clone().unwrap_or_default()),
            gatekeeper: (!g.accepted).then(|| g.error.clone().unwrap_or_default()),
        })
        .collect()
}

/// How the object fared, for two answers on the same accepted mutators.
pub fn effect(sartor: &Answer, gatekeeper: &Answer) -> Vec<Difference> {
    let mut differences = Vec::new();
    let mut s_conflicts = sartor.conflicts.clone();
    let mut g_conflicts = gatekeeper.conflicts.clone();
    s_conflicts.sort();
    g_conflicts.sort();
    if s_conflicts != g_conflicts {
        differences.push(Difference::Conflicts {
            sartor: s_conflicts,
            gatekeeper: g_conflicts,
        });
    }
    match (&sartor.outcome, &gatekeeper.outcome) {
        (Outcome::Mutated { object: s }, Outcome::Mutated { object: g }) => {
            let mut paths = Vec::new();
            differing(s, g, &mut String::new(), &mut paths);
            if !paths.is_empty() {
                differences.push(Difference::Object { paths });
            }
        }
        (s, g) if settled(s) == settled(g) => {}
        (s, g) => differences.push(Difference::Outcome {
            sartor: s.word(),
            gatekeeper: g.word(),
        }),
    }
    differences
}

/// What the API server sees: a skip is no change.
fn settled(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Skipped { .. } => Outcome::Unchanged.word(),
        other => other.word(),
    }
}

/// Whether two JSON values are equal, numbers compared by value: `300` and
/// `300.0` are equal, `9007199254740993` and `9007199254740992.0` are not.
pub fn same(a: &Value, b: &Value) -> bool {
    let mut paths = Vec::new();
    differing(a, b, &mut String::new(), &mut paths);
    paths.is_empty()
}

/// Places (JSON pointers) where `a` and `b` differ, the first few.
fn differing(a: &Value, b: &Value, at: &mut String, paths: &mut Vec<String>) {
    const SHOWN: usize = 4;
    if paths.len() >= SHOWN {
        return;
    }
    let here = |paths: &mut Vec<String>, at: &str| {
        paths.push(if at.is_empty() {
            "/".into()
        } else {
            at.to_string()
        });
    };
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for (key, value) in a {
                let len = at.len();
                at.push('/');
                at.push_str(&key.replace('~', "~0").replace('/', "~1"));
                match b.get(key) {
                    Some(other) => differing(value, other, at, paths),
                    None => here(paths, at),
                }
                at.truncate(len);
            }
            for key in b.keys().filter(|k| !a.contains_key(*k)) {
                let len = at.len();
                at.push('/');
                at.push_str(&key.replace('~', "~0").replace('/', "~1"));
                here(paths, at);
                at.truncate(len);
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            if a.len() != b.len() {
                here(paths, at);
                return;
            }
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                let len = at.len();
                at.push_str(&format!("/{i}"));
                differing(x, y, at, paths);
                at.truncate(len);
            }
        }
        (Value::Number(x), Value::Number(y)) => {
            if !same_number(x, y) {
                here(paths, at);
            }
        }
        (x, y) if x == y => {}
        _ => here(paths, at),
    }
}

fn same_number(x: &serde_json::Number, y: &serde_json::Number) -> bool {
    if let (Some(x), Some(y)) = (exact(x), exact(y)) {
        return x == y;
    }
    x.as_f64() == y.as_f64()
}

/// An integer, or a float with no fraction that fits, as an exact integer.
fn exact(n: &serde_json::Number) -> Option<i128> {
    if let Some(i) = n.as_i64() {
        return Some(i128::from(i));
    }
    if let Some(u) = n.as_u64() {
        return Some(i128::from(u));
    }
    let f = n.as_f64()?;
    // 2^100: well inside i128, far past every integer a float holds exactly.
    (f.fract() == 0.0 && f.abs() < 1.267_650_600_228_229_4e30).then_some(f as i128)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_compare_by_value() {
        assert!(same(&json!({"a": 300}), &json!({"a": 300.0})));
        assert!(!same(
            &json!(9_007_199_254_740_993_u64),
            &json!(9_007_199_254_740_992.0)
        ));
        assert!(!same(&json!(1.5), &json!(1)));
    }

    #[test]
    fn differing_names_the_places() {
        let mut paths = Vec::new();
        differing(
            &json!({"spec": {"containers": [{"name": "a", "x": 1}], "b/c": 1}}),
            &json!({"spec": {"containers": [{"name": "a", "x": 2}], "d": 1}}),
            &mut String::new(),
            &mut paths,
        );
        assert_eq!(paths, ["/spec/b~1c", "/spec/containers/0/x", "/spec/d"]);
    }
}
