//! sartor's mutation engine: pure Rust, no I/O, no async. JSON in, mutated
//! JSON and a trace of what changed out.
//!
//! ```text
//!  MutatorObject ──Mutator::compile──▶ Mutator (location, pathTests, applyTo, match,
//!                                               value conditions, setter)
//!                                          │ System::upsert / remove (schema- and
//!                                          │  condition-conflict checks)
//!                                          ▼
//!  Admission, &mut object ──System::mutate──▶ candidates for the object's kind
//!  (operation, namespace,      and operation ──▶ match ──▶ walk + setter, in
//!   source, Namespace lookup)  fixed order, pass after pass until nothing
//!                              changes, in place (originals saved per place)
//!                              ──▶ Mutation: trace, RFC 6902 patch
//! ```
//!
//! [`walk`] is the one generic walk every mutator kind shares: follow the
//! location through objects and keyed lists, apply pathTests at each depth,
//! create what is missing, and hand the last step to the kind's
//! [`walk::Setter`]. Semantics are Gatekeeper's (`pkg/mutation`); the module
//! docs say where sartor deliberately differs.

pub mod analysis;
mod annotation;
pub mod condition;
pub mod conflict;
mod convergence;
pub mod expansion;
pub mod external;
pub mod image;
mod index;
mod interference;
pub mod labels;
pub mod matching;
mod mutation;
pub mod mutator;
mod originals;
mod passes;
mod patch;
pub mod request;
pub mod schema;
pub mod scope;
pub mod system;
pub mod targets;
pub mod walk;

pub use annotation::MUTATIONS_ANNOTATION;
pub use condition::{CompiledCondition, ConditionConflict};
pub use conflict::Conflict;
pub use expansion::{ExpandError, ExpandFailure, Expander, Generated, Template, TemplatesError};
pub use external::{Answers, Asks, NoAnswers, ProviderAnswers};
pub use mutation::{Change, Failure, MutateError, Mutation, ObjectRef};
pub use mutator::{
    Applies, ApplyError, CompileError, Mutator, MutatorId, Operations, Problem, Terminal,
};
pub use patch::Patch;
pub use request::{Admission, Gvk, NamespaceLookup, NoNamespaces, Operation, Request, Source};
/// Why [`Mutation::protected`] left an object as it was.
pub use sartor_api::Protection;
pub use schema::{SchemaConflict, Shape};
pub use scope::{ApiResource, Placement, Scopes};
pub use system::System;
pub use targets::{KindPattern, Targets};
