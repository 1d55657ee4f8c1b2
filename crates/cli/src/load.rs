//! Reading mutators into a System, reporting every problem.

use sartor_api::{Input, load_mutators};
use sartor_engine::{Mutator, System};

/// Loads and compiles every mutator under `paths`. Prints each problem
/// (unreadable file, invalid document, invalid mutator, schema conflict) to
/// stderr and returns `None` when there was any.
pub fn system(paths: &[String]) -> Option<System> {
    let inputs: Vec<Input> = paths.iter().map(|p| Input::from_arg(p)).collect();
    let loaded = load_mutators(&inputs);
    let mut ok = true;
    for error in &loaded.errors {
        eprintln!("error: {error}");
        ok = false;
    }
    let mut system = System::new();
    let mut origins = Vec::new();
    for mutator in &loaded.mutators {
        match Mutator::compile(&mutator.object) {
            Ok(compiled) => {
                origins.push((compiled.id().clone(), mutator.origin.clone()));
                system.upsert(compiled);
            }
            Err(error) => {
                eprintln!("error: {}: {error}", mutator.origin);
                ok = false;
            }
        }
    }
    for id in system.conflicted() {
        let origin = origins
            .iter()
            .find(|(other, _)| other == id)
            .map(|(_, origin)| origin.to_string())
            .unwrap_or_default();
        for conflict in system.conflicts(id) {
            eprintln!("error: {origin}: {id}: {conflict}");
        }
        ok = false;
    }
    ok.then_some(system)
}
