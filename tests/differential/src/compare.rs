//! Comparing the two answers to a case: which mutators each side accepts,
//! what happened to the object (a skip and "unchanged" are the same to the
//! API server; two errors agree whatever their words), and the mutated
//! objects as JSON values with numbers compared by value; for a case with
//! templates, which templates each side uses and what the object generates.
//!
//! Generated objects are paired by template, kind and name, not by
//! position: Gatekeeper lists a resultant's own resultants before it and the
//! templates of one kind in Go map order (at random); sartor lists each
//! resource before what it generates, templates in name order.

use std::fmt;

use serde_json::Value;

use crate::case::{Answer, GeneratedObject, Outcome};

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
    /// One side uses an ExpansionTemplate the other refuses (or keeps
    /// unused, in a cycle).
    TemplateAcceptance {
        /// Its position in the case.
        index: usize,
        /// Its name.
        template: String,
        /// sartor's refusal, `None` when it uses it.
        sartor: Option<String>,
        /// Gatekeeper's refusal, `None` when it uses it.
        gatekeeper: Option<String>,
    },
    /// Expansion fared differently: an error on one side only, or other
    /// resources generated (`template kind name` of each, sorted).
    Expansion {
        /// What sartor generated, or its error.
        sartor: String,
        /// What Gatekeeper generated, or its error.
        gatekeeper: String,
    },
    /// Both generated a resource, different after mutation.
    Generated {
        /// `template kind name`.
        resource: String,
        /// JSON pointers to the first places they differ.
        paths: Vec<String>,
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
            Difference::TemplateAcceptance {
                template,
                sartor,
                gatekeeper,
                ..
            } => match (sartor, gatekeeper) {
                (Some(why), None) => write!(
                    f,
                    "sartor refuses ExpansionTemplate {template} ({why}); Gatekeeper uses it"
                ),
                (None, Some(why)) => write!(
                    f,
                    "Gatekeeper refuses ExpansionTemplate {template} ({why}); sartor uses it"
                ),
                _ => write!(f, "ExpansionTemplate {template}: used by both or neither"),
            },
            Difference::Expansion { sartor, gatekeeper } => {
                write!(f, "expansion: sartor {sartor}; Gatekeeper {gatekeeper}")
            }
            Difference::Generated { resource, paths } => write!(
                f,
                "the generated {resource} differs at {}",
                paths.join(", ")
            ),
        }
    }
}

impl Difference {
    /// `acceptance`, `outcome`, `object`, `conflicts`,
    /// `template-acceptance`, `expansion` or `generated`.
    pub fn kind(&self) -> &'static str {
        match self {
            Difference::Acceptance { .. } => "acceptance",
            Difference::Outcome { .. } => "outcome",
            Difference::Object { .. } => "object",
            Difference::Conflicts { .. } => "conflicts",
            Difference::TemplateAcceptance { .. } => "template-acceptance",
            Difference::Expansion { .. } => "expansion",
            Difference::Generated { .. } => "generated",
        }
    }
}

/// Which mutators and templates the sides disagree on accepting.
pub fn acceptance(sartor: &Answer, gatekeeper: &Answer) -> Vec<Difference> {
    let mutators = sartor
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
        });
    let refusal = |t: &crate::case::TemplateVerdict| {
        (!t.used()).then(|| match &t.error {
            Some(error) => error.clone(),
            None => "in a cycle of templates, never used".to_string(),
        })
    };
    let templates = sartor
        .templates
        .iter()
        .zip(&gatekeeper.templates)
        .enumerate()
        .filter(|(_, (s, g))| s.used() != g.used())
        .map(|(index, (s, g))| Difference::TemplateAcceptance {
            index,
            template: s.name.clone(),
            sartor: refusal(s),
            gatekeeper: refusal(g),
        });
    mutators.chain(templates).collect()
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
    differences.extend(expansion(sartor, gatekeeper));
    differences
}

/// How expansion fared: the same resources generated (paired by template,
/// kind and name), each the same after mutation. Two errors agree whatever
/// their words; no expansion on either side (an admission error, no
/// templates) is the outcome's business.
fn expansion(sartor: &Answer, gatekeeper: &Answer) -> Vec<Difference> {
    let summary = |answer: &Answer| match (&answer.generated, &answer.expand_error) {
        (_, Some(error)) => format!("fails: {error}"),
        (Some(generated), None) => {
            let keys: Vec<String> = sorted(generated).iter().map(|g| key_text(g)).collect();
            format!("generates [{}]", keys.join(", "))
        }
        (None, None) => "expands nothing".to_string(),
    };
    let expanded = |answer: &Answer| answer.generated.is_some() || answer.expand_error.is_some();
    if !expanded(sartor) && !expanded(gatekeeper) {
        return Vec::new();
    }
    if sartor.expand_error.is_some() && gatekeeper.expand_error.is_some() {
        return Vec::new();
    }
    let (Some(s), Some(g)) = (&sartor.generated, &gatekeeper.generated) else {
        return vec![Difference::Expansion {
            sartor: summary(sartor),
            gatekeeper: summary(gatekeeper),
        }];
    };
    let (s, g) = (sorted(s), sorted(g));
    let keys = |list: &[&GeneratedObject]| list.iter().map(|o| o.key()).collect::<Vec<_>>();
    if keys(&s) != keys(&g) {
        return vec![Difference::Expansion {
            sartor: summary(sartor),
            gatekeeper: summary(gatekeeper),
        }];
    }
    let mut differences = Vec::new();
    for (s, g) in s.iter().zip(&g) {
        // Owner reference uids apart, so that a difference there (every
        // generated resource has one) hides no other.
        let (s_uids, s_object) = owner_uids(&s.object);
        let (g_uids, g_object) = owner_uids(&g.object);
        let mut uid_paths = Vec::new();
        differing(&s_uids, &g_uids, &mut String::new(), &mut uid_paths);
        let mut paths = Vec::new();
        differing(&s_object, &g_object, &mut String::new(), &mut paths);
        for paths in [uid_paths, paths] {
            if !paths.is_empty() {
                differences.push(Difference::Generated {
                    resource: key_text(s),
                    paths,
                });
            }
        }
    }
    differences
}

/// The `uid`s of an object's owner references (as `{"metadata":
/// {"ownerReferences": [{"uid": ...}]}}`), and the object without them.
fn owner_uids(object: &Value) -> (Value, Value) {
    let mut rest = object.clone();
    let mut uids = Vec::new();
    if let Some(Value::Array(owners)) = rest.pointer_mut("/metadata/ownerReferences") {
        for owner in owners {
            let uid = owner.as_object_mut().and_then(|o| o.remove("uid"));
            uids.push(match uid {
                Some(uid) => serde_json::json!({"uid": uid}),
                None => serde_json::json!({}),
            });
        }
    }
    let uids = serde_json::json!({"metadata": {"ownerReferences": uids}});
    (uids, rest)
}

/// Generated objects in key order (stable: equal keys keep the side's order).
fn sorted(generated: &[GeneratedObject]) -> Vec<&GeneratedObject> {
    let mut list: Vec<&GeneratedObject> = generated.iter().collect();
    list.sort_by_key(|g| g.key());
    list
}

fn key_text(generated: &GeneratedObject) -> String {
    let (template, kind, name) = generated.key();
    format!("{template} {kind} {name}")
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
