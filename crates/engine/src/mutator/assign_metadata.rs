//! AssignMetadata: add a label or annotation when the object does not have
//! it, or remove one it has (`remove`, sartor only).

use sartor_api::{AssignMetadataSpec, json_type};
use sartor_location::{Condition, Node, Path, PathTest, PathTests};

use super::assign::ValueSource;
use super::{Action, Applies, Parts, Problem};
use crate::matching::Matcher;

/// The CRD's `maxLength` for the location, enforced here for files that
/// never meet an API server.
const MAX_LOCATION: usize = 512;

pub(super) fn compile(spec: &AssignMetadataSpec) -> Result<Parts, Problem> {
    let len = spec.location.len();
    if len > MAX_LOCATION {
        return Err(Problem::LocationTooLong { len });
    }
    let location = Path::parse(&spec.location).map_err(Problem::Location)?;
    if !is_label_or_annotation(&location) {
        return Err(Problem::NotLabelOrAnnotation {
            location: spec.location.clone(),
        });
    }
    let source = ValueSource::compile(&spec.parameters.assign)?;
    if let ValueSource::External(external) = &source
        && external.data_source != sartor_api::DataSource::Username
    {
        return Err(Problem::MetadataExternalSource);
    }
    if let ValueSource::Value(value) = &source
        && !value.is_string()
    {
        return Err(Problem::MetadataValueNotString {
            found: json_type(value),
        });
    }
    // The key's presence decides: never overwrite, even an empty value; a
    // removal needs it there.
    let condition = if source == ValueSource::Remove {
        Condition::MustExist
    } else {
        Condition::MustNotExist
    };
    let tests = PathTests::new(
        &location,
        &[PathTest {
            sub_path: location.clone(),
            condition,
        }],
    )
    .map_err(Problem::PathTests)?;
    let matcher = Matcher::compile(&spec.r#match).map_err(Problem::Match)?;
    Ok(Parts {
        location,
        tests,
        applies: Applies::Everything,
        whole_kinds: std::collections::BTreeSet::new(),
        matcher,
        action: Action::AssignMetadata(source),
    })
}

/// `metadata.labels.<key>` or `metadata.annotations.<key>`, nothing else.
fn is_label_or_annotation(location: &Path) -> bool {
    matches!(
        location.nodes(),
        [Node::Field(root), Node::Field(map), Node::Field(_)]
            if root == "metadata" && (map == "labels" || map == "annotations")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_labels_and_annotations_qualify() {
        for (location, want) in [
            ("metadata.labels.team", true),
            (r#"metadata.annotations."example.com/owner""#, true),
            ("metadata.labels", false),
            ("metadata.name", false),
            ("metadata.labels.a.b", false),
            ("spec.labels.a", false),
            ("metadata.labels[name: a]", false),
        ] {
            let path = Path::parse(location).unwrap();
            assert_eq!(is_label_or_annotation(&path), want, "{location}");
        }
    }
}
