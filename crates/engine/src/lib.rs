//! sartor's mutation engine: pure Rust, no I/O, no async. Mutators in,
//! then objects in place: each admitted object is mutated where it lies, and
//! a [`Mutation`] says what changed (a trace, and an RFC 6902 [`Patch`] when
//! asked).
//!
//! # Where to start
//!
//! Compile each mutator object ([`sartor_api::MutatorObject`], read by
//! `sartor_api`'s loader) with [`Mutator::compile`], load them into a
//! [`System`] with [`System::upsert`] (it checks schema and condition
//! conflicts), and call [`System::mutate`] with an [`Admission`] for every
//! object. That is all the webhook, `sartor mutate` and `sartor test` do.
//!
//! ```
//! use sartor_engine::{Admission, Mutator, System};
//! use serde_json::json;
//!
//! let assign = sartor_api::parse_mutator(&json!({
//!     "apiVersion": "mutations.sartor.dev/v1",
//!     "kind": "Assign",
//!     "metadata": {"name": "always-pull"},
//!     "spec": {
//!         "applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}],
//!         "location": "spec.containers[name: *].imagePullPolicy",
//!         "parameters": {"assign": {"value": "Always"}},
//!     },
//! }))?;
//! let mut system = System::new();
//! let conflicts = system.upsert(Mutator::compile(&assign)?);
//! assert!(conflicts.is_empty());
//!
//! let mut pod = json!({
//!     "apiVersion": "v1",
//!     "kind": "Pod",
//!     "metadata": {"name": "web", "namespace": "default"},
//!     "spec": {"containers": [{"name": "app", "image": "nginx"}]},
//! });
//! let admission = Admission::new(&pod).with_patch();
//! let mutation = system.mutate(&admission, &mut pod)?;
//!
//! assert!(mutation.mutated);
//! assert_eq!(mutation.passes, 2);
//! assert_eq!(
//!     pod["spec"]["containers"][0],
//!     json!({"name": "app", "image": "nginx", "imagePullPolicy": "Always"}),
//! );
//! let paths: Vec<String> = mutation.changes.iter().map(|c| c.path().to_string()).collect();
//! assert_eq!(paths, ["spec.containers[name: app].imagePullPolicy"]);
//! let patch = mutation.patch.ok_or("a mutated object has a patch")?;
//! assert_eq!(
//!     std::str::from_utf8(patch.json())?,
//!     r#"[{"op":"add","path":"/spec/containers/0/imagePullPolicy","value":"Always"}]"#,
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # How an object flows
//!
//! ```text
//!  MutatorObject ──Mutator::compile──▶ Mutator (location, pathTests, applyTo, match,
//!                                               value conditions, setter)
//!                                          │ System::upsert / remove (schema- and
//!                                          │  condition-conflict checks)
//!                                          ▼
//!  Admission, &mut object ──System::mutate──▶ candidates for the object's kind
//!  (operation, namespace,      and operation (index) ──▶ passes: match ──▶ walk +
//!   source, Namespace lookup,  setter, in fixed order, pass after pass until
//!   patch, paths, annotate)    nothing changes, in place (originals saved per
//!                              place) ──▶ external data, annotation
//!                              ──▶ Mutation: trace, RFC 6902 patch
//! ```
//!
//! One file a step: `system` holds the mutators and their per-kind
//! `index`; `passes` runs the pass loop, asks `convergence` whether a pass
//! ended where it started, then puts [`external`] data in place and writes
//! the `annotation`; `mutation` is what comes back. The `walk` is the one
//! generic walk every mutator kind shares: follow the location through
//! objects and keyed lists, apply pathTests at each depth, create what is
//! missing, and hand the last step to the kind's setter. `originals` keeps
//! what each changed place held, for the convergence check, the `patch`
//! and putting the object back. Semantics are Gatekeeper's (`pkg/mutation`);
//! the module docs say where sartor deliberately differs.
//!
//! [`compile`] turns what the loader read into one [`System`], with where
//! each mutator came from (the step the file watch and the offline commands
//! share). [`analysis`] looks at a whole set of mutators at rest (what
//! `sartor lint` reports); [`Expander`] generates the resources Gatekeeper's expansion
//! templates describe, to mutate them too.

pub mod analysis;
mod annotation;
mod compiled;
mod condition;
mod conflict;
mod convergence;
mod expansion;
pub mod external;
mod image;
mod index;
mod interference;
mod labels;
mod matching;
mod mutation;
mod mutator;
mod originals;
mod passes;
mod patch;
mod request;
mod schema;
mod scope;
mod system;
mod targets;
mod walk;

pub use annotation::MUTATIONS_ANNOTATION;
pub use compiled::{Compiled, FileError, compile};
pub use condition::{CompiledCondition, ConditionConflict, json_equal};
pub use conflict::Conflict;
pub use expansion::{ExpandError, ExpandFailure, Expander, Generated, Template, TemplatesError};
pub use external::{Answers, Asks, NoAnswers, PLACEHOLDER_FIELD, ProviderAnswers, item_error};
pub use image::{ImageError, ImageParts};
pub use labels::SelectorError;
pub use matching::{MatchCompileError, MatchError};
pub use mutation::{Change, Failure, MutateError, Mutation, ObjectRef};
pub use mutator::{
    Applies, ApplyError, CompileError, Mutator, MutatorId, Operations, Problem, Terminal,
};
pub use patch::Patch;
pub use request::{
    Admission, Gvk, NamespaceLookup, NoNamespaces, Operation, Request, Source, is_namespace_kind,
};
/// Why [`Mutation::protected`] left an object as it was.
pub use sartor_api::Protection;
pub use schema::{SchemaConflict, Shape};
pub use scope::{
    ApiResource, ApiResourcesError, BUILTIN_KUBERNETES_VERSION, CrdError, Placement, Scopes,
};
pub use system::System;
pub use targets::{KindPattern, Targets};
pub use walk::{Place, SetError, WalkError};
