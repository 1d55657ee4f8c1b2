//! A mutator compiled from its API object: parsed location and pathTests,
//! compiled match criteria, the (kind, operation) bindings it applies to, and
//! the kind's setter.
//!
//! Each kind lives in its own module and supplies only two things: how it
//! compiles from its API type (what Gatekeeper rejects at validation time) and
//! how it sets the value at the end of its location. Everything else — the
//! walk, matching, ordering, convergence — is shared.

mod assign;
mod assign_image;
mod assign_metadata;
mod modify_set;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use sartor_api::{ApplyTo, MutatorKind, MutatorObject, OperationPattern, ValueOperator};
use sartor_location::{ListSelector, Node, ParseError, Path, PathTestError, PathTests};
use serde_json::Value;

use crate::condition::CompiledCondition;
use crate::external::PlaceholderSetter;
use crate::image::ImageError;
use crate::matching::{MatchCompileError, MatchError, Matcher};
use crate::originals::Originals;
use crate::request::{Gvk, Operation, Request};
use crate::walk::{self, Changed, WalkError};

/// Identifies a mutator: its kind and name. Orders the way Gatekeeper orders
/// mutators (kind, then name byte-wise); sartor's group and Gatekeeper's are one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MutatorId {
    /// The mutator kind.
    pub kind: MutatorKind,
    /// `metadata.name`.
    pub name: String,
}

/// A mutator ready to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Mutator {
    id: MutatorId,
    generation: Option<i64>,
    location: Path,
    tests: PathTests,
    applies: Applies,
    matcher: Matcher,
    conditions: Vec<CompiledCondition>,
    action: Action,
    /// The kinds one `applyTo` entry alone allows on every operation: what a
    /// generated object, admitted by no operation, needs (Gatekeeper checks
    /// each entry on its own; [`Applies`] merges them).
    whole_kinds: BTreeSet<Gvk>,
    generated_as_created: bool,
    /// The object it was compiled from: what the MAP export and the
    /// webhook's derived match condition translate, so they need no second
    /// copy of the set beside the system.
    spec: Arc<MutatorObject>,
}

/// Which kinds and operations a mutator applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applies {
    /// Every kind and operation (AssignMetadata, which has no `applyTo`).
    Everything,
    /// The kinds listed in `applyTo`, each with the operations it allows.
    Kinds(BTreeMap<Gvk, Operations>),
}

/// A set of admission operations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Operations {
    create: bool,
    update: bool,
}

/// How a mutator's location ends, for the schema-conflict check: what it
/// implies about the type of the last field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Terminal {
    /// Anything may be there (Assign replaces the whole value).
    Any,
    /// A list treated as a set (ModifySet).
    Set,
    /// A string (AssignImage).
    String,
}

/// What a mutator does at the end of its location, as the static analysis
/// sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Effect<'a> {
    /// Replaces what is there (Assign): with a constant, or (`None`) with a
    /// string from the object's metadata. Always writes when it applies.
    Replace(Option<&'a Value>),
    /// Replaces what is there with a Namespace's label or annotation, or
    /// leaves it when the Namespace has none and there is no default.
    ReplaceFromNamespace,
    /// Removes what is there (sartor's `remove: true`).
    Remove,
    /// Sets a label or annotation only when the key is absent
    /// (AssignMetadata); `always` is false when the value may be missing.
    AddIfAbsent {
        /// The constant, when it is one.
        value: Option<&'a Value>,
        /// Whether it writes whenever it applies and the key is absent.
        always: bool,
    },
    /// Merges values into, or prunes them from, a list (ModifySet).
    ModifySet,
    /// Changes parts of an image reference string (AssignImage).
    Image,
}

/// The kind-specific part of a compiled mutator.
#[derive(Debug, Clone, PartialEq)]
enum Action {
    Assign(assign::ValueSource),
    AssignMetadata(assign::ValueSource),
    ModifySet(modify_set::SetSetter),
    AssignImage(assign_image::ImageSetter),
}

/// A mutator that cannot be compiled: names the mutator and says why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{mutator}: {problem}")]
pub struct CompileError {
    /// The mutator.
    pub mutator: MutatorId,
    /// What is wrong with it.
    pub problem: Box<Problem>,
}

/// What is wrong with a mutator, with the spec field it is in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Problem {
    /// Kubernetes names of mutators are capped like Gatekeeper's.
    #[error("metadata.name: {len} characters is longer than the maximum of 63")]
    NameTooLong {
        /// The name's length.
        len: usize,
    },
    /// The location does not parse.
    #[error("spec.location: {0}")]
    Location(ParseError),
    /// A pathTest subPath does not parse.
    #[error("spec.parameters.pathTests[{index}].subPath: {source}")]
    SubPath {
        /// Position in `pathTests`.
        index: usize,
        /// Why.
        source: ParseError,
    },
    /// The pathTests do not fit the location.
    #[error("spec.parameters.pathTests: {0}")]
    PathTests(PathTestError),
    /// Only AssignMetadata may change metadata.
    #[error(
        "spec.location: {kind} cannot change metadata; use AssignMetadata for labels and annotations"
    )]
    MetadataRoot {
        /// The mutator kind.
        kind: MutatorKind,
    },
    /// The location sets the key field of a keyed-list element.
    #[error(
        "spec.location: {location} would change the key field {key:?} of a list element, which identifies it"
    )]
    KeyFieldChanged {
        /// The location.
        location: Path,
        /// The key field.
        key: String,
    },
    /// AssignMetadata outside labels and annotations.
    #[error(
        "spec.location: {location:?} must be metadata.labels.<key> or metadata.annotations.<key>"
    )]
    NotLabelOrAnnotation {
        /// The location as written.
        location: String,
    },
    /// A location deeper than any object sartor can read.
    #[error(
        "spec.location: {nodes} fields and list selectors is deeper than the maximum of {max} (no object nests that deep)",
        max = MAX_LOCATION_NODES
    )]
    LocationTooDeep {
        /// How many nodes it has.
        nodes: usize,
    },
    /// AssignMetadata location longer than the CRD allows.
    #[error("spec.location: {len} characters is longer than the maximum of 512")]
    LocationTooLong {
        /// Its length.
        len: usize,
    },
    /// `spec.parameters.assign` sets no value or several.
    #[error("spec.parameters.assign: set exactly one of value, fromMetadata and externalData")]
    ValueSources,
    /// `spec.parameters.assign` sets one of sartor's sources (fromNamespace,
    /// remove) and another one.
    #[error(
        "spec.parameters.assign: set exactly one of value, fromMetadata, fromNamespace, externalData and remove"
    )]
    ValueSourcesExtended,
    /// `fromNamespace` at a keyed-list element: it gives a string.
    #[error(
        "spec.parameters.assign.fromNamespace: {location} is a keyed-list element; fromNamespace gives a string"
    )]
    NamespaceIntoList {
        /// The location.
        location: Path,
    },
    /// `fromNamespace` names neither or both of a label and an annotation.
    #[error(
        "spec.parameters.assign.fromNamespace: set exactly one of label and annotation, not empty"
    )]
    NamespaceKey,
    /// A removal with a MustNotExist pathTest: what it removes would have to
    /// be absent, so it could never apply.
    #[error(
        "spec.parameters.pathTests[{index}]: MustNotExist cannot go with remove: a removal applies only where its location exists, so it would never apply"
    )]
    RemoveMustNotExist {
        /// The pathTest's position, from 0.
        index: usize,
    },
    /// External data at a keyed-list element: providers answer strings.
    #[error(
        "spec.location: {location} is a keyed-list element; cannot assign external data response to a list"
    )]
    ExternalIntoList {
        /// The location.
        location: Path,
    },
    /// `failurePolicy: UseDefault` without a `default`.
    #[error(
        "spec.parameters.assign.externalData.default: must not be empty when failurePolicy is UseDefault"
    )]
    ExternalDefaultMissing,
    /// AssignMetadata asks providers by user name only.
    #[error(
        "spec.parameters.assign.externalData.dataSource: only Username is supported for AssignMetadata"
    )]
    MetadataExternalSource,
    /// AssignMetadata assigns strings only.
    #[error("spec.parameters.assign.value: labels and annotations are strings, got {found}")]
    MetadataValueNotString {
        /// What was given.
        found: &'static str,
    },
    /// A location ending in `[key: *]`.
    #[error("spec.location: {location} ends in a glob; there is no single list element to set")]
    GlobAtEnd {
        /// The location.
        location: Path,
    },
    /// A location ending in `[key notin (...)]`.
    #[error(
        "spec.location: {location} ends in a notin selector; there is no single list element to set"
    )]
    ExclusionAtEnd {
        /// The location.
        location: Path,
    },
    /// A value for a keyed-list element that is not an object.
    #[error(
        "spec.parameters.assign.value: {location} is a keyed-list element, so the value must be an object, got {found}"
    )]
    ElementNotAnObject {
        /// The location.
        location: Path,
        /// What was given.
        found: &'static str,
    },
    /// A value for a keyed-list element with a different key.
    #[error(
        "spec.parameters.assign.value: the element for {location} must have {key}: {expected}, got {found}"
    )]
    ElementKeyDiffers {
        /// The location.
        location: Path,
        /// The key field.
        key: String,
        /// The key value of the location.
        expected: String,
        /// What the value has (`nothing` when absent).
        found: String,
    },
    /// `fromMetadata` gives a string; it cannot be a keyed-list element.
    #[error(
        "spec.parameters.assign.fromMetadata: {location} is a keyed-list element; fromMetadata gives a string"
    )]
    MetadataIntoList {
        /// The location.
        location: Path,
    },
    /// ModifySet and AssignImage work on fields, not list elements.
    #[error("spec.location: {kind} cannot end at a keyed-list element ({location})")]
    EndsInList {
        /// The mutator kind.
        kind: MutatorKind,
        /// The location.
        location: Path,
    },
    /// `applyTo` is required for every kind but AssignMetadata.
    #[error("spec.applyTo: required; list the groups, versions and kinds this mutator applies to")]
    ApplyToMissing,
    /// An `applyTo` entry with an empty list.
    #[error("spec.applyTo[{index}]: groups, versions and kinds must all be set")]
    ApplyToIncomplete {
        /// Position in `applyTo`.
        index: usize,
    },
    /// `"*"` in `applyTo`: Gatekeeper compares it literally, so it matches nothing.
    #[error(
        "spec.applyTo[{index}].{field}: \"*\" is not a wildcard here and would match nothing; list the {field}"
    )]
    ApplyToGlob {
        /// Position in `applyTo`.
        index: usize,
        /// `groups`, `versions` or `kinds`.
        field: &'static str,
    },
    /// An operation listed twice, or `*` with others.
    #[error("spec.applyTo[{index}].operations: {reason}")]
    Operations {
        /// Position in `applyTo`.
        index: usize,
        /// Why.
        reason: &'static str,
    },
    /// Invalid match criteria.
    #[error("spec.{0}")]
    Match(MatchCompileError),
    /// Invalid AssignImage parameters.
    #[error("spec.parameters: {0}")]
    Image(ImageError),
    /// A value condition's path does not parse.
    #[error("spec.parameters.conditions[{index}].path: {source}")]
    ConditionPath {
        /// Position in `conditions`, from 0.
        index: usize,
        /// Why.
        source: ParseError,
    },
    /// A value condition's path has a glob or a `notin` selector.
    #[error(
        "spec.parameters.conditions[{index}].path: {selector} may select several elements; a condition reads one value, so select one element with [key: value]"
    )]
    ConditionSelectsSeveral {
        /// Position in `conditions`, from 0.
        index: usize,
        /// The selector.
        selector: ListSelector,
    },
    /// `In` or `NotIn` without values.
    #[error("spec.parameters.conditions[{index}].values: {operator} needs at least one value")]
    ConditionValuesMissing {
        /// Position in `conditions`, from 0.
        index: usize,
        /// The operator.
        operator: ValueOperator,
    },
    /// `Exists` or `DoesNotExist` with values.
    #[error("spec.parameters.conditions[{index}].values: {operator} takes no values")]
    ConditionValuesGiven {
        /// Position in `conditions`, from 0.
        index: usize,
        /// The operator.
        operator: ValueOperator,
    },
}

/// A mutator could not run on an object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApplyError {
    /// Matching failed (a namespaceSelector with an unknown Namespace).
    #[error(transparent)]
    Match(#[from] MatchError),
    /// The object does not fit the location.
    #[error(transparent)]
    Walk(#[from] WalkError),
}

// === impl MutatorId ===

impl MutatorId {
    /// An id from its parts.
    pub fn new(kind: MutatorKind, name: impl Into<String>) -> MutatorId {
        MutatorId {
            kind,
            name: name.into(),
        }
    }
}

impl fmt::Display for MutatorId {
    /// `Assign always-pull`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind, self.name)
    }
}

// === impl Mutator ===

impl Mutator {
    /// Compiles an API object, checking everything Gatekeeper checks when a
    /// mutator is created, and a little more (see [`Problem`]).
    ///
    /// # Errors
    /// A [`CompileError`] naming the mutator, the spec field and the reason.
    pub fn compile(object: &MutatorObject) -> Result<Mutator, CompileError> {
        let id = MutatorId::new(object.kind(), object.name());
        let problem = |problem| CompileError {
            mutator: id.clone(),
            problem: Box::new(problem),
        };
        let len = object.name().len();
        if len > 63 {
            return Err(problem(Problem::NameTooLong { len }));
        }
        let parts = match object {
            MutatorObject::Assign(m) => assign::compile(&m.spec),
            MutatorObject::AssignMetadata(m) => assign_metadata::compile(&m.spec),
            MutatorObject::ModifySet(m) => modify_set::compile(&m.spec),
            MutatorObject::AssignImage(m) => assign_image::compile(&m.spec),
        }
        .map_err(problem)?;
        // Unlike a location, a condition may read metadata (labels, say):
        // reading it changes nothing.
        let conditions = object
            .conditions()
            .iter()
            .enumerate()
            .map(|(index, condition)| CompiledCondition::compile(index, condition))
            .collect::<Result<Vec<_>, _>>()
            .map_err(problem)?;
        Ok(Mutator {
            generation: object.metadata().generation,
            id,
            location: parts.location,
            tests: parts.tests,
            applies: parts.applies,
            matcher: parts.matcher,
            conditions,
            action: parts.action,
            whole_kinds: parts.whole_kinds,
            generated_as_created: false,
            spec: Arc::new(object.clone()),
        })
    }

    /// The same mutator, matching what expansion generates as the CREATE a
    /// controller will make of it: sartor's API (`mutations.sartor.dev`), so
    /// that a Pod mutator limited to CREATE shows in `sartor mutate
    /// --expand`. Without it (Gatekeeper's API) a generated object is
    /// admitted by no operation, as in Gatekeeper: only mutators of every
    /// operation match it.
    #[must_use]
    pub fn generated_as_created(self) -> Mutator {
        Mutator {
            generated_as_created: true,
            ..self
        }
    }

    /// Whether its `applyTo` takes an object of `gvk` admitted by
    /// `operation`. `None` (a generated object) is a CREATE for
    /// [`Mutator::generated_as_created`], and otherwise, as in Gatekeeper,
    /// needs one `applyTo` entry that allows every operation.
    pub(crate) fn applies_to(&self, gvk: &Gvk, operation: Option<Operation>) -> bool {
        match operation.or(self.generated_as_created.then_some(Operation::Create)) {
            Some(operation) => self.applies.allows(gvk, operation),
            None => matches!(self.applies, Applies::Everything) || self.whole_kinds.contains(gvk),
        }
    }

    /// Whether an object expansion generates (admitted by no operation) can
    /// meet its `applyTo`: see [`Mutator::applies_to`].
    pub(crate) fn applies_to_generated(&self) -> bool {
        self.generated_as_created
            || matches!(self.applies, Applies::Everything)
            || !self.whole_kinds.is_empty()
    }

    /// Its kind and name.
    pub fn id(&self) -> &MutatorId {
        &self.id
    }

    /// The object it was compiled from.
    pub fn spec(&self) -> &MutatorObject {
        &self.spec
    }

    /// `metadata.generation` of the object it was compiled from, if set.
    pub fn generation(&self) -> Option<i64> {
        self.generation
    }

    /// The parsed location.
    pub fn location(&self) -> &Path {
        &self.location
    }

    /// Its value conditions (sartor only), in the order written; all must hold.
    pub fn conditions(&self) -> &[CompiledCondition] {
        &self.conditions
    }

    /// The kinds and operations it applies to.
    pub fn applies(&self) -> &Applies {
        &self.applies
    }

    /// What its location implies about the last field, or `None` for kinds
    /// that take no part in schema-conflict checks (AssignMetadata, as in
    /// Gatekeeper: its location is fixed to labels and annotations).
    pub fn terminal(&self) -> Option<Terminal> {
        match self.action {
            Action::Assign(_) => Some(Terminal::Any),
            Action::ModifySet(_) => Some(Terminal::Set),
            Action::AssignImage(_) => Some(Terminal::String),
            Action::AssignMetadata(_) => None,
        }
    }

    /// Whether no other mutator may walk below its location: an AssignImage
    /// and an externalData Assign set a string, so nothing can live under it.
    pub fn must_terminate(&self) -> bool {
        matches!(
            self.action,
            Action::AssignImage(_) | Action::Assign(assign::ValueSource::External(_))
        )
    }

    /// The external data provider it asks, if it takes its value from one.
    pub fn provider(&self) -> Option<&str> {
        match &self.action {
            Action::Assign(assign::ValueSource::External(source))
            | Action::AssignMetadata(assign::ValueSource::External(source)) => {
                Some(&source.provider)
            }
            _ => None,
        }
    }

    /// Whether it mutates `object` (of kind `gvk`) in this request: applyTo,
    /// then `match`, then its value conditions on `object` as it is now.
    ///
    /// # Errors
    /// [`MatchError`] when the match criteria cannot be decided.
    pub fn matches(
        &self,
        object: &Value,
        gvk: &Gvk,
        request: &Request<'_>,
    ) -> Result<bool, MatchError> {
        if !self.applies_to(gvk, request.operation) {
            return Ok(false);
        }
        Ok(self.matcher.matches(object, gvk, request)?
            && self.matches_beyond_criteria(object, gvk, request)?)
    }

    /// The rest of [`Mutator::matches`] for a mutator known to apply to the
    /// kind and operation, once its `match` criteria admit `object`: its
    /// value conditions hold, and a Namespace its value comes from is known.
    pub(crate) fn matches_beyond_criteria(
        &self,
        object: &Value,
        gvk: &Gvk,
        request: &Request<'_>,
    ) -> Result<bool, MatchError> {
        if !self.conditions.iter().all(|c| c.holds(object)) {
            return Ok(false);
        }
        // A value from the Namespace is decided here, like a namespaceSelector:
        // without the Namespace the mutation cannot be known.
        // The request's namespace, not `metadata.namespace`: the webhook
        // leaves it empty for cluster-scoped objects, whatever they carry.
        if self.value_from_namespace()
            && request.namespace_object.is_none()
            && !gvk.is_namespace()
            && let Some(namespace) = request.namespace.filter(|ns| !ns.is_empty())
        {
            return Err(MatchError::ValueNamespaceUnknown {
                namespace: namespace.to_string(),
            });
        }
        Ok(true)
    }

    /// Whether its value comes from the object's Namespace (`fromNamespace`).
    fn value_from_namespace(&self) -> bool {
        matches!(
            &self.action,
            Action::Assign(assign::ValueSource::FromNamespace { .. })
                | Action::AssignMetadata(assign::ValueSource::FromNamespace { .. })
        )
    }

    /// Its compiled `match` criteria.
    pub(crate) fn matcher(&self) -> &Matcher {
        &self.matcher
    }

    /// Whether its match criteria or its value may need the object's Namespace.
    pub fn needs_namespace(&self) -> bool {
        self.matcher.needs_namespace() || self.value_from_namespace()
    }

    /// Its pathTests, by depth (a removal carries an implicit MustExist on
    /// its location).
    pub fn tests(&self) -> &PathTests {
        &self.tests
    }

    /// Whether applying it again to an object it has just mutated changes
    /// nothing, as long as nothing it reads changed in between: what it
    /// reads is then its location, its pathTests and its `match`. True for
    /// constants, removals, ModifySets and AssignImages whose parts never
    /// change their own result; false for values read when applied (from
    /// metadata, the Namespace or a provider) and for value conditions,
    /// which read elsewhere.
    pub(crate) fn idempotent(&self) -> bool {
        self.conditions.is_empty()
            && match &self.action {
                Action::Assign(assign::ValueSource::Value(_) | assign::ValueSource::Remove)
                | Action::AssignMetadata(
                    assign::ValueSource::Value(_) | assign::ValueSource::Remove,
                )
                | Action::ModifySet(_) => true,
                Action::AssignImage(setter) => setter.idempotent(),
                Action::Assign(_) | Action::AssignMetadata(_) => false,
            }
    }

    /// Whether it is a ModifySet `merge`, which only ever adds to its list.
    pub(crate) fn merges(&self) -> bool {
        matches!(&self.action, Action::ModifySet(setter) if setter.merges())
    }

    /// What it does at the end of its location, for the static analysis.
    pub(crate) fn effect(&self) -> Effect<'_> {
        match &self.action {
            Action::Assign(assign::ValueSource::Value(value)) => Effect::Replace(Some(value)),
            Action::Assign(
                assign::ValueSource::FromMetadata(_) | assign::ValueSource::External(_),
            ) => Effect::Replace(None),
            Action::Assign(assign::ValueSource::FromNamespace { .. }) => {
                Effect::ReplaceFromNamespace
            }
            Action::Assign(assign::ValueSource::Remove)
            | Action::AssignMetadata(assign::ValueSource::Remove) => Effect::Remove,
            Action::AssignMetadata(assign::ValueSource::Value(value)) => Effect::AddIfAbsent {
                value: Some(value),
                always: true,
            },
            Action::AssignMetadata(
                assign::ValueSource::FromMetadata(_) | assign::ValueSource::External(_),
            ) => Effect::AddIfAbsent {
                value: None,
                always: true,
            },
            Action::AssignMetadata(assign::ValueSource::FromNamespace { .. }) => {
                Effect::AddIfAbsent {
                    value: None,
                    always: false,
                }
            }
            Action::ModifySet(_) => Effect::ModifySet,
            Action::AssignImage(_) => Effect::Image,
        }
    }

    /// Applies it to `object` (matching is the caller's business): whether
    /// its setter ran (Gatekeeper's `Mutate`'s "mutated"; the value may be
    /// what was there). Records no change: [`System::mutate`](crate::System::mutate)
    /// says what changed.
    ///
    /// # Errors
    /// [`WalkError`] when the object does not fit the location.
    pub fn apply(&self, object: &mut Value, request: &Request<'_>) -> Result<bool, WalkError> {
        self.walk(object, request, None)
    }

    /// [`Mutator::apply`], saving in `originals` what each place held before
    /// it first changed, and putting in `changed` each place it changed;
    /// without `pin`, those leave out the elements its globs visited.
    pub(crate) fn apply_saving<'s>(
        &'s self,
        object: &mut Value,
        request: &Request<'_>,
        originals: &mut Originals<'s>,
        pin: bool,
        changed: &mut Vec<Changed>,
    ) -> Result<bool, WalkError> {
        self.walk(object, request, Some((originals, pin, changed)))
    }

    fn walk<'s>(
        &'s self,
        object: &mut Value,
        request: &Request<'_>,
        saving: Option<(&mut Originals<'s>, bool, &mut Vec<Changed>)>,
    ) -> Result<bool, WalkError> {
        let walk = |setter: &dyn walk::Setter, object: &mut Value| match saving {
            Some((originals, pin, changed)) => walk::mutate_saving(
                &self.location,
                &self.tests,
                setter,
                object,
                (originals, pin),
                changed,
            ),
            None => walk::set(&self.location, &self.tests, setter, object),
        };
        match &self.action {
            Action::Assign(assign::ValueSource::Remove)
            | Action::AssignMetadata(assign::ValueSource::Remove) => {
                walk(&assign::RemoveSetter, object)
            }
            // A constant, the common case, straight to the walk: going
            // through `ValueSource::value`'s `Cow` made a small re-application
            // half again as slow (the returned Cow is read back through memory).
            Action::Assign(assign::ValueSource::Value(value))
            | Action::AssignMetadata(assign::ValueSource::Value(value)) => {
                walk(&assign::AssignSetter(value), object)
            }
            Action::Assign(assign::ValueSource::External(source))
            | Action::AssignMetadata(assign::ValueSource::External(source)) => walk(
                &PlaceholderSetter {
                    source,
                    username: request.username,
                },
                object,
            ),
            Action::Assign(source) | Action::AssignMetadata(source) => {
                // No value (a Namespace without the label, and no default):
                // nothing to do.
                let Some(value) = source.value(object, request) else {
                    return Ok(false);
                };
                walk(&assign::AssignSetter(&value), object)
            }
            Action::ModifySet(setter) => walk(setter, object),
            Action::AssignImage(setter) => walk(setter, object),
        }
    }
}

// === impl Applies ===

impl Applies {
    /// Whether an object of kind `gvk` is in scope for `operation`.
    pub fn allows(&self, gvk: &Gvk, operation: Operation) -> bool {
        match self {
            Applies::Everything => true,
            Applies::Kinds(kinds) => kinds.get(gvk).is_some_and(|ops| ops.contains(operation)),
        }
    }

    /// The kinds one entry of `apply_to` alone allows on every operation
    /// (entries that do not compile are left out: [`Applies::compile`]
    /// refuses them).
    fn whole_kinds(apply_to: &[ApplyTo]) -> BTreeSet<Gvk> {
        let mut whole = BTreeSet::new();
        for entry in apply_to {
            if Operations::compile(&entry.operations) != Ok(Operations::ALL) {
                continue;
            }
            for group in &entry.groups {
                for version in &entry.versions {
                    for kind in &entry.kinds {
                        whole.insert(Gvk::new(group, version, kind));
                    }
                }
            }
        }
        whole
    }

    /// Every (kind, operation) pair, in order; empty for [`Applies::Everything`].
    pub fn bindings(&self) -> impl Iterator<Item = (&Gvk, Operation)> {
        let kinds = match self {
            Applies::Everything => None,
            Applies::Kinds(kinds) => Some(kinds),
        };
        kinds.into_iter().flat_map(|kinds| {
            kinds.iter().flat_map(|(gvk, ops)| {
                Operation::ALL
                    .into_iter()
                    .filter(|op| ops.contains(*op))
                    .map(move |op| (gvk, op))
            })
        })
    }

    /// Compiles `applyTo` like Gatekeeper: every entry names groups, versions
    /// and kinds; operations default to CREATE and UPDATE.
    fn compile(apply_to: &[ApplyTo]) -> Result<Applies, Problem> {
        if apply_to.is_empty() {
            return Err(Problem::ApplyToMissing);
        }
        let mut kinds: BTreeMap<Gvk, Operations> = BTreeMap::new();
        for (index, entry) in apply_to.iter().enumerate() {
            if entry.groups.is_empty() || entry.versions.is_empty() || entry.kinds.is_empty() {
                return Err(Problem::ApplyToIncomplete { index });
            }
            for (field, list) in [
                ("groups", &entry.groups),
                ("versions", &entry.versions),
                ("kinds", &entry.kinds),
            ] {
                if list.iter().any(|item| item == "*") {
                    return Err(Problem::ApplyToGlob { index, field });
                }
            }
            let ops = Operations::compile(&entry.operations)
                .map_err(|reason| Problem::Operations { index, reason })?;
            for group in &entry.groups {
                for version in &entry.versions {
                    for kind in &entry.kinds {
                        let slot = kinds.entry(Gvk::new(group, version, kind)).or_default();
                        slot.create |= ops.create;
                        slot.update |= ops.update;
                    }
                }
            }
        }
        Ok(Applies::Kinds(kinds))
    }
}

// === impl Operations ===

impl Operations {
    /// CREATE and UPDATE.
    pub const ALL: Operations = Operations {
        create: true,
        update: true,
    };

    /// UPDATE alone (what a subresource request is).
    pub const UPDATE: Operations = Operations {
        create: false,
        update: true,
    };

    /// The operations in either set.
    pub fn union(self, other: Operations) -> Operations {
        Operations {
            create: self.create || other.create,
            update: self.update || other.update,
        }
    }

    /// Whether `operation` is in the set.
    pub fn contains(self, operation: Operation) -> bool {
        match operation {
            Operation::Create => self.create,
            Operation::Update => self.update,
        }
    }

    fn compile(operations: &[OperationPattern]) -> Result<Operations, &'static str> {
        let mut seen: Vec<OperationPattern> = Vec::with_capacity(operations.len());
        for op in operations {
            if seen.contains(op) {
                return Err("an operation is listed twice");
            }
            seen.push(*op);
        }
        if seen.contains(&OperationPattern::All) && seen.len() > 1 {
            return Err("\"*\" must not be combined with other operations");
        }
        if seen.is_empty() || seen.contains(&OperationPattern::All) {
            return Ok(Operations {
                create: true,
                update: true,
            });
        }
        Ok(Operations {
            create: seen.contains(&OperationPattern::Create),
            update: seen.contains(&OperationPattern::Update),
        })
    }
}

/// What every kind's compile produces.
struct Parts {
    location: Path,
    tests: PathTests,
    applies: Applies,
    /// The kinds one `applyTo` entry alone allows on every operation.
    whole_kinds: BTreeSet<Gvk>,
    matcher: Matcher,
    action: Action,
}

/// The most nodes a location may have. serde_json and serde_yaml refuse
/// documents nested deeper than 128 levels, so no object sartor reads could
/// hold a deeper field, and the walk recurses once per node.
pub const MAX_LOCATION_NODES: usize = 128;

/// Parses `spec.location`.
fn parse_location(location: &str) -> Result<Path, Problem> {
    let path = Path::parse(location).map_err(Problem::Location)?;
    if path.len() > MAX_LOCATION_NODES {
        return Err(Problem::LocationTooDeep { nodes: path.len() });
    }
    Ok(path)
}

/// Parses `pathTests` and checks them against the location.
fn compile_tests(
    location: &Path,
    path_tests: &[sartor_api::PathTest],
) -> Result<PathTests, Problem> {
    let mut tests = Vec::with_capacity(path_tests.len());
    for (index, test) in path_tests.iter().enumerate() {
        let sub_path =
            Path::parse(&test.sub_path).map_err(|source| Problem::SubPath { index, source })?;
        tests.push(sartor_location::PathTest {
            sub_path,
            condition: test.condition,
        });
    }
    PathTests::new(location, &tests).map_err(Problem::PathTests)
}

/// Rejects a location whose first field is `metadata` (quoted or not).
fn reject_metadata_root(location: &Path, kind: MutatorKind) -> Result<(), Problem> {
    match location.nodes().first() {
        Some(Node::Field(name)) if name == "metadata" => Err(Problem::MetadataRoot { kind }),
        _ => Ok(()),
    }
}

/// Rejects a location that sets the key field of a keyed-list element
/// (`containers[name: x].name`): the element would stop being itself.
fn reject_key_change(location: &Path) -> Result<(), Problem> {
    let nodes = location.nodes();
    if let [.., Node::List(list), Node::Field(field)] = nodes
        && *field == list.key_field
    {
        return Err(Problem::KeyFieldChanged {
            location: location.clone(),
            key: field.clone(),
        });
    }
    Ok(())
}

/// Rejects a location ending at a keyed-list element, for kinds that set
/// fields (ModifySet, AssignImage).
fn reject_list_end(location: Path, kind: MutatorKind) -> Result<Path, Problem> {
    match ends_in_list(&location) {
        Some(_) => Err(Problem::EndsInList { kind, location }),
        None => Ok(location),
    }
}

/// The last steps of every kind with `applyTo`, in Gatekeeper's order:
/// pathTests, then applyTo, then (sartor only) the match criteria.
fn finish(
    location: Path,
    path_tests: &[sartor_api::PathTest],
    apply_to: &[ApplyTo],
    criteria: &sartor_api::Match,
    action: Action,
) -> Result<Parts, Problem> {
    let tests = compile_tests(&location, path_tests)?;
    let applies = Applies::compile(apply_to)?;
    let whole_kinds = Applies::whole_kinds(apply_to);
    let matcher = Matcher::compile(criteria).map_err(Problem::Match)?;
    Ok(Parts {
        location,
        tests,
        applies,
        whole_kinds,
        matcher,
        action,
    })
}

/// The keyed-list selector a location ends with, if it does.
fn ends_in_list(location: &Path) -> Option<&sartor_location::ListSelector> {
    match location.nodes().last() {
        Some(Node::List(list)) => Some(list),
        _ => None,
    }
}

#[cfg(test)]
impl Mutator {
    /// An Assign of Pods named `name` at `location`, for tests that need a
    /// mutator to name rather than one to run.
    pub(crate) fn assign_at(name: &str, location: &str) -> Mutator {
        let object = sartor_api::parse_mutator(&serde_json::json!({
            "apiVersion": "mutations.gatekeeper.sh/v1",
            "kind": "Assign",
            "metadata": {"name": name},
            "spec": {
                "applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}],
                "location": location,
                "parameters": {"assign": {"value": {"name": "x"}}},
            },
        }))
        .unwrap_or_else(|error| panic!("{name} at {location}: {error}"));
        Mutator::compile(&object).unwrap_or_else(|error| panic!("{name} at {location}: {error}"))
    }
}
