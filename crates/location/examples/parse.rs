//! Parses locations given as arguments and prints, for each, its canonical form
//! and nodes, or the error with a caret under the fault.
//!
//! ```text
//! cargo run -q -p sartor-location --example parse -- 'spec.containers[name: *].image'
//! ```
//!
//! Exits 0 when every location parses, 1 when any does not, 2 when given none.

use std::process::ExitCode;

use sartor_location::{KeyValue, Node, Path};

fn main() -> ExitCode {
    let locations: Vec<String> = std::env::args().skip(1).collect();
    if locations.is_empty() {
        eprintln!("usage: parse LOCATION...");
        return ExitCode::from(2);
    }
    let mut failed = false;
    for location in &locations {
        match Path::parse(location) {
            Ok(path) => {
                println!("{path}");
                for node in path.nodes() {
                    println!("  {}", describe(node));
                }
            }
            Err(err) => {
                failed = true;
                eprintln!("{err}");
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn describe(node: &Node) -> String {
    match node {
        Node::Field(name) => format!("field {name:?}"),
        Node::List(list) => {
            let value = match &list.key_value {
                KeyValue::Glob => "every element".to_string(),
                KeyValue::String(s) => {
                    format!("the element whose {:?} is the string {s:?}", list.key_field)
                }
                KeyValue::Integer(n) => {
                    format!("the element whose {:?} is the integer {n}", list.key_field)
                }
                KeyValue::NotIn(set) => format!(
                    "every element whose {:?} is none of {set} (sartor only)",
                    list.key_field
                ),
            };
            format!("list selector: {value}")
        }
    }
}
