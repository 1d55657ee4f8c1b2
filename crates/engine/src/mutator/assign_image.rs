//! AssignImage: replace the domain, path and/or tag of an image reference.

use sartor_api::{AssignImageSpec, MutatorKind};
use serde_json::{Map, Value};

use super::{
    Action, Parts, Problem, finish, parse_location, reject_key_change, reject_list_end,
    reject_metadata_root,
};
use crate::image::ImageParts;
use crate::walk::{SetError, Setter};

/// Rewrites the image reference at the location.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ImageSetter(ImageParts);

pub(super) fn compile(spec: &AssignImageSpec) -> Result<Parts, Problem> {
    let location = parse_location(&spec.location)?;
    reject_metadata_root(&location, MutatorKind::AssignImage)?;
    let location = reject_list_end(location, MutatorKind::AssignImage)?;
    reject_key_change(&location)?;
    let parts = ImageParts {
        domain: spec.parameters.assign_domain.clone(),
        path: spec.parameters.assign_path.clone(),
        tag: spec.parameters.assign_tag.clone(),
    };
    parts.validate().map_err(Problem::Image)?;
    finish(
        location,
        &spec.parameters.path_tests,
        &spec.apply_to,
        &spec.r#match,
        Action::AssignImage(ImageSetter(parts)),
    )
}

impl ImageSetter {
    /// See [`ImageParts::idempotent`].
    pub(crate) fn idempotent(&self) -> bool {
        self.0.idempotent()
    }
}

impl Setter for ImageSetter {
    /// A missing field is set to the assigned parts alone.
    fn set_value(&self, object: &mut Map<String, Value>, key: &str) -> Result<bool, SetError> {
        match object.get_mut(key) {
            None => {
                object.insert(key.to_string(), Value::String(self.0.apply("")));
                Ok(true)
            }
            Some(Value::String(current)) => Ok(self.0.apply_in_place(current)),
            Some(other) => Err(SetError::Unexpected {
                expected: "a string",
                found: crate::external::type_of(other),
            }),
        }
    }
}
