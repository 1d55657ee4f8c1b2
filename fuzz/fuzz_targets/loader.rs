//! The loader: bytes as one file's text, read as a multi-document YAML
//! stream (and, when the first byte is odd, as a JSON stream), then
//! interpreted as mutators/providers/templates. Nothing may panic; errors
//! must render.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sartor_api::{
    mutators_from_documents, parse_expansion_template, parse_mutator, parse_provider,
    read_documents_from_str,
};

fuzz_target!(|data: &[u8]| {
    let Some((first, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let json = first % 2 == 1;
    let (documents, errors) = read_documents_from_str("fuzz.yaml", text, json);
    for error in &errors {
        let _ = error.to_string();
    }
    for document in &documents {
        if let Err(e) = parse_mutator(&document.value) {
            let _ = e.to_string();
        }
        if let Err(e) = parse_provider(&document.value) {
            let _ = e.to_string();
        }
        if let Err(e) = parse_expansion_template(&document.value) {
            let _ = e.to_string();
        }
    }
    let loaded = mutators_from_documents(&documents, errors);
    for error in &loaded.errors {
        let _ = error.to_string();
    }
    for mutator in &loaded.mutators {
        let _ = mutator.object.sartor_extension();
        let _ = mutator.object.to_value();
    }
});
