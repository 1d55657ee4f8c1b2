//! `sartor mutate -o suite`: what was previewed, written as a `sartor test`
//! suite (one case per input object: the object inline, and what it became
//! or the error it met), so that today's behaviour becomes a test the
//! repository keeps.

use std::collections::{HashMap, HashSet};

use anyhow::Context as _;
use sartor_api::{Document, Input};
use sartor_engine::{ApiResource, Operation};
use serde::Serialize;
use serde_json::Value;

use super::MutateArgs;
use crate::load::{Repository, namespace_name};

/// The head of every suite printed: what it is, and how to run it.
const HEADER: &str = "\
# A sartor test suite written by `sartor mutate -o suite`: each case is an
# input object and what sartor mutate made of it. Paths are as sartor mutate
# was given them: save this file in the directory it ran in, with a name
# ending in .sartor-test.yaml, and run `sartor test` on it there.
";

/// A suite as `sartor test` reads it (docs/cli.md, "Test suites").
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Suite {
    mutators: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    namespaces: Vec<Value>,
    namespace: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    api_resources: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    provider_answers: Vec<String>,
    cases: Vec<Case>,
    /// Names of the Namespaces the suite has so far, from --namespaces and
    /// inline: the first of a name serves selectors, as in `sartor mutate`.
    #[serde(skip)]
    named: HashSet<String>,
    /// Objects of the case being written: the input's result, then what it
    /// generates.
    #[serde(skip)]
    pending: Vec<Value>,
    #[serde(skip)]
    operation: Operation,
    #[serde(skip)]
    expand: bool,
    #[serde(skip)]
    username: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Case {
    name: String,
    operation: Operation,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    expand: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    username: String,
    input: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    expected: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expected_error: Option<String>,
}

impl Suite {
    /// The suite for `args`, whose mutators `repository` read and whose
    /// `--namespaces` are `given`; `Err` says why these inputs cannot be
    /// written as a suite (a suite names its mutators by path, so they
    /// cannot come from standard input).
    pub(super) fn new(
        args: &MutateArgs,
        repository: &Repository,
        given: &HashMap<String, Value>,
    ) -> Result<Suite, String> {
        if args.diff || args.explain {
            return Err("-o suite writes the objects as a test suite; it cannot be combined with --diff or --explain".into());
        }
        if args.call_providers {
            return Err("-o suite needs the providers' answers recorded: give --provider-answers instead of --call-providers".into());
        }
        if args.no_builtin_templates {
            return Err("-o suite: a test suite always expands with the built-in templates; leave out --no-builtin-templates".into());
        }
        let from_stdin = |file: &String| file == &Input::Stdin.to_string();
        if args.mutators.iter().any(|m| m == "-")
            || repository.origins.values().any(|o| from_stdin(&o.file))
            || repository
                .templates
                .iter()
                .any(|t| from_stdin(&t.origin.file))
            || repository
                .providers
                .iter()
                .any(|p| from_stdin(&p.origin.file))
        {
            return Err("-o suite names the mutators by path: a suite cannot name standard input; put the mutators, ExpansionTemplates and Providers in a file".into());
        }
        // The inputs are read as the suite's repository too: mutators,
        // ExpansionTemplates and CRDs among them count there as here.
        let mut mutators = args.mutators.clone();
        mutators.extend(args.inputs.iter().filter(|i| *i != "-").cloned());
        Ok(Suite {
            mutators,
            namespaces: args
                .namespaces
                .iter()
                .map(|path| Value::String(path.clone()))
                .collect(),
            namespace: args.namespace.clone(),
            api_resources: args.api_resources.clone(),
            provider_answers: args.provider_answers.clone(),
            cases: Vec::new(),
            named: given.keys().cloned().collect(),
            pending: Vec::new(),
            operation: args.operation,
            expand: args.expand,
            username: args.username.clone(),
        })
    }

    /// An object of the case being written.
    pub(super) fn object(&mut self, object: Value) {
        self.pending.push(object);
    }

    /// Ends the case of `document`: the objects given since, or `failure`,
    /// the message the mutation failed with. An input Namespace is added
    /// inline unless one of its name is there already.
    ///
    /// # Errors
    /// A CRD on standard input: the suite could not give its kind a scope.
    pub(super) fn case(
        &mut self,
        document: &Document,
        failure: Option<&str>,
    ) -> Result<(), String> {
        let expected = std::mem::take(&mut self.pending);
        if document.origin.file == Input::Stdin.to_string()
            && matches!(ApiResource::of_crd(&document.value), Ok(Some(_)))
        {
            return Err(format!(
                "{}: -o suite cannot carry a CRD on standard input into a suite (its kind's scope); put it in a file",
                document.origin
            ));
        }
        if let Some(name) = namespace_name(&document.value)
            && self.named.insert(name.to_string())
        {
            self.namespaces.push(document.value.clone());
        }
        let (expected, expected_error) = match failure {
            // The case's input is inline: its message names `inline`, so
            // only what follows the origin is expected.
            Some(message) => {
                let origin = format!("{}: ", document.origin);
                let message = message.strip_prefix(&origin).unwrap_or(message);
                (None, Some(message.to_string()))
            }
            None => match <[Value; 1]>::try_from(expected) {
                Ok([one]) => (Some(one), None),
                Err(many) => (Some(Value::Array(many)), None),
            },
        };
        self.cases.push(Case {
            name: format!("{} ({})", super::describe(&document.value), document.origin),
            operation: self.operation,
            expand: self.expand,
            username: self.username.clone(),
            input: document.value.clone(),
            expected,
            expected_error,
        });
        Ok(())
    }

    /// The suite as YAML, with its header.
    ///
    /// # Errors
    /// It cannot be printed.
    pub(super) fn to_yaml(&self) -> anyhow::Result<String> {
        // Straight from the struct: its fields keep the order of the docs.
        let text = serde_saphyr::to_string(self).context("printing YAML")?;
        Ok(format!("{HEADER}{text}"))
    }
}
