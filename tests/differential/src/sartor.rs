//! sartor's side of a case: what `sartor serve` does with mutator files and
//! an admission request, through the same calls (the loader's
//! `parse_mutator`, `Mutator::compile`, `System::upsert`, the webhook's
//! operation skip, `System::mutate` with its protection of the policy
//! system's objects), then, for a case with templates, what
//! `sartor mutate --expand` does ([`crate::expansion`]).

use std::collections::HashMap;

use sartor_api::{Operation, parse_mutator};
use sartor_engine::{Admission, Mutator, Scopes, System};
use serde_json::Value;

use crate::case::{Answer, Case, Outcome, Verdict, name_of};

/// What sartor makes of `case`.
pub fn answer(case: &Case) -> Answer {
    let mut system = System::new();
    let mut verdicts = Vec::with_capacity(case.mutators.len());
    for object in &case.mutators {
        let kind = object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let name = name_of(object).to_string();
        let refused = |stage: &str, error: String| Verdict {
            name: name.clone(),
            kind: kind.clone(),
            accepted: false,
            stage: Some(stage.to_string()),
            error: Some(error),
            pruned: Vec::new(),
            stored: None,
        };
        let verdict = match parse_mutator(object) {
            Err(error) => refused("parse", error.to_string()),
            Ok(parsed) => match Mutator::compile(&parsed) {
                Err(error) => refused("compile", error.to_string()),
                Ok(mutator) => {
                    // As the file loader does (controller/src/files.rs).
                    let sartor_api = sartor_api::api_group(object) == Some(sartor_api::GROUP);
                    system.upsert(if sartor_api {
                        mutator.generated_as_created()
                    } else {
                        mutator
                    });
                    Verdict {
                        name: name.clone(),
                        kind: kind.clone(),
                        accepted: true,
                        stage: None,
                        error: None,
                        pruned: Vec::new(),
                        stored: None,
                    }
                }
            },
        };
        verdicts.push(verdict);
    }
    let conflicts = system
        .conflicted()
        .iter()
        .map(|id| id.name.clone())
        .collect();
    let operation = case.operation.parse::<Operation>().ok();
    let namespaces: HashMap<String, Value> = case
        .namespace
        .iter()
        .map(|ns| (name_of(ns).to_string(), ns.clone()))
        .collect();
    let mut answer = Answer {
        mutators: verdicts,
        conflicts,
        outcome: outcome(&system, case, operation, &namespaces),
        templates: Vec::new(),
        generated: None,
        expand_error: None,
    };
    crate::expansion::expand(case, &system, operation, &namespaces, &mut answer);
    answer
}

/// The namespace `object` is admitted in, as `sartor mutate -n NAME` decides
/// it: from its kind's scope (the built-in kinds, and the generator's
/// Widget as a namespaced custom resource), its `metadata.namespace`, else
/// the case's Namespace (which stands for the request's namespace, as in the
/// oracle), else `default`.
pub fn admitted_namespace(object: &Value, case: &Case) -> Option<String> {
    static SCOPES: std::sync::LazyLock<Scopes> = std::sync::LazyLock::new(|| {
        let mut scopes = Scopes::builtin().clone();
        scopes.insert("example.com", "Widget", true);
        scopes
    });
    let default = case.namespace.as_ref().map_or("default", name_of);
    SCOPES
        .place(object, default)
        .namespace()
        .map(str::to_string)
}

fn outcome(
    system: &System,
    case: &Case,
    operation: Option<Operation>,
    namespaces: &HashMap<String, Value>,
) -> Outcome {
    let Some(operation) = operation else {
        return Outcome::Skipped {
            skipped: format!("operation {} is not mutated", case.operation),
        };
    };
    let admission = Admission::new(&case.object)
        .namespace(admitted_namespace(&case.object, case).as_deref())
        .operation(operation)
        .namespaces(namespaces)
        .username(&case.username);
    let mut object = case.object.clone();
    match system.mutate(&admission, &mut object) {
        Ok(mutation) if mutation.mutated => Outcome::Mutated { object },
        Ok(_) => Outcome::Unchanged,
        Err(error) => Outcome::Error {
            error: error.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::generate::{Mode, cases};

    /// The generator is worth running only if sartor mutates most cases,
    /// refuses some mutators, and fails some admissions.
    #[test]
    fn generated_cases_reach_every_outcome() {
        for mode in [Mode::Normal, Mode::Wild] {
            let mut outcomes: BTreeMap<&str, usize> = BTreeMap::new();
            let (mut accepted, mut refused) = (0, 0);
            for case in cases(5, mode, 1_000) {
                let answer = answer(&case);
                *outcomes.entry(answer.outcome.word()).or_default() += 1;
                for verdict in &answer.mutators {
                    if verdict.accepted {
                        accepted += 1;
                    } else {
                        refused += 1;
                        if std::env::var_os("SHOW_REFUSALS").is_some() {
                            eprintln!("REFUSED {}", verdict.error.as_deref().unwrap_or(""));
                        }
                    }
                }
            }
            eprintln!("{mode:?}: {outcomes:?}, mutators accepted {accepted}, refused {refused}");
            let share = |word| outcomes.get(word).copied().unwrap_or(0);
            assert!(share("mutated") > 300, "{mode:?}: {outcomes:?}");
            assert!(share("unchanged") > 50, "{mode:?}: {outcomes:?}");
            assert!(share("error") > 3, "{mode:?}: {outcomes:?}");
            assert!(
                refused > 100 && accepted > 3 * refused,
                "{mode:?}: {accepted} accepted, {refused} refused"
            );
        }
    }

    /// Expansion cases are worth running only if most generate resources,
    /// mutated often, and some templates are refused.
    #[test]
    fn expansion_cases_generate_and_refuse() {
        let (mut generated, mut mutated, mut failed, mut refused) = (0, 0, 0, 0);
        for case in cases(5, Mode::Expansion, 1_000) {
            let answer = answer(&case);
            refused += answer.templates.iter().filter(|t| !t.accepted).count();
            failed += usize::from(answer.expand_error.is_some());
            if let Some(list) = &answer.generated {
                generated += usize::from(!list.is_empty());
                mutated += usize::from(list.iter().any(|g| g.outcome == "mutated"));
            }
        }
        eprintln!("generated {generated}, mutated {mutated}, failed {failed}, refused {refused}");
        assert!(generated > 400, "{generated} cases generate something");
        assert!(mutated > 200, "{mutated} cases mutate a generated resource");
        assert!(
            failed > 10 && refused > 50,
            "failed {failed}, refused {refused}"
        );
    }
}
