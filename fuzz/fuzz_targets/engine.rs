//! The engine: 1-4 mutators (Assign, AssignMetadata, ModifySet, AssignImage)
//! built from fuzz bytes × an object (the rest of the input, when it is a JSON
//! object; else a fixed Pod) → `System::upsert` each → `System::mutate`.
//!
//! Oracles, besides "no panic":
//! - the RFC 6902 patch of a mutation (`Admission::with_patch`), applied to
//!   the admitted object, gives the mutated object;
//! - mutating without asking for the patch gives the same object and
//!   changes; without the changes' paths (`Admission::without_paths`), the
//!   same object, failure or changes, the first pass's at their locations
//!   as written;
//! - a converged result is a fixed point: mutating it again with the same
//!   system changes nothing (`object: None`). This holds for every kind:
//!   `System::mutate` stops only after a whole pass ends where it started,
//!   and a pass is a function of the object alone (matching is re-read after
//!   any change under `metadata`; value conditions every time; no
//!   Namespace lookup and no external data here), so the last pass of the
//!   first run *is* the first pass of the second. AssignMetadata sets only
//!   what is missing, which is idempotent too. The annotation
//!   (`Admission::annotate`) is off: it records the mutators that changed the
//!   object, which a second run on a fixed point does not repeat.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sartor_api::parse_mutator;
use sartor_engine::{Admission, Mutator, System};
use sartor_fuzz::{Bytes, KINDS, mutator, object};

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes::new(data);
    let count = 1 + b.below(4);
    let mut system = System::new();
    for i in 0..count {
        let kind = b.pick(&KINDS);
        let document = mutator(&mut b, kind, &format!("m{i}"));
        let Ok(parsed) = parse_mutator(&document) else {
            continue;
        };
        if let Ok(compiled) = Mutator::compile(&parsed) {
            system.upsert(compiled);
        }
    }
    let object = object(b.rest());
    let mut mutated = object.clone();
    let with_patch = system.mutate(&Admission::new(&object).with_patch(), &mut mutated);
    let mut pathless_object = object.clone();
    let pathless = system.mutate(
        &Admission::new(&object).without_paths(),
        &mut pathless_object,
    );
    let with_patch = match with_patch {
        Ok(mutation) => mutation,
        Err(error) => {
            let _ = error.to_string();
            assert_eq!(mutated, object, "a failed mutation left the object changed");
            // A failure reads no first-pass path: the same without paths.
            assert_eq!(pathless, Err(error), "without paths, another failure");
            return;
        }
    };
    let mut plain_object = object.clone();
    let plain = match system.mutate(&Admission::new(&object), &mut plain_object) {
        Ok(mutation) => mutation,
        Err(error) => panic!("mutating again without a patch failed: {error}"),
    };
    assert_eq!(
        plain.mutated, with_patch.mutated,
        "the patch changed the outcome"
    );
    assert_eq!(plain_object, mutated, "the patch changed the result");
    assert_eq!(
        plain.changes, with_patch.changes,
        "the patch changed the changes"
    );
    let pathless = match pathless {
        Ok(mutation) => mutation,
        Err(error) => panic!("mutating again without paths failed: {error}"),
    };
    assert_eq!(pathless_object, mutated, "the paths changed the result");
    assert_eq!(
        pathless.passes, plain.passes,
        "the paths changed the passes"
    );
    assert_eq!(
        pathless.changes.len(),
        plain.changes.len(),
        "the paths changed the changes"
    );
    for (plain, pinned) in pathless.changes.iter().zip(&plain.changes) {
        match pinned.pass {
            1 => assert_eq!(
                (plain.pass, plain.mutator(), plain.path().to_string()),
                (1, pinned.mutator(), pinned.location().to_string()),
                "a first-pass change without paths"
            ),
            _ => assert_eq!(plain, pinned, "a later change without paths"),
        }
    }
    if !with_patch.mutated {
        assert!(with_patch.patch.is_none(), "a patch without a change");
        assert_eq!(mutated, object, "not mutated, yet changed");
        return;
    }
    let Some(patch) = &with_patch.patch else {
        panic!("a mutated object without its patch");
    };
    let patch = match patch.operations() {
        Ok(operations) => operations,
        Err(error) => panic!("the patch is not RFC 6902 JSON: {error}\npatch: {patch:?}"),
    };
    let mut patched = object.clone();
    if let Err(error) = json_patch::patch(&mut patched, &patch) {
        panic!("the patch does not apply: {error}\npatch: {patch:?}\nobject: {object}");
    }
    assert_eq!(
        patched, mutated,
        "the patch does not give the mutated object: {patch:?}"
    );
    let mut again_object = mutated.clone();
    match system.mutate(&Admission::new(&mutated), &mut again_object) {
        Ok(again) => assert!(
            !again.mutated,
            "not a fixed point: {mutated}\nbecame {again_object}\nchanges {:?}",
            again.changes
        ),
        Err(error) => panic!("mutating the result failed: {error}\nresult: {mutated}"),
    }
});
