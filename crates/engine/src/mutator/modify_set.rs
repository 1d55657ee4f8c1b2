//! ModifySet: add values to, or remove values from, a list treated as a set.

use sartor_api::{ModifySetSpec, MutatorKind, SetOperation};
use serde_json::{Map, Value};

use super::{
    Action, Parts, Problem, finish, parse_location, reject_list_end, reject_metadata_root,
};
use crate::condition::json_equal;
use crate::walk::{SetError, Setter};

/// Merges values into, or prunes them from, the list at the location.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SetSetter {
    operation: SetOperation,
    values: Vec<Value>,
}

pub(super) fn compile(spec: &ModifySetSpec) -> Result<Parts, Problem> {
    let location = parse_location(&spec.location)?;
    reject_metadata_root(&location, MutatorKind::ModifySet)?;
    let location = reject_list_end(location, MutatorKind::ModifySet)?;
    let action = Action::ModifySet(SetSetter {
        operation: spec.parameters.operation,
        values: spec.parameters.values.from_list.clone(),
    });
    finish(
        location,
        &spec.parameters.path_tests,
        &spec.apply_to,
        &spec.r#match,
        action,
    )
}

impl SetSetter {
    /// Whether it merges (adds values) rather than prunes.
    pub(crate) fn merges(&self) -> bool {
        self.operation == SetOperation::Merge
    }
}

impl Setter for SetSetter {
    /// Merge appends each value the list lacks (whole-value equality, numbers
    /// by value: `1` is `1.0`, as Gatekeeper's float64 values make them) and
    /// creates a missing list from `fromList` as it is; prune removes every
    /// element equal to a value and leaves a missing list missing. Existing
    /// duplicates are left alone by merge.
    fn set_value(&self, object: &mut Map<String, Value>, key: &str) -> Result<bool, SetError> {
        let list = match object.get_mut(key) {
            None => {
                if self.operation == SetOperation::Merge {
                    object.insert(key.to_string(), Value::Array(self.values.clone()));
                    return Ok(true);
                }
                return Ok(false);
            }
            Some(Value::Array(list)) => list,
            Some(other) => {
                return Err(SetError::Unexpected {
                    expected: "a list",
                    found: crate::external::type_of(other),
                });
            }
        };
        let before = list.len();
        match self.operation {
            SetOperation::Merge => {
                for value in &self.values {
                    if !list.iter().any(|element| json_equal(element, value)) {
                        list.push(value.clone());
                    }
                }
            }
            SetOperation::Prune => {
                list.retain(|element| !self.values.iter().any(|value| json_equal(element, value)))
            }
        }
        Ok(list.len() != before)
    }
}
