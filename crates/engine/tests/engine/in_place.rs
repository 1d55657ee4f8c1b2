//! The tests' way into `System::mutate`: a `Request` (what matching reads)
//! turned into the `Admission` every caller builds, the result written back
//! in place; and on every call, the patch checked against a whole diff and
//! the same mutation checked without paths.

use sartor_engine::{Admission, MutateError, Mutation, NamespaceLookup, Request, System};
use serde_json::Value;

/// The request's Namespace object, whatever name is asked for.
struct Given<'a>(Option<&'a Value>);

impl NamespaceLookup for Given<'_> {
    fn namespace(&self, _name: &str) -> Option<&Value> {
        self.0
    }
}

/// Mutates `object` in place as `request` says, through `System::mutate`.
/// Asserts the patch equals `json_patch::diff` from the admitted object, and
/// that an error, or a mutation that leaves it as it was, leaves `object`
/// equal to the admitted one; and that the admission `without_paths` gives
/// the same answer, but for the first pass's changes, which keep their
/// location as written.
pub fn mutate_in_place(
    system: &System,
    object: &mut Value,
    request: &Request<'_>,
) -> Result<Mutation, MutateError> {
    let admitted = object.clone();
    let namespaces = Given(request.namespace_object);
    let admission = Admission::new(object);
    let admission = match request.operation {
        Some(operation) => admission.operation(operation),
        None => admission.without_operation(),
    };
    let admission = admission
        .source(request.source)
        .namespace(request.namespace)
        .namespaces(&namespaces)
        .with_patch();
    let mut pathless = object.clone();
    let without_paths = system.mutate(&admission.clone().without_paths(), &mut pathless);
    let mutation = system.mutate(&admission, object);
    assert_eq!(pathless, *object, "without paths, another object");
    // Without paths, pass 1's changes name the location as written.
    let unpinned = |mutation: &Mutation| -> (Vec<String>, Mutation) {
        let changes = mutation.changes.iter().map(|c| {
            let path = match c.pass {
                1 => c.location().clone(),
                _ => c.path(),
            };
            format!("{} {} {path}", c.pass, c.mutator())
        });
        let rest = Mutation {
            changes: Vec::new(),
            ..mutation.clone()
        };
        (changes.collect(), rest)
    };
    assert_eq!(
        without_paths.as_ref().map(unpinned),
        mutation.as_ref().map(unpinned),
        "without paths, another answer"
    );
    match &mutation {
        Ok(mutation) if mutation.mutated => {
            let patch = mutation.patch.as_ref().expect("a patch is asked for");
            assert_eq!(
                patch.operations().expect("the patch reads back"),
                json_patch::diff(&admitted, object)
            );
        }
        Ok(mutation) => {
            assert_eq!(mutation.patch, None);
            assert_eq!(*object, admitted, "not mutated, yet changed");
        }
        Err(_) => assert_eq!(*object, admitted, "failed, yet changed"),
    }
    mutation
}
