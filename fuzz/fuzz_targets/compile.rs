//! Compiling: a mutator document built from fuzz bytes (kind, location from a
//! small grammar or a fuzzed string, value, pathTests, applyTo, match, value
//! conditions) → `parse_mutator` → `Mutator::compile`. Nothing may panic; a
//! compiled mutator goes into a `System` and its conflicts are listed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sartor_api::parse_mutator;
use sartor_engine::{Mutator, System};
use sartor_fuzz::{Bytes, KINDS, mutator};

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes::new(data);
    let mut system = System::new();
    for i in 0..2 {
        let kind = b.pick(&KINDS);
        let document = mutator(&mut b, kind, &format!("m{i}"));
        let object = match parse_mutator(&document) {
            Ok(object) => object,
            Err(e) => {
                let _ = e.to_string();
                continue;
            }
        };
        match Mutator::compile(&object) {
            Ok(compiled) => {
                let _ = (
                    compiled.terminal(),
                    compiled.provider(),
                    compiled.needs_namespace(),
                );
                let id = compiled.id().clone();
                system.upsert(compiled);
                for conflict in system.conflicts(&id) {
                    let _ = conflict.to_string();
                }
            }
            Err(e) => {
                let _ = e.to_string();
            }
        }
        if b.is_empty() {
            break;
        }
    }
});
