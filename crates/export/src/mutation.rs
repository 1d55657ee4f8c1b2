//! One mutator as one mutation of the policy. Each kind gives its parts
//! (the resources it needs, its own conditions, its patch, what it reads
//! and writes) after one look at its kind; they are then guarded by its
//! `match` and checked against the API server's limits.
//!
//! ```text
//!  spec ──kind──▶ Parts { rules, applies, patches, reads, removes, set }
//!       ──▶ guard::guarded (applies && match) ──▶ limits::check ──▶ Mutation
//! ```

use std::collections::BTreeSet;

use sartor_api::{
    AssignImageSpec, AssignMetadataSpec, AssignSpec, Match, ModifySetSpec, MutatorObject, PathTest,
    SetOperation, SourcePattern,
};
use sartor_engine::{ImageParts, MutatorId, Scopes};
use sartor_location::{Condition, Node, Path, PathTestError, PathTests};
use serde_json::Value;

use crate::guard::{self, Rule};
use crate::patch::{self, Leaf};
use crate::value::{self, Source};
use crate::{Reason, limits, passes};

/// One mutator written as a mutation of the policy.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Mutation {
    pub(crate) id: MutatorId,
    /// The resources (group, version, plural) and operations it needs.
    pub(crate) rules: BTreeSet<Rule>,
    /// The JSONPatch expression: the patch when the guard holds, else none.
    pub(crate) expression: String,
    /// What it reads and writes, for the pass analysis.
    pub(crate) effects: passes::Effects,
}

/// One mutator as a mutation, or why it cannot be one.
pub(crate) fn translate(
    id: &MutatorId,
    spec: &MutatorObject,
    resources: &Scopes,
) -> Result<Mutation, Reason> {
    if !spec.conditions().is_empty() {
        return Err(Reason::Conditions);
    }
    let parts = match spec {
        MutatorObject::Assign(assign) => Parts::assign(&assign.spec, resources),
        MutatorObject::AssignImage(image) => Parts::assign_image(&image.spec, resources),
        MutatorObject::ModifySet(set) => Parts::modify_set(&set.spec, resources),
        MutatorObject::AssignMetadata(meta) => Parts::assign_metadata(&meta.spec, resources),
    }?;
    let Target {
        criteria, written, ..
    } = parts.target;
    let mut reads = passes::match_reads(criteria);
    reads.extend(passes::selector_reads(&written));
    reads.extend(parts.reads);
    let expression = guard::guarded(parts.applies, criteria, parts.patches);
    limits::check(&expression)?;
    let kinds = parts
        .rules
        .iter()
        .map(|rule| rule.kind.clone().map(|kind| (rule.group.clone(), kind)))
        .collect::<Option<BTreeSet<_>>>();
    Ok(Mutation {
        id: id.clone(),
        rules: parts.rules,
        expression,
        effects: passes::Effects {
            writes: vec![passes::Write {
                path: written,
                removes: parts.removes,
            }],
            reads,
            kinds,
            set: parts.set,
        },
    })
}

/// What every kind has: its `match` and the location it writes.
struct Target<'a> {
    criteria: &'a Match,
    path: Path,
    written: Vec<passes::Segment>,
}

impl<'a> Target<'a> {
    /// Checked first, for every kind: refused when it matches only
    /// generated objects, or its location is not one the export reads.
    fn new(criteria: &'a Match, location: &str) -> Result<Target<'a>, Reason> {
        if criteria.source == Some(SourcePattern::Generated) {
            return Err(Reason::GeneratedOnly);
        }
        let path =
            Path::parse(location).map_err(|_| Reason::ListInLocation(location.to_string()))?;
        let written = passes::segments(&path);
        Ok(Target {
            criteria,
            path,
            written,
        })
    }

    /// What the value there reads: an image made of the one there, a set
    /// merged into or pruned from the list there.
    fn value_read(&self) -> passes::Read {
        passes::Read {
            path: self.written.clone(),
            existence: false,
        }
    }
}

/// What a mutator's kind gives its mutation.
struct Parts<'a> {
    target: Target<'a>,
    /// Whether it removes what is at its location.
    removes: bool,
    /// The resources it needs.
    rules: BTreeSet<Rule>,
    /// Its own conditions (applyTo, pathTests, a value it needs) joined by
    /// `&&`; `"true"` for none.
    applies: String,
    /// Its patch, a CEL list.
    patches: String,
    /// What its own conditions and its value read, beside `match` and the
    /// location's list selectors.
    reads: Vec<passes::Read>,
    /// A ModifySet's operation and values.
    set: Option<(SetOperation, Vec<Value>)>,
}

impl<'a> Parts<'a> {
    /// An Assign: its value set (or removed) at its location, under its
    /// applyTo and pathTests.
    fn assign(spec: &'a AssignSpec, resources: &Scopes) -> Result<Parts<'a>, Reason> {
        let target = Target::new(&spec.r#match, &spec.location)?;
        let source = value::source(&spec.parameters.assign)?;
        let (rules, applies) = guard::apply_to(&spec.apply_to, resources)?;
        let tests = path_tests(&spec.parameters.path_tests, &target.path)?;
        let (patches, when, removes) = match source {
            Source::Set { value, when } => (
                patch::assign(target.path.nodes(), &Leaf::Value(value), &tests.per_element)?,
                when,
                false,
            ),
            // A removal's tests can only be MustExist (the engine refuses
            // a MustNotExist), which removing what is there implies.
            Source::Remove => (patch::remove(target.path.nodes())?, None, true),
        };
        let mut reads = tests.reads;
        if removes {
            // It removes only what is there: another's creating it makes
            // it apply again.
            reads.push(passes::Read {
                path: target.written.clone(),
                existence: true,
            });
        }
        Ok(Parts {
            target,
            removes,
            rules,
            applies: all(std::iter::once(applies).chain(tests.conditions).chain(when)),
            patches,
            reads,
            set: None,
        })
    }

    /// An AssignImage: the image there with its parts put in.
    fn assign_image(spec: &'a AssignImageSpec, resources: &Scopes) -> Result<Parts<'a>, Reason> {
        let target = Target::new(&spec.r#match, &spec.location)?;
        let parameters = &spec.parameters;
        let parts = ImageParts {
            domain: parameters.assign_domain.clone(),
            path: parameters.assign_path.clone(),
            tag: parameters.assign_tag.clone(),
        };
        if !parts.idempotent() {
            return Err(Reason::ImagePathAlone);
        }
        let (rules, applies) = guard::apply_to(&spec.apply_to, resources)?;
        let mut tests = path_tests(&parameters.path_tests, &target.path)?;
        tests.reads.push(target.value_read());
        let patches = patch::assign(target.path.nodes(), &Leaf::Image(parts), &tests.per_element)?;
        Ok(Parts {
            target,
            removes: false,
            rules,
            applies: all(std::iter::once(applies).chain(tests.conditions)),
            patches,
            reads: tests.reads,
            set: None,
        })
    }

    /// A ModifySet: its values merged into or pruned from the list there.
    fn modify_set(spec: &'a ModifySetSpec, resources: &Scopes) -> Result<Parts<'a>, Reason> {
        let target = Target::new(&spec.r#match, &spec.location)?;
        let parameters = &spec.parameters;
        let (rules, applies) = guard::apply_to(&spec.apply_to, resources)?;
        let mut tests = path_tests(&parameters.path_tests, &target.path)?;
        tests.reads.push(target.value_read());
        let values = parameters.values.from_list.clone();
        values.iter().try_for_each(value::json_safe)?;
        let leaf = match parameters.operation {
            SetOperation::Merge => Leaf::Merge(values.clone()),
            SetOperation::Prune => Leaf::Prune(values.clone()),
        };
        let patches = patch::assign(target.path.nodes(), &leaf, &tests.per_element)?;
        Ok(Parts {
            target,
            removes: false,
            rules,
            applies: all(std::iter::once(applies).chain(tests.conditions)),
            patches,
            reads: tests.reads,
            set: Some((parameters.operation, values)),
        })
    }

    /// An AssignMetadata: a label or annotation added when missing, on
    /// every kind `match.kinds` allows.
    fn assign_metadata(
        spec: &'a AssignMetadataSpec,
        resources: &Scopes,
    ) -> Result<Parts<'a>, Reason> {
        let target = Target::new(&spec.r#match, &spec.location)?;
        let Source::Set { value, when } = value::source(&spec.parameters.assign)? else {
            return Err(Reason::NotConstant("remove"));
        };
        let rules = guard::kinds_rules(&spec.r#match, resources)?;
        let names = field_names(&target.path, &spec.location)?;
        Ok(Parts {
            target,
            removes: false,
            rules,
            applies: when.unwrap_or_else(|| "true".to_string()),
            patches: patch::metadata(&names, &value),
            reads: Vec::new(),
            set: None,
        })
    }
}

/// Conditions that must all hold, as one CEL expression.
fn all(conditions: impl Iterator<Item = String>) -> String {
    conditions.collect::<Vec<_>>().join(" && ")
}

/// A mutator's `pathTests`, split by where the export checks them.
struct Tests {
    /// The tests on places the location names once (fields and keyed
    /// elements above any glob), each one CEL condition on the object.
    conditions: Vec<String>,
    /// The tests on elements a glob or `notin` selects, checked by the
    /// patch at their own node, per element.
    per_element: PathTests,
    /// What they all read, for the pass analysis.
    reads: Vec<passes::Read>,
}

/// `tests`, prefixes of `location`, split into conditions on the object
/// and tests per element.
fn path_tests(tests: &[PathTest], location: &Path) -> Result<Tests, Reason> {
    let mut conditions = Vec::new();
    let mut per_element = Vec::new();
    let mut reads = Vec::new();
    for test in tests {
        let refused = || Reason::GlobPathTest(test.sub_path.clone());
        let sub = Path::parse(&test.sub_path).map_err(|_| refused())?;
        reads.push(passes::Read {
            path: passes::segments(&sub),
            existence: true,
        });
        match patch::present(sub.nodes()) {
            Some(present) => conditions.push(match test.condition {
                Condition::MustExist => format!("({present})"),
                Condition::MustNotExist => format!("!({present})"),
            }),
            None => per_element.push(sartor_location::PathTest {
                sub_path: sub,
                condition: test.condition,
            }),
        }
    }
    // The engine checked the tests against the location when it compiled
    // the mutator.
    let per_element = PathTests::new(location, &per_element).map_err(|error| {
        Reason::GlobPathTest(match error {
            PathTestError::NotAPrefix { sub_path, .. }
            | PathTestError::Contradiction { sub_path } => sub_path.to_string(),
            PathTestError::ChildOfMissing { child, .. } => child.to_string(),
        })
    })?;
    Ok(Tests {
        conditions,
        per_element,
        reads,
    })
}

/// The field names of `path` (the parsed `location`), or why it is not only
/// fields.
fn field_names(path: &Path, location: &str) -> Result<Vec<String>, Reason> {
    path.nodes()
        .iter()
        .map(|node| match node {
            Node::Field(name) => Ok(name.clone()),
            Node::List(_) => Err(Reason::ListInLocation(location.to_string())),
        })
        .collect()
}
