//! Gatekeeper's external data API (`externaldata.gatekeeper.sh`), read
//! unchanged: the cluster-scoped `Provider` that names an HTTPS service, and
//! the `ProviderRequest` / `ProviderResponse` it is called with.
//!
//! A Provider is checked the way Gatekeeper checks one when it is added
//! (its provider cache's upsert, run by its validating webhook and its
//! controller), with Gatekeeper's messages.

use base64::Engine as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::parse::{Header, Invalid, ParseError, deserialize};

/// Gatekeeper's external data API group.
pub const EXTERNAL_DATA_GROUP: &str = "externaldata.gatekeeper.sh";

/// The versions of [`EXTERNAL_DATA_GROUP`] that serve `Provider`
/// (`v1alpha1` is deprecated in Gatekeeper; the spec is the same).
pub const PROVIDER_VERSIONS: [&str; 2] = ["v1beta1", "v1alpha1"];

/// The `apiVersion` of the requests sent to providers.
pub const PROVIDER_REQUEST_API_VERSION: &str = "externaldata.gatekeeper.sh/v1beta1";

/// A `Provider`: where an external data service is and how to reach it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Provider {
    /// Its metadata; `name` is what mutators' `externalData.provider` refers to.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The service.
    #[serde(default)]
    pub spec: ProviderSpec,
}

/// `Provider.spec`, Gatekeeper's fields.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderSpec {
    /// The `https://` URL requests are POSTed to, exactly as written.
    #[serde(default)]
    pub url: String,
    /// The longest a call may take, in seconds.
    #[serde(default)]
    pub timeout: i64,
    /// Base64 of the PEM CA certificates the provider's serving certificate
    /// must chain to (nothing else is trusted).
    #[serde(default, rename = "caBundle")]
    pub ca_bundle: String,
}

/// What is sent to a provider: the keys to look up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderRequest {
    /// Always [`PROVIDER_REQUEST_API_VERSION`].
    pub api_version: String,
    /// Always `ProviderRequest`.
    pub kind: String,
    /// The keys.
    pub request: ProviderRequestBody,
}

/// `ProviderRequest.request`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderRequestBody {
    /// The keys to look up, each once.
    pub keys: Vec<String>,
}

/// What a provider answers. Its `apiVersion` and `kind` are not checked
/// (Gatekeeper does not either).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderResponse {
    /// The provider's `apiVersion`, as it wrote it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// The provider's `kind`, as it wrote it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// The answer.
    #[serde(default)]
    pub response: ProviderResponseBody,
}

/// `ProviderResponse.response`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderResponseBody {
    /// Whether asking again with an answer gives the same answer; mutation
    /// requires it.
    #[serde(default)]
    pub idempotent: bool,
    /// One item per key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<ProviderItem>,
    /// An error for the whole request; fails every key.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub system_error: String,
}

/// The answer for one key.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProviderItem {
    /// The key asked.
    #[serde(default)]
    pub key: String,
    /// The value (mutation takes strings only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// Why there is no value for this key.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
}

// === impl ProviderRequest ===

impl ProviderRequest {
    /// The request for `keys`.
    pub fn new(keys: Vec<String>) -> ProviderRequest {
        ProviderRequest {
            api_version: PROVIDER_REQUEST_API_VERSION.to_string(),
            kind: "ProviderRequest".to_string(),
            request: ProviderRequestBody { keys },
        }
    }
}

// === impl ProviderResponseBody ===

impl ProviderResponseBody {
    /// Why mutation refuses this answer as a whole, in Gatekeeper's words: a
    /// `systemError` that is not blank, or an answer not declared idempotent.
    pub fn refusal(&self) -> Option<String> {
        if !self.system_error.trim().is_empty() {
            Some(format!("non-empty system error: {}", self.system_error))
        } else if !self.idempotent {
            Some("non-idempotent response".to_string())
        } else {
            None
        }
    }
}

// === impl Provider ===

impl Provider {
    /// `metadata.name`, or `""`.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// The PEM CA certificates of `caBundle`, decoded.
    ///
    /// # Errors
    /// The message Gatekeeper gives for a caBundle that is not base64.
    pub fn ca_pem(&self) -> Result<Vec<u8>, String> {
        base64::engine::general_purpose::STANDARD
            .decode(self.spec.ca_bundle.trim())
            .map_err(|error| format!("failed to base64 decode caBundle: {error}"))
    }
}

/// Whether a document is meant as a Provider: its `apiVersion` is in
/// Gatekeeper's external data group.
pub fn is_provider_document(value: &Value) -> bool {
    crate::api_group(value) == Some(EXTERNAL_DATA_GROUP)
}

/// Interprets one object as Gatekeeper's `Provider`, checking what
/// Gatekeeper checks when one is added, in its order and with its
/// messages: a name, a url, a timeout not below 0, an `https` url, a
/// caBundle that is base64 of a PEM certificate.
///
/// # Errors
/// A [`ParseError`] naming the provider and the field at fault.
pub fn parse_provider(value: &Value) -> Result<Provider, ParseError> {
    let header = Header::read(value, "Provider");
    let invalid = |path: &str, message: String| header.invalid(path, message);
    if header.kind != "Provider"
        || header.group != EXTERNAL_DATA_GROUP
        || !PROVIDER_VERSIONS.contains(&header.version)
    {
        return Err(header.fail(Invalid::NotAProvider {
            api_version: header.api_version.to_string(),
            kind: header.kind.to_string(),
        }));
    }
    let provider: Provider =
        deserialize(&header.body(value)).map_err(|problem| header.fail(problem))?;
    let spec = &provider.spec;
    if provider.name().is_empty() {
        return Err(invalid(
            "metadata.name",
            "provider name can not be empty".to_string(),
        ));
    }
    if let Some(problem) = crate::parse::invalid_name(provider.name())
        .or_else(|| crate::parse::invalid_metadata(value))
    {
        return Err(header.fail(problem));
    }
    if spec.url.is_empty() {
        return Err(invalid("spec.url", "invalid provider url".to_string()));
    }
    if spec.timeout < 0 {
        return Err(invalid(
            "spec.timeout",
            format!(
                "provider timeout should be a positive integer. value: {}",
                spec.timeout
            ),
        ));
    }
    let scheme = spec.url.split_once("://").map(|(scheme, _)| scheme);
    if scheme.is_none_or(|s| !s.eq_ignore_ascii_case("https")) {
        return Err(invalid(
            "spec.url",
            "only HTTPS scheme is supported for Providers".to_string(),
        ));
    }
    if spec.ca_bundle.is_empty() {
        return Err(invalid(
            "spec.caBundle",
            "caBundle should be set for HTTPS scheme".to_string(),
        ));
    }
    let pem = provider
        .ca_pem()
        .map_err(|message| invalid("spec.caBundle", message))?;
    // The certificates themselves are parsed when the client is built.
    let pem = String::from_utf8_lossy(&pem);
    if !pem.contains("-----BEGIN CERTIFICATE-----") {
        return Err(invalid("spec.caBundle", "bad caBundle".to_string()));
    }
    Ok(provider)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    /// base64 of a PEM certificate block (its content is checked when the
    /// client is built, not here).
    fn ca_bundle() -> String {
        base64::engine::general_purpose::STANDARD
            .encode("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    }

    fn provider(spec: Value) -> Value {
        json!({
            "apiVersion": "externaldata.gatekeeper.sh/v1beta1",
            "kind": "Provider",
            "metadata": {"name": "tags"},
            "spec": spec,
        })
    }

    fn error(value: &Value) -> String {
        parse_provider(value).unwrap_err().to_string()
    }

    #[test]
    fn gatekeeper_providers_are_read_unchanged_in_both_versions() {
        for version in PROVIDER_VERSIONS {
            let mut value = provider(json!({
                "url": "https://tags.providers:8090/validate",
                "timeout": 2,
                "caBundle": ca_bundle(),
            }));
            value["apiVersion"] = json!(format!("{EXTERNAL_DATA_GROUP}/{version}"));
            value["status"] = json!({"byPod": []});
            let parsed = parse_provider(&value).unwrap();
            assert_eq!(parsed.name(), "tags");
            assert_eq!(
                parsed.spec,
                ProviderSpec {
                    url: "https://tags.providers:8090/validate".to_string(),
                    timeout: 2,
                    ca_bundle: ca_bundle(),
                }
            );
        }
    }

    #[test]
    fn providers_are_checked_in_gatekeepers_order_with_its_messages() {
        let cases = [
            (
                json!({"caBundle": ca_bundle()}),
                "Provider tags: spec.url: invalid provider url",
            ),
            (
                json!({"url": "https://x", "timeout": -1, "caBundle": ca_bundle()}),
                "Provider tags: spec.timeout: provider timeout should be a positive integer. value: -1",
            ),
            (
                json!({"url": "http://x", "caBundle": ca_bundle()}),
                "Provider tags: spec.url: only HTTPS scheme is supported for Providers",
            ),
            (
                json!({"url": "https://x"}),
                "Provider tags: spec.caBundle: caBundle should be set for HTTPS scheme",
            ),
            (
                json!({"url": "https://x", "caBundle": "%%%"}),
                "Provider tags: spec.caBundle: failed to base64 decode caBundle: Invalid symbol 37, offset 0.",
            ),
            (
                json!({"url": "https://x", "caBundle": "aGVsbG8="}),
                "Provider tags: spec.caBundle: bad caBundle",
            ),
            (
                json!({"url": "https://x", "caBundle": ca_bundle(), "insecure": true}),
                "Provider tags: spec.insecure: unknown field `insecure`, expected one of `url`, `timeout`, `caBundle`",
            ),
        ];
        for (spec, expected) in cases {
            assert_eq!(error(&provider(spec.clone())), expected, "{spec}");
        }
        let mut unnamed = provider(json!({"url": "https://x", "caBundle": ca_bundle()}));
        unnamed["metadata"] = json!({});
        assert_eq!(
            error(&unnamed),
            "Provider: metadata.name: provider name can not be empty"
        );
        let mut wrong = unnamed.clone();
        wrong["apiVersion"] = json!("externaldata.gatekeeper.sh/v1");
        assert_eq!(
            error(&wrong),
            "Provider: Provider (externaldata.gatekeeper.sh/v1) is not a provider: expected Provider in externaldata.gatekeeper.sh/v1beta1 or v1alpha1"
        );
    }

    #[test]
    fn requests_are_gatekeepers_wire_format() {
        let request = ProviderRequest::new(vec!["nginx".to_string(), String::new()]);
        assert_eq!(
            serde_json::to_value(&request).unwrap(),
            json!({
                "apiVersion": "externaldata.gatekeeper.sh/v1beta1",
                "kind": "ProviderRequest",
                "request": {"keys": ["nginx", ""]},
            })
        );
        let response: ProviderResponse = serde_json::from_value(json!({
            "apiVersion": "externaldata.gatekeeper.sh/v1alpha1",
            "kind": "ProviderResponse",
            "response": {
                "idempotent": true,
                "items": [{"key": "nginx", "value": "nginx:v1.2.3"}, {"key": "x", "error": "no"}],
            },
        }))
        .unwrap();
        assert!(response.response.idempotent);
        assert_eq!(
            response.response.items,
            vec![
                ProviderItem {
                    key: "nginx".to_string(),
                    value: Some(json!("nginx:v1.2.3")),
                    error: String::new(),
                },
                ProviderItem {
                    key: "x".to_string(),
                    value: None,
                    error: "no".to_string(),
                },
            ]
        );
    }
}
