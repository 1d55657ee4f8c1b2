//! The known classes of divergence between sartor and Gatekeeper v3.23.1:
//! each recognises its differences from the case and the two answers.
//!
//! A class is *documented* when `docs/gatekeeper-differences.md` has a
//! section for it (a line `Class: `id``): only those pass the runner, so a
//! class dropped from the document fails CI again.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::case::{Answer, Case, group_of};
use crate::compare::Difference;

/// A class of divergence.
#[derive(Debug)]
pub struct Class {
    /// Its id in the differences document and in reports.
    pub id: &'static str,
    /// One line: what differs.
    pub title: &'static str,
    recognises: fn(&Case, &Difference, &Answer, &Answer) -> bool,
}

/// Every class found so far, in the document's order; the first that
/// recognises a difference is its class, so `owner-reference-uid` (which
/// looks at nothing but the paths) comes before those that look at the
/// mutators.
pub const CLASSES: &[Class] = &[
    Class {
        id: "owner-reference-uid",
        title: "a generated resource's owner reference: Gatekeeper writes uid \"\" in it; sartor writes no uid",
        recognises: owner_reference_uid,
    },
    Class {
        id: "glob-aliasing",
        title: "Gatekeeper stores one value into every list element a glob matches, so a later change to one element shows in all",
        recognises: glob_aliasing,
    },
    Class {
        id: "big-integers",
        title: "Gatekeeper stores integers above 2^53 in Assign and ModifySet values as the nearest float64",
        recognises: big_integers,
    },
    Class {
        id: "number-types",
        title: "Gatekeeper compares Assign's numbers (float64) with ModifySet's (int64) by type",
        recognises: number_types,
    },
    Class {
        id: "pathtests-child-first",
        title: "a MustExist pathTest below a MustNotExist one: Gatekeeper accepts it when the child comes first (it never applies); sartor refuses it",
        recognises: pathtests_child_first,
    },
    Class {
        id: "pathtests-parent-first",
        title: "a MustNotExist pathTest listed before a MustExist one on its parent: Gatekeeper refuses it; sartor enforces it",
        recognises: pathtests_parent_first,
    },
    Class {
        id: "pathtest-without-condition",
        title: "a pathTest without condition: Gatekeeper accepts it (it never applies); sartor refuses it",
        recognises: pathtest_without_condition,
    },
    Class {
        id: "malformed-selector",
        title: "a malformed label selector: Gatekeeper accepts the mutator and fails every admission it is asked to match; sartor refuses it",
        recognises: malformed_selector,
    },
    Class {
        id: "match-scope",
        title: "a match.scope other than *, Cluster and Namespaced: Gatekeeper accepts it and reads it as *; sartor refuses it",
        recognises: match_scope,
    },
    Class {
        id: "unknown-fields",
        title: "unknown fields: the API server drops them for Gatekeeper; sartor refuses a file that has them",
        recognises: unknown_fields,
    },
    Class {
        id: "template-duplicate-edge",
        title: "an ExpansionTemplate naming a kind twice that another template generates: Gatekeeper refuses it (\"edge already exists\") yet keeps using it, and misses a cycle it closes; sartor uses it, or refuses the cycle",
        recognises: template_duplicate_edge,
    },
    Class {
        id: "admission-configuration",
        title: "webhook configurations and admission policies: the API server never sends them to a webhook; sartor mutate leaves them alone too",
        recognises: admission_configuration,
    },
];

/// The class of a difference, if a known one recognises it.
pub fn classify(
    case: &Case,
    difference: &Difference,
    sartor: &Answer,
    gatekeeper: &Answer,
) -> Option<&'static Class> {
    CLASSES
        .iter()
        .find(|class| (class.recognises)(case, difference, sartor, gatekeeper))
}

/// The class ids `document` (the differences document's text) has a
/// section for.
pub fn documented(document: &str) -> BTreeSet<String> {
    document
        .lines()
        .filter_map(|line| line.trim().strip_prefix("Class: `"))
        .filter_map(|rest| rest.split_once('`'))
        .map(|(id, _)| id.to_string())
        .collect()
}

// === what each class looks like ===

/// A difference in what mutation made of an object: the admitted one or
/// one it generated.
fn is_effect(difference: &Difference) -> bool {
    matches!(
        difference,
        Difference::Object { .. } | Difference::Outcome { .. } | Difference::Generated { .. }
    )
}

fn accepted<'c>(case: &'c Case, answer: &'c Answer) -> impl Iterator<Item = &'c Value> {
    case.mutators
        .iter()
        .zip(&answer.mutators)
        .filter(|(_, verdict)| verdict.accepted)
        .map(|(mutator, _)| mutator)
}

fn kind(mutator: &Value) -> &str {
    mutator.get("kind").and_then(Value::as_str).unwrap_or("")
}

fn location(mutator: &Value) -> &str {
    mutator
        .pointer("/spec/location")
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn assigned(mutator: &Value) -> Option<&Value> {
    mutator.pointer("/spec/parameters/assign/value")
}

fn set_values(mutator: &Value) -> Option<&Value> {
    mutator.pointer("/spec/parameters/values/fromList")
}

fn any_number(value: &Value, test: &dyn Fn(&serde_json::Number) -> bool) -> bool {
    match value {
        Value::Number(n) => test(n),
        Value::Array(items) => items.iter().any(|v| any_number(v, test)),
        Value::Object(map) => map.values().any(|v| any_number(v, test)),
        _ => false,
    }
}

/// A glob (`[key: *]`) in the location, writing a map or a list (or
/// merging into one, for ModifySet).
fn glob_aliasing(case: &Case, difference: &Difference, _: &Answer, gatekeeper: &Answer) -> bool {
    is_effect(difference)
        && accepted(case, gatekeeper).any(|m| {
            location(m).contains(": *]")
                && (kind(m) == "ModifySet"
                    || assigned(m).is_some_and(|v| v.is_object() || v.is_array()))
        })
}

/// A ModifySet with numbers among its values and an Assign writing numbers
/// into the same list: at it, above it, or inside its elements.
fn number_types(case: &Case, difference: &Difference, _: &Answer, gatekeeper: &Answer) -> bool {
    let any = |_: &serde_json::Number| true;
    let sets = accepted(case, gatekeeper)
        .filter(|m| kind(m) == "ModifySet" && set_values(m).is_some_and(|v| any_number(v, &any)));
    is_effect(difference)
        && sets.into_iter().any(|set| {
            let list = location(set);
            accepted(case, gatekeeper).any(|m| {
                let at = location(m);
                kind(m) == "Assign"
                    && (list.starts_with(at) || at.starts_with(list))
                    && assigned(m).is_some_and(|v| any_number(v, &any))
            })
        })
}

/// An Assign value or ModifySet values holding an integer a float64
/// cannot hold.
fn big_integers(case: &Case, difference: &Difference, _: &Answer, gatekeeper: &Answer) -> bool {
    const EXACT: u64 = 1 << 53;
    let big = |n: &serde_json::Number| {
        n.as_u64().is_some_and(|u| u > EXACT)
            || n.as_i64().is_some_and(|i| i.unsigned_abs() > EXACT)
    };
    is_effect(difference)
        && accepted(case, gatekeeper).any(|m| {
            assigned(m)
                .or_else(|| set_values(m))
                .is_some_and(|v| any_number(v, &big))
        })
}

fn refused_by_sartor(difference: &Difference) -> Option<(usize, &str)> {
    match difference {
        Difference::Acceptance {
            index,
            sartor: Some(why),
            gatekeeper: None,
            ..
        } => Some((*index, why)),
        _ => None,
    }
}

fn pathtests_child_first(_: &Case, difference: &Difference, _: &Answer, _: &Answer) -> bool {
    refused_by_sartor(difference)
        .is_some_and(|(_, why)| why.contains("is marked MustExist but its parent"))
}

fn pathtests_parent_first(_: &Case, difference: &Difference, _: &Answer, _: &Answer) -> bool {
    matches!(difference, Difference::Acceptance { sartor: None, gatekeeper: Some(why), .. }
        if why.contains("conflicting path test conditions"))
}

fn pathtest_without_condition(
    case: &Case,
    difference: &Difference,
    _: &Answer,
    _: &Answer,
) -> bool {
    refused_by_sartor(difference).is_some_and(|(index, _)| {
        case.mutators
            .get(index)
            .and_then(|m| m.pointer("/spec/parameters/pathTests"))
            .and_then(Value::as_array)
            .is_some_and(|tests| tests.iter().any(|t| t.get("condition").is_none()))
    })
}

fn malformed_selector(_: &Case, difference: &Difference, _: &Answer, _: &Answer) -> bool {
    refused_by_sartor(difference)
        .is_some_and(|(_, why)| why.contains("labelSelector") || why.contains("namespaceSelector"))
}

/// A mutator the API server prunes, or an ExpansionTemplate Gatekeeper
/// decodes ignoring what it does not know (gator's
/// `DefaultUnstructuredConverter`).
/// For templates, also the cycle Gatekeeper sees through one that sartor
/// refuses for an unknown field.
fn match_scope(_: &Case, difference: &Difference, _: &Answer, _: &Answer) -> bool {
    refused_by_sartor(difference).is_some_and(|(_, why)| why.contains("spec.match.scope"))
}

fn unknown_fields(_: &Case, difference: &Difference, sartor: &Answer, gatekeeper: &Answer) -> bool {
    let template = matches!(difference, Difference::TemplateAcceptance { .. })
        && sartor.templates.iter().any(|t| {
            t.error
                .as_deref()
                .is_some_and(|e| e.contains("unknown field"))
        });
    template
        || refused_by_sartor(difference).is_some_and(|(index, why)| {
            why.contains("unknown field")
                && gatekeeper
                    .mutators
                    .get(index)
                    .is_some_and(|verdict| !verdict.pruned.is_empty())
        })
}

fn owner_reference_uid(_: &Case, difference: &Difference, _: &Answer, _: &Answer) -> bool {
    matches!(difference, Difference::Generated { paths, .. }
    if !paths.is_empty() && paths.iter().all(|p| {
        p.strip_prefix("/metadata/ownerReferences/")
            .and_then(|rest| rest.strip_suffix("/uid"))
            .is_some_and(|i| i.parse::<usize>().is_ok())
    }))
}

fn template_duplicate_edge(_: &Case, _: &Difference, _: &Answer, gatekeeper: &Answer) -> bool {
    gatekeeper.templates.iter().any(|t| {
        t.error
            .as_deref()
            .is_some_and(|e| e.contains("edge already exists"))
    })
}

fn admission_configuration(case: &Case, difference: &Difference, _: &Answer, _: &Answer) -> bool {
    is_effect(difference) && group_of(&case.object) == "admissionregistration.k8s.io"
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::case::{Outcome, Verdict};

    fn verdict(name: &str, kind: &str) -> Verdict {
        Verdict {
            name: name.into(),
            kind: kind.into(),
            accepted: true,
            stage: None,
            error: None,
            pruned: Vec::new(),
            stored: None,
        }
    }

    #[test]
    fn big_integers_in_modify_set_values() {
        let case = Case {
            id: "t".into(),
            mutators: vec![json!({
                "apiVersion": "mutations.gatekeeper.sh/v1", "kind": "ModifySet", "metadata": {"name": "m"},
                "spec": {"location": "spec.tolerations", "parameters": {"values": {"fromList": [9_007_199_254_740_993_u64]}}},
            })],
            object: json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}),
            namespace: None,
            operation: "CREATE".into(),
            username: String::new(),
            templates: Vec::new(),
        };
        let answer = Answer {
            mutators: vec![verdict("m", "ModifySet")],
            conflicts: Vec::new(),
            outcome: Outcome::Unchanged,
            templates: Vec::new(),
            generated: None,
            expand_error: None,
        };
        let difference = Difference::Object {
            paths: vec!["/spec/tolerations/0".into()],
        };
        let class = classify(&case, &difference, &answer, &answer).map(|c| c.id);
        assert_eq!(class, Some("big-integers"));
    }
}
