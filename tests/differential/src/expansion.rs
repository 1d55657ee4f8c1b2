//! sartor's side of a case's expansion: what `sartor mutate --expand
//! --no-builtin-templates` does with the case's ExpansionTemplates (the
//! loader's `parse_expansion_template`, `Template::compile`, `Expander::new`,
//! and `expand_one`'s mutation of each generated resource as
//! `source: Generated`, in the parent's namespace, admitted by no operation).
//!
//! One liberty: on a cycle `sartor mutate` refuses the whole set (a load
//! error); here the templates of the cycle are refused (stage `cycle`) and
//! the others expand, as Gatekeeper's controller keeps them.

use sartor_api::{Operation, parse_expansion_template};
use sartor_engine::{
    Admission, ExpandFailure, Expander, NamespaceLookup, System, Template, TemplatesError,
};
use serde_json::Value;

use crate::case::{Answer, Case, GeneratedObject, Outcome, TemplateVerdict, name_of};

/// Adds to `answer` (sartor's admission of `case`, on `operation`) what the
/// case's templates make of the admitted object.
pub fn expand(
    case: &Case,
    system: &System,
    operation: Option<Operation>,
    namespaces: &dyn NamespaceLookup,
    answer: &mut Answer,
) {
    if case.templates.is_empty() {
        return;
    }
    let (verdicts, expander) = templates(&case.templates);
    answer.templates = verdicts;
    let parent = match &answer.outcome {
        Outcome::Mutated { object } => object,
        Outcome::Unchanged => &case.object,
        // `sartor mutate` stops at an admission error, and has no
        // operation but CREATE and UPDATE.
        Outcome::Error { .. } | Outcome::Skipped { .. } => return,
    };
    if operation.is_none() {
        return;
    }
    let namespace = crate::sartor::admitted_namespace(parent, case);
    let mut mutate = |generated: &mut Value| {
        let admission = Admission::new(generated)
            .without_operation()
            .source(sartor_engine::Source::Generated)
            .namespace(namespace.as_deref())
            .namespaces(namespaces)
            .username(&case.username);
        system.mutate(&admission, generated)?;
        Ok::<(), sartor_engine::MutateError>(())
    };
    match expander.expand(parent, namespace.as_deref(), &mut mutate) {
        Ok(generated) => {
            answer.generated = Some(
                generated
                    .into_iter()
                    .map(|g| GeneratedObject {
                        template: g.template,
                        outcome: if g.object == g.original {
                            "unchanged"
                        } else {
                            "mutated"
                        }
                        .to_string(),
                        object: g.object,
                    })
                    .collect(),
            );
        }
        Err(ExpandFailure::Expand(error)) => answer.expand_error = Some(error.to_string()),
        Err(ExpandFailure::Mutate(error)) => {
            answer.expand_error = Some(format!("generated {error}"));
        }
    }
}

/// Each template's verdict, and an expander of those accepted.
fn templates(objects: &[Value]) -> (Vec<TemplateVerdict>, Expander) {
    let mut verdicts = Vec::with_capacity(objects.len());
    let mut compiled: Vec<Option<Template>> = Vec::with_capacity(objects.len());
    for object in objects {
        let mut verdict = TemplateVerdict {
            name: name_of(object).to_string(),
            accepted: true,
            conflict: false,
            stage: None,
            error: None,
        };
        match parse_expansion_template(object) {
            Ok(template) => compiled.push(Some(Template::compile(&template))),
            Err(error) => {
                verdict.accepted = false;
                verdict.stage = Some("parse".to_string());
                verdict.error = Some(error.to_string());
                compiled.push(None);
            }
        }
        verdicts.push(verdict);
    }
    // Each round refuses the templates of one cycle; at most one round per
    // template.
    for _ in 0..=objects.len() {
        let accepted: Vec<Template> = compiled.iter().flatten().cloned().collect();
        match Expander::new(accepted) {
            Ok(expander) => return (verdicts, expander),
            Err(error @ TemplatesError::Cycle(_)) => {
                let TemplatesError::Cycle(names) = &error;
                for (verdict, template) in verdicts.iter_mut().zip(compiled.iter_mut()) {
                    if template
                        .as_ref()
                        .is_some_and(|t| names.iter().any(|n| n == t.name()))
                    {
                        *template = None;
                        verdict.accepted = false;
                        verdict.stage = Some("cycle".to_string());
                        verdict.error = Some(error.to_string());
                    }
                }
            }
        }
    }
    (verdicts, Expander::default())
}
