//! The AdmissionReview wire format, `admission.k8s.io/v1` and `v1beta1`.
//!
//! Our own types rather than kube-core's: the object stays a plain
//! `serde_json::Value` (the engine's input, no round trip through
//! `DynamicObject`), and the response echoes the version the API server
//! asked in, which kube-core's `into_review` does not (it always answers v1).

pub use sartor_api::GroupVersionKind;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The admission API group and the versions sartor answers.
pub const ADMISSION_VERSIONS: [&str; 2] = ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"];

/// An AdmissionReview as the API server sends it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionReview {
    /// `admission.k8s.io/v1` or `admission.k8s.io/v1beta1`.
    pub api_version: String,
    /// `AdmissionReview`.
    pub kind: String,
    /// The request; a review without one is malformed.
    #[serde(default)]
    pub request: Option<AdmissionRequest>,
}

/// The fields of an admission request sartor reads.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest {
    /// Identifies this request; the response must carry it back.
    pub uid: String,
    /// The kind of the object, as the webhook was registered for it.
    pub kind: GroupVersionKind,
    /// `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    pub operation: String,
    /// The object's name; may be empty on CREATE with `generateName`.
    #[serde(default)]
    pub name: String,
    /// The namespace of the request; empty for cluster-scoped objects.
    #[serde(default)]
    pub namespace: String,
    /// The subresource being admitted (`status`, `scale`), if any.
    #[serde(default)]
    pub sub_resource: String,
    /// Who sent the request.
    #[serde(default)]
    pub user_info: UserInfo,
    /// The object being admitted (absent on DELETE).
    #[serde(default)]
    pub object: Option<Value>,
    /// The object as it was before an UPDATE (absent on CREATE).
    #[serde(default)]
    pub old_object: Option<Value>,
}

/// The requesting user.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct UserInfo {
    /// Such as `system:serviceaccount:sartor-system:sartor`.
    #[serde(default)]
    pub username: String,
}

/// The answer to one request, wrapped in a review by [`AdmissionResponse::to_review_json`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AdmissionResponse {
    /// The request's uid.
    pub uid: String,
    /// Whether the request may go on.
    pub allowed: bool,
    /// Why, when denied (or when allowed after a mutation error).
    pub status: Option<Status>,
    /// The RFC 6902 JSON Patch, encoded, when the object changed: sent in
    /// base64 with `patchType: JSONPatch`.
    pub patch: Option<Vec<u8>>,
    /// Shown to the user by kubectl.
    pub warnings: Vec<String>,
}

/// The `metav1.Status` subset an AdmissionResponse carries.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Status {
    /// An HTTP-like status code for the decision.
    pub code: u16,
    /// A human-readable reason.
    pub message: String,
}

/// Why a body is not a usable AdmissionReview; answered with HTTP 400.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReviewError {
    /// Not JSON, or JSON of the wrong shape.
    #[error("the body is not an AdmissionReview: {0}")]
    Malformed(String),
    /// An apiVersion or kind sartor does not answer.
    #[error(
        "unsupported AdmissionReview apiVersion {api_version:?} kind {kind:?}: \
         expected kind AdmissionReview, apiVersion admission.k8s.io/v1 or admission.k8s.io/v1beta1"
    )]
    Unsupported {
        /// The apiVersion sent.
        api_version: String,
        /// The kind sent.
        kind: String,
    },
    /// The review carries no `request`.
    #[error("the AdmissionReview has no request")]
    MissingRequest,
    /// `request.object` is missing or not a JSON object where one is needed.
    #[error("request.object must be a JSON object, got {0}")]
    ObjectNotAnObject(&'static str),
}

// === impl AdmissionReview ===

impl AdmissionReview {
    /// Parses a request body, naming the field at fault when it does not fit.
    ///
    /// # Errors
    /// A [`ReviewError`] saying why the body cannot be answered.
    pub fn parse(body: &[u8]) -> Result<(String, AdmissionRequest), ReviewError> {
        // Tracking the path costs a tenth of a request; only a body that
        // fails to parse is read again to say where.
        let review: AdmissionReview = match serde_json::from_slice(body) {
            Ok(review) => review,
            Err(error) => return Err(locate(body, &error)),
        };
        if review.kind != "AdmissionReview"
            || !ADMISSION_VERSIONS.contains(&review.api_version.as_str())
        {
            return Err(ReviewError::Unsupported {
                api_version: review.api_version,
                kind: review.kind,
            });
        }
        let request = review.request.ok_or(ReviewError::MissingRequest)?;
        Ok((review.api_version, request))
    }
}

/// The error for a body that does not parse, naming the field at fault.
fn locate(body: &[u8], error: &serde_json::Error) -> ReviewError {
    let deserializer = &mut serde_json::Deserializer::from_slice(body);
    match serde_path_to_error::deserialize::<_, AdmissionReview>(deserializer) {
        Err(located) => match located.path().to_string().as_str() {
            "." => ReviewError::Malformed(located.inner().to_string()),
            path => ReviewError::Malformed(format!("{path}: {}", located.inner())),
        },
        Ok(_) => ReviewError::Malformed(error.to_string()),
    }
}

// === impl AdmissionResponse ===

impl AdmissionResponse {
    /// Allows the request unchanged.
    pub fn allow(uid: &str) -> AdmissionResponse {
        AdmissionResponse {
            uid: uid.to_string(),
            allowed: true,
            ..AdmissionResponse::default()
        }
    }

    /// Denies the request with `code` and `message`.
    pub fn deny(uid: &str, code: u16, message: String) -> AdmissionResponse {
        AdmissionResponse {
            uid: uid.to_string(),
            allowed: false,
            status: Some(Status { code, message }),
            ..AdmissionResponse::default()
        }
    }

    /// The review answering a request of `api_version`, encoded; fields
    /// left unset are omitted.
    ///
    /// Written by hand rather than derived: the patch goes into the body in
    /// base64 straight from its bytes, with no intermediate string for
    /// serde to scan for characters to escape (base64 has none), which was
    /// a tenth of a heavily mutated request's time.
    ///
    /// # Errors
    /// Only if serde_json fails to write to memory.
    pub fn to_review_json(&self, api_version: &str) -> Result<Vec<u8>, serde_json::Error> {
        let base64 = base64_simd::STANDARD;
        let patch_len = self
            .patch
            .as_ref()
            .map_or(0, |patch| base64.encoded_length(patch.len()));
        let mut out = Vec::with_capacity(160 + self.uid.len() + patch_len);
        out.extend_from_slice(b"{\"apiVersion\":");
        serde_json::to_writer(&mut out, api_version)?;
        out.extend_from_slice(b",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":");
        serde_json::to_writer(&mut out, &self.uid)?;
        out.extend_from_slice(if self.allowed {
            b",\"allowed\":true"
        } else {
            b",\"allowed\":false"
        });
        if let Some(status) = &self.status {
            out.extend_from_slice(b",\"status\":");
            serde_json::to_writer(&mut out, status)?;
        }
        if let Some(patch) = &self.patch {
            out.extend_from_slice(b",\"patch\":\"");
            base64.encode_append(patch, &mut out);
            out.extend_from_slice(b"\",\"patchType\":\"JSONPatch\"");
        }
        if !self.warnings.is_empty() {
            out.extend_from_slice(b",\"warnings\":");
            serde_json::to_writer(&mut out, &self.warnings)?;
        }
        out.extend_from_slice(b"}}");
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

    use super::*;

    #[test]
    fn parses_v1beta1_and_keeps_the_version() {
        let body = br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview",
            "request":{"uid":"u1","kind":{"group":"","version":"v1","kind":"Pod"},
            "operation":"CREATE","namespace":"shop","object":{"kind":"Pod"}}}"#;
        let (version, request) = AdmissionReview::parse(body).unwrap();
        assert_eq!(version, "admission.k8s.io/v1beta1");
        assert_eq!(request.uid, "u1");
        assert_eq!(request.namespace, "shop");
        assert_eq!(request.object, Some(serde_json::json!({"kind": "Pod"})));
    }

    #[test]
    fn names_the_field_at_fault() {
        let body = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",
            "request":{"uid":7}}"#;
        assert_eq!(
            AdmissionReview::parse(body).unwrap_err().to_string(),
            "the body is not an AdmissionReview: request.uid: invalid type: integer `7`, \
             expected a string at line 2 column 30"
        );
    }

    #[test]
    fn rejects_other_kinds_and_versions() {
        let body = br#"{"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview"}"#;
        assert_eq!(
            AdmissionReview::parse(body).unwrap_err(),
            ReviewError::Unsupported {
                api_version: "admission.k8s.io/v2".to_string(),
                kind: "AdmissionReview".to_string()
            }
        );
        let body = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#;
        assert_eq!(
            AdmissionReview::parse(body).unwrap_err(),
            ReviewError::MissingRequest
        );
    }

    #[test]
    fn response_omits_what_is_unset() {
        let response = AdmissionResponse::allow("u1");
        let encoded: Value =
            serde_json::from_slice(&response.to_review_json("admission.k8s.io/v1").unwrap())
                .unwrap();
        assert_eq!(
            encoded,
            serde_json::json!({
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {"uid": "u1", "allowed": true},
            })
        );
    }

    #[test]
    fn response_carries_every_field_set() {
        let response = AdmissionResponse {
            patch: Some(br#"[{"op":"add","path":"/a","value":"\u00e9"}]"#.to_vec()),
            warnings: vec!["w \"1\"".to_string()],
            status: Some(Status {
                code: 500,
                message: "m\n".to_string(),
            }),
            ..AdmissionResponse::allow("u\"1")
        };
        assert_eq!(
            String::from_utf8(response.to_review_json("admission.k8s.io/v1beta1").unwrap())
                .unwrap(),
            r#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","response":{"uid":"u\"1","allowed":true,"status":{"code":500,"message":"m\n"},"patch":"W3sib3AiOiJhZGQiLCJwYXRoIjoiL2EiLCJ2YWx1ZSI6Ilx1MDBlOSJ9XQ==","patchType":"JSONPatch","warnings":["w \"1\""]}}"#
        );
    }

    #[test]
    fn the_patch_is_standard_padded_base64_at_every_length() {
        use base64::Engine as _;
        // Long enough for the SIMD paths, every remainder for the padding.
        for len in 0..200usize {
            let patch: Vec<u8> = (0..len).map(|i| (i * 37 % 256) as u8).collect();
            let response = AdmissionResponse {
                patch: Some(patch.clone()),
                ..AdmissionResponse::allow("u")
            };
            let json: Value =
                serde_json::from_slice(&response.to_review_json("admission.k8s.io/v1").unwrap())
                    .unwrap();
            assert_eq!(
                json["response"]["patch"],
                base64::engine::general_purpose::STANDARD.encode(&patch),
                "{len} bytes"
            );
        }
    }
}
