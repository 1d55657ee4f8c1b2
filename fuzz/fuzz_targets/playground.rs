//! The playground's request: bytes as the body of `POST /api/evaluate`
//! (first byte even: the rest as the JSON request the page sends) or as
//! the two panes themselves (odd: the rest split at the first `\n===\n`
//! into mutators and objects, so the fuzzer works on YAML rather than on
//! JSON escapes; `--expand` when the first byte is 3 modulo 4) → `sartor_playground::evaluate`, which runs the CLI's
//! mutate, lint and export on them. Nothing may panic; a refusal renders.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sartor_playground::{Input, evaluate};

fuzz_target!(|data: &[u8]| {
    let Some((first, rest)) = data.split_first() else {
        return;
    };
    let input = match first % 2 {
        0 => match serde_json::from_slice::<Input>(rest) {
            Ok(input) => input,
            Err(error) => {
                let _ = error.to_string();
                return;
            }
        },
        _ => {
            let text = String::from_utf8_lossy(rest);
            let (mutators, objects) = text.split_once("\n===\n").unwrap_or((&text, ""));
            Input {
                mutators: mutators.to_string(),
                objects: objects.to_string(),
                namespace: "default".to_string(),
                operation: "CREATE".to_string(),
                expand: first % 4 == 3,
                api_resources: String::new(),
                username: String::new(),
                namespace_labels: String::new(),
            }
        }
    };
    match evaluate(&input) {
        Ok(output) => {
            // A finding's line is a line of the pane.
            let last = input.mutators.matches('\n').count() + 1;
            for problem in &output.problems {
                if let Some(line) = problem.line {
                    assert!((1..=last).contains(&line), "{problem:?} past line {last}");
                }
            }
            for run in [
                output.mutate,
                output.diff,
                output.explain,
                output.suite,
                output.lint,
                output.export,
            ] {
                assert!(run.exit <= 2, "exit {}: {}", run.exit, run.err);
            }
        }
        Err(refused) => {
            let _ = refused.to_string();
        }
    }
});
