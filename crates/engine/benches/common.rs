//! Builders shared by the benches: mutators from JSON specs. Every bench
//! (and the instruction guard's example) allocates with mimalloc, the
//! allocator the sartor binary ships with (crates/cli, feature
//! `mimalloc`): the figures are the engine as it runs.

use sartor_api::{Assign, AssignImage, AssignMetadata, ModifySet, MutatorObject};
use sartor_engine::Mutator;
use serde_json::{Value, json};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Compiles a mutator of `kind` named `name`; `spec` is its whole spec.
pub fn mutator(kind: &str, name: &str, spec: Value) -> Mutator {
    let doc = json!({
        "apiVersion": "mutations.sartor.dev/v1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
    });
    let object = match kind {
        "Assign" => serde_json::from_value::<Assign>(doc).map(MutatorObject::Assign),
        "AssignImage" => serde_json::from_value::<AssignImage>(doc).map(MutatorObject::AssignImage),
        "AssignMetadata" => {
            serde_json::from_value::<AssignMetadata>(doc).map(MutatorObject::AssignMetadata)
        }
        _ => serde_json::from_value::<ModifySet>(doc).map(MutatorObject::ModifySet),
    };
    match object.map(|o| Mutator::compile(&o)) {
        Ok(Ok(mutator)) => mutator,
        Ok(Err(e)) => panic!("{e}"),
        Err(e) => panic!("{e}"),
    }
}

/// `applyTo` for one kind.
pub fn apply_to(group: &str, version: &str, kind: &str) -> Value {
    json!([{"groups": [group], "versions": [version], "kinds": [kind]}])
}
