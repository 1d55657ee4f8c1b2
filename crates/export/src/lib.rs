//! sartor's mutators as Kubernetes MutatingAdmissionPolicies
//! (`admissionregistration.k8s.io/v1`, GA in 1.36): mutation inside
//! kube-apiserver, with no webhook to run. The part of a set that can be
//! written in CEL with exactly sartor's semantics is exported as one policy
//! and its binding; every other mutator is refused with the reason.
//!
//! ```text
//!  System (sartor's order) + each mutator's spec
//!    ──each mutator──▶ exportable? (kind, constant value, location of fields,
//!                      built-in kinds, no value conditions) ──no──▶ Refusal
//!    ──▶ a guard (applyTo, match, pathTests as CEL) and a JSON patch (parents
//!        created as the engine creates them)
//!    ──▶ two runs must do: a mutator sartor may apply in a third pass is refused
//!    ──▶ MutatingAdmissionPolicy (mutations in sartor's order, the install's
//!        exclusions, failurePolicy) + MutatingAdmissionPolicyBinding
//! ```
//!
//! One policy, not one per mutator: mutations inside a policy run in order,
//! each on the object the one before left, as sartor's do; policies have no
//! order between them.
//!
//! One step, one file: `mutation` (a mutator's parts, by kind), `value`
//! (where its value comes from), `patch` (its JSON patch), `guard` (its
//! `applyTo` and `match` as rules and CEL), `passes` (what it reads and
//! writes, and the third pass), `policy` (the objects), `limits` (what the
//! API server takes); this file holds the types and [`map`].

mod cel;
mod guard;
pub mod limits;
mod mutation;
mod passes;
mod patch;
mod policy;
mod unchanged;
mod value;
mod webhook;

use std::collections::HashMap;
use std::fmt;

use sartor_api::{Exclusions, MutatorObject};
use sartor_engine::{MutatorId, Scopes, System};
use serde_json::Value;

use crate::mutation::Mutation;

pub use webhook::{Decided, Tally, Undecided, WEBHOOK_CONDITION, WebhookCondition, Withheld};

/// How the policies are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The policy's and the binding's name.
    pub name: String,
    /// The namespaces left out, as the install leaves them out: sartor's
    /// own, the `--exclude-namespace` names and globs, and those labelled
    /// with the exemption label.
    pub exclusions: Exclusions,
    /// What the API server does when a mutation fails.
    pub failure_policy: FailurePolicy,
    /// The kinds the cluster serves and their resources (plurals): the
    /// built-in ones, and those of `--api-resources` and CRDs given.
    pub resources: Scopes,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            name: "sartor".to_string(),
            exclusions: Exclusions::default(),
            failure_policy: FailurePolicy::Ignore,
            resources: Scopes::builtin().clone(),
        }
    }
}

/// The policy's `failurePolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    /// The object is admitted unmutated, as with sartor's webhook.
    Ignore,
    /// The request is refused.
    Fail,
}

impl FailurePolicy {
    /// As the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            FailurePolicy::Ignore => "Ignore",
            FailurePolicy::Fail => "Fail",
        }
    }
}

/// What an export produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Export {
    /// The policy and its binding, ready for `kubectl apply`; empty when no
    /// mutator exports.
    pub objects: Vec<Value>,
    /// The mutators in the policy, in order.
    pub exported: Vec<MutatorId>,
    /// Each mutator left out, and why, in sartor's order.
    pub refused: Vec<Refusal>,
}

/// A mutator not exported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Which.
    pub mutator: MutatorId,
    /// Why.
    pub reason: Reason,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: not exported: {}", named(&self.mutator), self.reason)
    }
}

/// `Kind/name`, as OpenReports and kubectl name a mutator.
pub fn named(id: &MutatorId) -> String {
    format!("{}/{}", id.kind, id.name)
}

/// Why a mutator cannot be exported exactly.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Reason {
    /// sartor does not enforce it.
    #[error("it is in conflict with another mutator, so sartor does not enforce it")]
    Conflicted,
    /// Its value comes from where the policy cannot get it.
    #[error("its value comes from {0}, which is not exported")]
    NotConstant(&'static str),
    /// Its location (or a pathTest's) cannot be read as fields.
    #[error("{0} selects list elements, which only an Assign's location may do yet")]
    ListInLocation(String),
    /// A pathTest on elements a glob selects.
    #[error("its pathTest {0} tests elements a glob or notin selects, which is not exported yet")]
    GlobPathTest(String),
    /// A glob below a keyed element the mutation may have to create.
    #[error(
        "its location has a glob below a keyed element it may create, which is not exported yet"
    )]
    GlobBelowKeyed,
    /// A glob as the last node.
    #[error("its location ends at a glob (every element replaced), which is not exported yet")]
    GlobElement,
    /// An integer CEL would write as a string.
    #[error(
        "its value holds the integer {0}, past 2^53 - 1, which the API server writes as a string (CEL gives such integers to JSON as strings)"
    )]
    UnsafeInteger(String),
    /// An AssignImage that may change its own result again.
    #[error(
        "it assigns only a path without a `/`, which may change the image again on the next pass (sartor may apply it three times, the API server runs a policy at most twice)"
    )]
    ImagePathAlone,
    /// sartor's `notin` selector with numbers.
    #[error("its location has a notin selector of numbers, which is not exported yet")]
    NotIn,
    /// sartor's value conditions.
    #[error("its value conditions (parameters.conditions) are not exported yet")]
    Conditions,
    /// It only matches objects that never reach admission.
    #[error(
        "it matches only generated objects (match.source: Generated), which never reach admission"
    )]
    GeneratedOnly,
    /// A kind whose resource the export was not told.
    #[error(
        "it applies to {0}, whose resource (plural) is not known offline: give its CRD or --api-resources"
    )]
    UnknownKind(String),
    /// Nothing to apply to.
    #[error("it names no kind a cluster serves")]
    NoKinds,
    /// Its expression is longer than the API server takes.
    #[error(
        "its expression would be {0} characters long, and the API server takes at most {max}",
        max = limits::MAX_CODE_POINTS
    )]
    ExpressionTooLong(usize),
    /// Its expression nests deeper than the API server's CEL parser goes.
    #[error(
        "its expression would nest {0} levels deep, and the API server's CEL parser stops at {max}",
        max = limits::MAX_NESTING
    )]
    ExpressionTooDeep(usize),
    /// The policy would be larger than the API server stores.
    #[error(
        "with it the policy would take {0} bytes, past the {max} an exported policy may take (etcd stores at most 1.5 MiB)",
        max = limits::MAX_POLICY_BYTES
    )]
    PolicyTooLarge(usize),
    /// It would need more passes than the API server runs.
    #[error(
        "it reads {path}, which {writer} writes after it: sartor may apply it in pass {passes}, and the API server runs a policy at most twice (once more when the first run changed the object)"
    )]
    TooManyPasses {
        /// What it reads.
        path: String,
        /// The mutator whose write it waits for, `Kind/name`.
        writer: String,
        /// The pass sartor may apply it in.
        passes: usize,
    },
}

impl From<limits::Excess> for Reason {
    fn from(excess: limits::Excess) -> Reason {
        match excess {
            limits::Excess::Length(length) => Reason::ExpressionTooLong(length),
            limits::Excess::Nesting(depth) => Reason::ExpressionTooDeep(depth),
        }
    }
}

/// Exports the mutators of `system` that can be written exactly as one
/// MutatingAdmissionPolicy; `specs` holds each one's spec, by id.
pub fn map(
    system: &System,
    specs: &HashMap<MutatorId, MutatorObject>,
    options: &Options,
) -> Export {
    let mut refused = Vec::new();
    let mut mutations: Vec<Mutation> = Vec::new();
    for mutator in system.mutators() {
        let id = mutator.id();
        let translated = if system.is_conflicted(id) {
            Err(Reason::Conflicted)
        } else {
            match specs.get(id) {
                Some(spec) => mutation::translate(id, spec, &options.resources),
                None => continue,
            }
        };
        match translated {
            Ok(mutation) => mutations.push(mutation),
            Err(reason) => refused.push(Refusal {
                mutator: id.clone(),
                reason,
            }),
        }
    }
    // Two passes must do: refuse, first in order first, each mutator sartor
    // may apply in a third pass, until none is left.
    while let Some(late) = passes::late(&mutations.iter().map(|m| &m.effects).collect::<Vec<_>>()) {
        let Some(writer) = mutations.get(late.writer).map(|writer| named(&writer.id)) else {
            break;
        };
        let mutation = mutations.remove(late.at);
        refused.push(Refusal {
            mutator: mutation.id,
            reason: Reason::TooManyPasses {
                path: late.path,
                writer,
                passes: late.pass,
            },
        });
    }
    let order: HashMap<&MutatorId, usize> = system
        .mutators()
        .enumerate()
        .map(|(index, mutator)| (mutator.id(), index))
        .collect();
    // The policy must fit in etcd: the last mutators in order are left out
    // until it does (leaving one out only shortens the chains the pass check
    // allowed).
    let mut objects = Vec::new();
    while !mutations.is_empty() {
        objects = policy::policy(&mutations, options);
        let bytes = objects.first().map_or(0, |policy| policy.to_string().len());
        if bytes <= limits::MAX_POLICY_BYTES {
            break;
        }
        if let Some(last) = mutations.pop() {
            refused.push(Refusal {
                mutator: last.id,
                reason: Reason::PolicyTooLarge(bytes),
            });
        }
        objects = Vec::new();
    }
    refused.sort_by_key(|refusal| order.get(&refusal.mutator).copied());
    let exported: Vec<MutatorId> = mutations.iter().map(|m| m.id.clone()).collect();
    Export {
        objects,
        exported,
        refused,
    }
}

#[cfg(test)]
mod tests;
