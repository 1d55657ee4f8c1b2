//! One mutator as one mutation of the policy: its patch, guarded by its
//! own conditions and its `match`, checked against the API server's limits.

use std::collections::BTreeSet;

use sartor_api::{MutatorObject, PathTest, SetOperation, SourcePattern};
use sartor_engine::{ImageParts, MutatorId, Scopes};
use sartor_location::{Condition, Node, Path};

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
    let (criteria, location) = match spec {
        MutatorObject::Assign(assign) => (&assign.spec.r#match, &assign.spec.location),
        MutatorObject::AssignMetadata(meta) => (&meta.spec.r#match, &meta.spec.location),
        MutatorObject::AssignImage(image) => (&image.spec.r#match, &image.spec.location),
        MutatorObject::ModifySet(set) => (&set.spec.r#match, &set.spec.location),
    };
    if criteria.source == Some(SourcePattern::Generated) {
        return Err(Reason::GeneratedOnly);
    }
    let path = Path::parse(location).map_err(|_| Reason::ListInLocation(location.to_string()))?;
    let written = passes::segments(&path);
    let mut removes = false;
    let mut reads = passes::match_reads(criteria);
    reads.extend(passes::selector_reads(&written));
    let (rules, applies, patches) = match spec {
        MutatorObject::Assign(assign) => {
            let source = value::source(&assign.spec.parameters.assign)?;
            let (rules, applies) = guard::apply_to(&assign.spec.apply_to, resources)?;
            let tests = path_tests(&assign.spec.parameters.path_tests, &mut reads)?;
            let applies = std::iter::once(applies).chain(tests).collect::<Vec<_>>();
            let (patches, when) = match source {
                Source::Set { value, when } => {
                    (patch::assign(path.nodes(), &Leaf::Value(value))?, when)
                }
                Source::Remove => {
                    removes = true;
                    (patch::remove(path.nodes())?, None)
                }
            };
            let applies = applies.into_iter().chain(when).collect::<Vec<_>>();
            (rules, applies.join(" && "), patches)
        }
        MutatorObject::AssignImage(image) => {
            let parameters = &image.spec.parameters;
            let parts = ImageParts {
                domain: parameters.assign_domain.clone(),
                path: parameters.assign_path.clone(),
                tag: parameters.assign_tag.clone(),
            };
            if !parts.idempotent() {
                return Err(Reason::ImagePathAlone);
            }
            let (rules, applies) = guard::apply_to(&image.spec.apply_to, resources)?;
            let tests = path_tests(&parameters.path_tests, &mut reads)?;
            // The new image is made of the one there.
            reads.push(passes::Read {
                path: written.clone(),
                existence: false,
            });
            let applies = std::iter::once(applies).chain(tests).collect::<Vec<_>>();
            let patches = patch::assign(path.nodes(), &Leaf::Image(parts))?;
            (rules, applies.join(" && "), patches)
        }
        MutatorObject::ModifySet(set) => {
            let parameters = &set.spec.parameters;
            let (rules, applies) = guard::apply_to(&set.spec.apply_to, resources)?;
            let tests = path_tests(&parameters.path_tests, &mut reads)?;
            // Merge and prune both depend on the list there.
            reads.push(passes::Read {
                path: written.clone(),
                existence: false,
            });
            let values = parameters.values.from_list.clone();
            values.iter().try_for_each(value::json_safe)?;
            let leaf = match parameters.operation {
                SetOperation::Merge => Leaf::Merge(values),
                SetOperation::Prune => Leaf::Prune(values),
            };
            let applies = std::iter::once(applies).chain(tests).collect::<Vec<_>>();
            let patches = patch::assign(path.nodes(), &leaf)?;
            (rules, applies.join(" && "), patches)
        }
        MutatorObject::AssignMetadata(meta) => {
            let Source::Set { value, when } = value::source(&meta.spec.parameters.assign)? else {
                return Err(Reason::NotConstant("remove"));
            };
            let rules = guard::kinds_rules(criteria, resources)?;
            let names = field_names(location)?;
            let applies = when.unwrap_or_else(|| "true".to_string());
            (rules, applies, patch::metadata(&names, &value))
        }
    };
    let expression = guard::guarded(applies, criteria, patches);
    limits::check(&expression).map_err(|excess| match excess {
        limits::Excess::Length(length) => Reason::ExpressionTooLong(length),
        limits::Excess::Nesting(depth) => Reason::ExpressionTooDeep(depth),
    })?;
    let kinds = rules
        .iter()
        .map(|rule| rule.kind.clone().map(|kind| (rule.group.clone(), kind)))
        .collect::<Option<BTreeSet<_>>>();
    Ok(Mutation {
        id: id.clone(),
        rules,
        expression,
        effects: passes::Effects {
            writes: vec![passes::Write {
                path: written,
                removes,
            }],
            reads,
            kinds,
            set: match spec {
                MutatorObject::ModifySet(set) => Some((
                    set.spec.parameters.operation,
                    set.spec.parameters.values.from_list.clone(),
                )),
                _ => None,
            },
        },
    })
}

/// `pathTests` as CEL conditions, each adding what it reads to `reads`.
fn path_tests(tests: &[PathTest], reads: &mut Vec<passes::Read>) -> Result<Vec<String>, Reason> {
    let mut conditions = Vec::new();
    for test in tests {
        let refused = || Reason::GlobPathTest(test.sub_path.clone());
        let sub = Path::parse(&test.sub_path).map_err(|_| refused())?;
        let present = patch::present(sub.nodes()).ok_or_else(refused)?;
        conditions.push(match test.condition {
            Condition::MustExist => format!("({present})"),
            Condition::MustNotExist => format!("!({present})"),
        });
        reads.push(passes::Read {
            path: passes::segments(&sub),
            existence: true,
        });
    }
    Ok(conditions)
}

/// The field names of `location`, or why it is not only fields.
fn field_names(location: &str) -> Result<Vec<String>, Reason> {
    // The loader parsed every location already: an error here is a list.
    let path = Path::parse(location).map_err(|_| Reason::ListInLocation(location.to_string()))?;
    path.nodes()
        .iter()
        .map(|node| match node {
            Node::Field(name) => Ok(name.clone()),
            Node::List(_) => Err(Reason::ListInLocation(location.to_string())),
        })
        .collect()
}
