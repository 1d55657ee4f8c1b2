//! The tests' way into `System::mutate`: a `Request` (what matching reads)
//! turned into the `Admission` every caller builds, the result written back
//! in place; and on every call, the patch checked against a whole diff and
//! the same mutation checked without paths.

use std::sync::Arc;

use sartor_engine::{Admission, Change, MutateError, Mutation, NamespaceLookup, Request, System};
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
    assert_eq!(
        without_paths,
        mutation.clone().map(|mut mutation| {
            for change in mutation.changes.iter_mut().filter(|c| c.pass == 1) {
                let location = Arc::new(change.location().clone());
                *change = Change::new(1, Arc::clone(&change.mutator), location, Vec::new());
            }
            mutation
        }),
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
