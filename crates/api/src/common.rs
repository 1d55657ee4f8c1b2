//! Spec parts shared by several mutator kinds: pathTests, value conditions
//! and the value to assign.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use sartor_location::Condition;

/// A condition on part of the location, checked before mutating.
///
/// Lets a mutator set a default only when a field is missing (`MustNotExist`)
/// or avoid creating a parent that is not there (`MustExist`). A glob in
/// `subPath` takes the value it has in the location being mutated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PathTest {
    /// A prefix of `location` (or `location` itself), in location syntax.
    pub sub_path: String,
    /// What must hold at `subPath` for the mutation to happen.
    pub condition: Condition,
}

/// A condition on a value of the object being mutated (sartor only:
/// `mutations.sartor.dev/v1`). The mutator applies only to objects where every
/// condition holds; conditions are checked after `match`, on the object as
/// earlier mutators have left it.
///
/// A condition must not read what another mutator may write (a path where one
/// is a prefix of the other, on kinds and operations both apply to): the
/// mutator could then start and stop applying as the other one changes the
/// object. Such a mutator is reported as conflicting and not enforced until the
/// other one is removed or changed, as with schema conflicts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
// No CEL rule for "In/NotIn need values, Exists/DoesNotExist take none": a
// list of untyped items is not declared to CEL (the API server refuses a rule
// reading `self.values`, even `has()` or `size()`), so the engine checks it.
pub struct ValueCondition {
    /// The field to read, in location syntax, e.g. `spec.type`,
    /// `metadata.labels.team` or `spec.ports[port: 443].protocol`. A keyed
    /// selector reads the first element with that key; globs (`[name: *]`) and
    /// `notin` selectors are not allowed, since a condition reads one value.
    /// A field of something that is not an object, or a selector on something
    /// that is not a list, reads as absent.
    pub path: String,
    /// `In`: the value at `path` equals one of `values`. `NotIn`: nothing is
    /// at `path`, or its value equals none of `values`. `Exists`: something is
    /// at `path` (`null` counts). `DoesNotExist`: nothing is.
    pub operator: ValueOperator,
    /// The values `In` and `NotIn` compare with: any JSON values, equal when
    /// the whole value is equal (numbers by value, so `1` equals `1.0`; the
    /// string `"1"` never equals the number `1`). Empty for `Exists` and
    /// `DoesNotExist`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::any_list")]
    pub values: Vec<serde_json::Value>,
}

/// How a value condition compares the value at its path: `In`, `NotIn`, `Exists` or `DoesNotExist`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ValueOperator {
    /// The value is present and equals one of `values`.
    In,
    /// The value is absent, or equals none of `values`.
    NotIn,
    /// Something is present (a `null` counts).
    Exists,
    /// Nothing is present.
    DoesNotExist,
}

impl ValueOperator {
    /// The operator as written in YAML.
    pub fn as_str(self) -> &'static str {
        match self {
            ValueOperator::In => "In",
            ValueOperator::NotIn => "NotIn",
            ValueOperator::Exists => "Exists",
            ValueOperator::DoesNotExist => "DoesNotExist",
        }
    }

    /// Whether it compares with `values` (`In`, `NotIn`) rather than taking none.
    pub fn takes_values(self) -> bool {
        matches!(self, ValueOperator::In | ValueOperator::NotIn)
    }
}

impl fmt::Display for ValueOperator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where the assigned value comes from: exactly one of `value`,
/// `fromMetadata`, `fromNamespace` (sartor only) and `externalData`; or
/// `remove: true` (sartor only), which removes what is at the location.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
// CEL cannot see `value` (a field without a type is not declared to CEL), so
// the schema only keeps the other sources apart; the engine checks that
// exactly one source is set.
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "[has(self.fromMetadata), has(self.fromNamespace), has(self.externalData), has(self.remove) && self.remove].filter(x, x).size() <= 1",
    "message": "set only one of value, fromMetadata, fromNamespace, externalData and remove",
}]))]
pub struct AssignField {
    /// A constant to assign: any JSON value (string, number, object, list...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::any_value")]
    pub value: Option<serde_json::Value>,
    /// Assign a field of the mutated object's own metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_metadata: Option<FromMetadata>,
    /// Assign a label or annotation of the object's Namespace (sartor only:
    /// `mutations.sartor.dev/v1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_namespace: Option<FromNamespace>,
    /// Remove what is at the location instead of assigning (sartor only:
    /// `mutations.sartor.dev/v1`): a field, or the list elements the last
    /// selector picks. Nothing there is not a change; parents are never created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remove: Option<bool>,
    /// Assign what an external data provider (a Provider of
    /// externaldata.gatekeeper.sh) answers for the value at the location or
    /// for the requesting user's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_data: Option<ExternalData>,
}

/// `assign.fromMetadata`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FromMetadata {
    /// Which metadata field provides the value.
    pub field: MetadataField,
}

/// `assign.fromNamespace` (sartor only): the value of a label or annotation
/// of the Namespace the object is in. A Namespace does not change while one
/// of its objects is admitted, so such a value cannot keep a set from
/// converging (Gatekeeper refuses values from the object's own labels for
/// that reason). Objects not in a namespace (cluster-scoped ones, Namespaces
/// themselves) are left unchanged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.label) != has(self.annotation)",
    "message": "set exactly one of label and annotation",
}]))]
pub struct FromNamespace {
    /// The label of the Namespace whose value is assigned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 317))]
    pub label: Option<String>,
    /// The annotation of the Namespace whose value is assigned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 317))]
    pub annotation: Option<String>,
    /// Assigned when the Namespace has no such label or annotation. Without
    /// it, the object is then left unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

/// The metadata field whose value is assigned: `namespace` (empty for cluster-scoped objects) or `name`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum MetadataField {
    /// The object's namespace (`""` for cluster-scoped objects).
    Namespace,
    /// The object's name.
    Name,
}

/// `assign.externalData`: Gatekeeper's external data provider call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExternalData {
    /// Name of the provider.
    pub provider: String,
    /// What is sent to the provider.
    #[serde(default)]
    pub data_source: DataSource,
    /// What happens when the provider fails.
    #[serde(default)]
    pub failure_policy: FailurePolicy,
    /// Value used when the provider fails and `failurePolicy` is `UseDefault`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

/// What is sent to the external data provider: the value at the location, or the requesting user's name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum DataSource {
    /// The value currently at `location`.
    #[default]
    ValueAtLocation,
    /// The username of the admission request.
    Username,
}

/// What happens when the external data provider fails: assign `default`, leave the object, or fail.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum FailurePolicy {
    /// Assign `default`.
    UseDefault,
    /// Leave the object as it is.
    Ignore,
    /// Fail the mutation.
    #[default]
    Fail,
}
