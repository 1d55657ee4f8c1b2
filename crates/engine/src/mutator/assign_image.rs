//! AssignImage: replace the domain, path and/or tag of an image reference.

use sartor_api::{AssignImageSpec, MutatorKind, json_type};
use serde_json::{Map, Value};

use super::{
    Action, Applies, Parts, Problem, compile_tests, ends_in_list, parse_location,
    reject_key_change, reject_metadata_root,
};
use crate::image::ImageParts;
use crate::matching::Matcher;
use crate::walk::{SetError, Setter};

/// Rewrites the image reference at the location.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ImageSetter(ImageParts);

pub(super) fn compile(spec: &AssignImageSpec) -> Result<Parts, Problem> {
    let location = parse_location(&spec.location)?;
    reject_metadata_root(&location, MutatorKind::AssignImage)?;
    if ends_in_list(&location).is_some() {
        return Err(Problem::EndsInList {
            kind: MutatorKind::AssignImage,
            location,
        });
    }
    reject_key_change(&location)?;
    let parts = ImageParts {
        domain: spec.parameters.assign_domain.clone(),
        path: spec.parameters.assign_path.clone(),
        tag: spec.parameters.assign_tag.clone(),
    };
    parts.validate().map_err(Problem::Image)?;
    let tests = compile_tests(&location, &spec.parameters.path_tests)?;
    let applies = Applies::compile(&spec.apply_to)?;
    let matcher = Matcher::compile(&spec.r#match).map_err(Problem::Match)?;
    Ok(Parts {
        location,
        tests,
        applies,
        matcher,
        action: Action::AssignImage(ImageSetter(parts)),
    })
}

impl Setter for ImageSetter {
    /// A missing field is set to the assigned parts alone.
    fn set_value(&self, object: &mut Map<String, Value>, key: &str) -> Result<bool, SetError> {
        match object.get_mut(key) {
            None => {
                object.insert(key.to_string(), Value::String(self.0.apply("")));
                Ok(true)
            }
            Some(Value::String(current)) => {
                let image = self.0.apply(current);
                if image == *current {
                    return Ok(false);
                }
                *current = image;
                Ok(true)
            }
            Some(other) => Err(SetError::Unexpected {
                expected: "a string",
                found: json_type(other),
            }),
        }
    }
}
