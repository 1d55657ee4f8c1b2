//! One page of a list as the audit reads it: each object parsed straight
//! into JSON without its `metadata.managedFields`, which the audit never
//! reads and which, for an object written by kubectl or a controller, is as
//! large as the object's own fields (building and dropping it was a third
//! of a 10,000-Pod scan's parsing).

use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::{Map, Value};

/// A list's page: its objects and the next page's token.
#[derive(Debug, Default, Deserialize)]
pub(super) struct ListPage {
    #[serde(default)]
    metadata: ListMetadata,
    /// `null` from some servers for an empty list.
    #[serde(default)]
    items: Option<Vec<Listed>>,
}

#[derive(Debug, Default, Deserialize)]
struct ListMetadata {
    #[serde(default, rename = "continue")]
    next: Option<String>,
}

/// One object of a page, without its managed fields.
#[derive(Debug)]
struct Listed(Value);

impl ListPage {
    /// The objects, each with `api_version` and `kind` (a list's items
    /// carry neither), and the next page's token (`None`: the last page).
    pub(super) fn into_objects(
        self,
        api_version: &str,
        kind: &str,
    ) -> (Vec<Value>, Option<String>) {
        let objects = self
            .items
            .unwrap_or_default()
            .into_iter()
            .map(|Listed(mut object)| {
                if let Some(fields) = object.as_object_mut() {
                    fields.insert("apiVersion".into(), Value::from(api_version));
                    fields.insert("kind".into(), Value::from(kind));
                }
                object
            })
            .collect();
        let next = self.metadata.next.filter(|token| !token.is_empty());
        (objects, next)
    }
}

impl<'de> Deserialize<'de> for Listed {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Listed, D::Error> {
        deserializer
            .deserialize_map(Fields { at_metadata: false })
            .map(Listed)
    }
}

/// An object's fields (`at_metadata`: its metadata's, whose
/// `managedFields` are skipped).
struct Fields {
    at_metadata: bool,
}

/// An object's `metadata`, parsed by [`Fields`].
struct Metadata(Value);

impl<'de> Deserialize<'de> for Metadata {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Metadata, D::Error> {
        deserializer
            .deserialize_map(Fields { at_metadata: true })
            .map(Metadata)
    }
}

impl<'de> Visitor<'de> for Fields {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut fields = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = match (self.at_metadata, key.as_str()) {
                (true, "managedFields") => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
                (false, "metadata") => map.next_value::<Metadata>()?.0,
                _ => map.next_value::<Value>()?,
            };
            fields.insert(key, value);
        }
        Ok(Value::Object(fields))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn objects_come_without_managed_fields_and_with_their_kind() {
        let page: ListPage = serde_json::from_value(json!({
            "kind": "PodList", "apiVersion": "v1",
            "metadata": {"resourceVersion": "7", "continue": "abc"},
            "items": [
                {"metadata": {"name": "web", "namespace": "shop",
                              "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
                              "labels": {"app": "web"}},
                 "spec": {"managedFields": "kept: only metadata's are left out"}},
                {"metadata": {"name": "api"}}
            ]
        }))
        .unwrap();
        let (objects, next) = page.into_objects("v1", "Pod");
        assert_eq!(
            objects,
            [
                json!({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
                       "spec": {"managedFields": "kept: only metadata's are left out"}}),
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "api"}}),
            ]
        );
        assert_eq!(next.as_deref(), Some("abc"));
    }

    #[test]
    fn the_last_page_has_no_token_and_an_empty_list_no_items() {
        let last: ListPage =
            serde_json::from_str(r#"{"metadata": {"continue": ""}, "items": []}"#).unwrap();
        assert_eq!(last.into_objects("v1", "Pod"), (Vec::new(), None));
        let none: ListPage = serde_json::from_str(r#"{"metadata": {}, "items": null}"#).unwrap();
        assert_eq!(none.into_objects("v1", "Pod"), (Vec::new(), None));
    }
}
