//! External data (`assign.externalData`), Gatekeeper's way, kept pure: the
//! engine never calls a provider. It says which keys each provider is asked
//! for and applies the answers the caller brings.
//!
//! As in Gatekeeper (`pkg/mutation/system_external_data.go`):
//! - an externalData mutator leaves a *placeholder* at each place it applies,
//!   holding its key: the string there (`ValueAtLocation`; `""` when the
//!   field is missing), or the requesting user's name (`Username`, unless a
//!   string is already there, which is then the key);
//! - a placeholder put where one already is keeps the key it holds, so the
//!   next pass changes nothing and the mutation converges;
//! - once converged, the keys of every placeholder left are collected, per
//!   provider and each once ([`Asks`]): one request per provider per
//!   admission, whatever the number of mutators, places and passes;
//! - each placeholder is then replaced by its answer, a string; on any
//!   error (the provider failed, did not answer the key, answered an error
//!   or a non-string) `failurePolicy` decides: `Fail` fails the mutation
//!   with every distinct error, `Ignore` puts the key back, `UseDefault`
//!   puts `default`.
//!
//! The caller runs [`System::mutate`](crate::System::mutate) with what it
//! already knows ([`ProviderAnswers`]: a cache, or nothing); when the
//! [`Mutation`](crate::Mutation) is
//! [`unanswered`](crate::Mutation::unanswered) it asks the providers for
//! [`Mutation::asks`](crate::Mutation::asks) and mutates again with the
//! [`Answers`] (mutation is deterministic, so the second run asks the same).
//!
//! A placeholder lives in the object as `{PLACEHOLDER_FIELD: {...}}`; an
//! admitted object that already holds that field name is refused, so an
//! object cannot forge one.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use sartor_api::{DataSource, FailurePolicy, ProviderResponse, json_type};
use serde_json::{Map, Value, json};

use crate::walk::{SetError, Setter};

/// The field name a placeholder is stored under: a name no Kubernetes
/// object uses (it starts with a NUL character).
pub const PLACEHOLDER_FIELD: &str = "\u{0}sartor.dev/external-data";

/// For each provider, the keys its placeholders ask for, each once, sorted.
pub type Asks = BTreeMap<String, BTreeSet<String>>;

/// `assign.externalData`, compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExternalSource {
    pub(crate) provider: String,
    pub(crate) data_source: DataSource,
    pub(crate) failure_policy: FailurePolicy,
    /// `default`; `""` when unset.
    pub(crate) default: String,
}

/// Puts a placeholder at the end of the location.
pub(crate) struct PlaceholderSetter<'a> {
    pub(crate) source: &'a ExternalSource,
    /// The requesting user's name (`""` offline).
    pub(crate) username: &'a str,
}

/// Where the engine finds providers' answers: [`Answers`] (what one round
/// of calls brought), or a caller's cache, so that an admission whose keys
/// are all known needs a single run.
pub trait ProviderAnswers: Sync {
    /// `provider`'s answer for `key`, or why there is none (Gatekeeper's
    /// message); `None` when `provider` has not been asked for it.
    fn answer(&self, provider: &str, key: &str) -> Option<Result<Value, String>>;
}

/// No answers: every key is still to be asked.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoAnswers;

impl ProviderAnswers for NoAnswers {
    fn answer(&self, _provider: &str, _key: &str) -> Option<Result<Value, String>> {
        None
    }
}

/// What the providers answered for one admission, by provider.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answers {
    providers: HashMap<String, ProviderAnswer>,
}

/// One provider's answer.
#[derive(Debug, Clone, PartialEq)]
enum ProviderAnswer {
    /// Each key's value or error (the last item for a key wins).
    Items(HashMap<String, Item>),
    /// The whole call failed; the message says why, naming the provider.
    Failed(String),
}

/// One key's answer.
#[derive(Debug, Clone, PartialEq)]
enum Item {
    Value(Value),
    Error(String),
}

/// A placeholder's content.
#[derive(Debug, Clone, PartialEq)]
struct Placeholder<'a> {
    provider: &'a str,
    key: &'a str,
    failure_policy: FailurePolicy,
    default: &'a str,
}

// === impl Answers ===

impl Answers {
    /// No answers.
    pub fn new() -> Answers {
        Answers::default()
    }

    /// What `provider` answered, checked as Gatekeeper checks a response for
    /// mutation: a `systemError` (not blank) or a response not declared
    /// idempotent fails every key.
    pub fn response(&mut self, provider: &str, response: &ProviderResponse) {
        let body = &response.response;
        let invalid = body.refusal();
        let answer = match invalid {
            Some(reason) => ProviderAnswer::Failed(format!(
                "failed to validate external data response from provider {provider}: {reason}"
            )),
            None => ProviderAnswer::Items(
                body.items
                    .iter()
                    .map(|item| {
                        let answer = if item.error.is_empty() {
                            Item::Value(item.value.clone().unwrap_or(Value::Null))
                        } else {
                            Item::Error(item.error.clone())
                        };
                        (item.key.clone(), answer)
                    })
                    .collect(),
            ),
        };
        self.providers.insert(provider.to_string(), answer);
    }

    /// `provider` could not be asked: the request failed (`reason`: a
    /// connection, TLS, timeout or decoding error), or there is no such
    /// provider. Every key fails with the reason.
    pub fn failed(&mut self, provider: &str, reason: &str) {
        self.providers.insert(
            provider.to_string(),
            ProviderAnswer::Failed(reason.to_string()),
        );
    }
}

impl ProviderAnswers for Answers {
    fn answer(&self, provider: &str, key: &str) -> Option<Result<Value, String>> {
        Some(match self.providers.get(provider)? {
            ProviderAnswer::Failed(reason) => Err(reason.clone()),
            ProviderAnswer::Items(items) => match items.get(key) {
                None => Err(format!(
                    "failed to find external data item in response for provider {provider}"
                )),
                Some(Item::Error(error)) => Err(item_error(provider, error)),
                Some(Item::Value(value)) => Ok(value.clone()),
            },
        })
    }
}

/// Gatekeeper's message for the error a provider answered for one key.
pub fn item_error(provider: &str, error: &str) -> String {
    format!("failed to retrieve external data item from provider {provider}: {error}")
}

/// The string to put in place of `placeholder`, or why there is none
/// (Gatekeeper's messages); `None` when its provider was not asked.
fn resolve_one(
    answers: &dyn ProviderAnswers,
    placeholder: &Placeholder<'_>,
) -> Option<Result<String, String>> {
    let provider = placeholder.provider;
    Some(match answers.answer(provider, placeholder.key)? {
        Ok(Value::String(value)) => Ok(value),
        Ok(other) => Err(format!(
            "failed to convert external data item value from provider {provider} to string, got type {}",
            go_type(&other)
        )),
        Err(error) => Err(error),
    })
}

/// How Go's `%T` names a decoded JSON value, as Gatekeeper's message says it.
fn go_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

// === impl PlaceholderSetter ===

impl Setter for PlaceholderSetter<'_> {
    fn set_value(&self, object: &mut Map<String, Value>, key: &str) -> Result<bool, SetError> {
        let source = self.source;
        let ask = match object.get(key) {
            None => match source.data_source {
                DataSource::Username => self.username.to_string(),
                DataSource::ValueAtLocation => String::new(),
            },
            Some(Value::String(existing)) => existing.clone(),
            Some(existing) => match Placeholder::read(existing) {
                Some(placeholder) => placeholder.key.to_string(),
                None => return Err(SetError::ExternalKeyNotAString(json_type(existing))),
            },
        };
        let placeholder = Placeholder {
            provider: &source.provider,
            key: &ask,
            failure_policy: source.failure_policy,
            default: &source.default,
        }
        .to_value();
        match object.get_mut(key) {
            Some(existing) if *existing == placeholder => Ok(false),
            Some(existing) => {
                *existing = placeholder;
                Ok(true)
            }
            None => {
                object.insert(key.to_string(), placeholder);
                Ok(true)
            }
        }
    }
}

// === impl Placeholder ===

impl<'a> Placeholder<'a> {
    fn to_value(&self) -> Value {
        json!({PLACEHOLDER_FIELD: {
            "provider": self.provider,
            "key": self.key,
            "failurePolicy": policy_name(self.failure_policy),
            "default": self.default,
        }})
    }

    /// The placeholder `value` is, if it is one.
    fn read(value: &'a Value) -> Option<Placeholder<'a>> {
        let fields = value.as_object()?;
        if fields.len() != 1 {
            return None;
        }
        let inner = fields.get(PLACEHOLDER_FIELD)?;
        let text = |name: &str| inner.get(name).and_then(Value::as_str);
        Some(Placeholder {
            provider: text("provider")?,
            key: text("key")?,
            failure_policy: match text("failurePolicy")? {
                "UseDefault" => FailurePolicy::UseDefault,
                "Ignore" => FailurePolicy::Ignore,
                _ => FailurePolicy::Fail,
            },
            default: text("default")?,
        })
    }
}

fn policy_name(policy: FailurePolicy) -> &'static str {
    match policy {
        FailurePolicy::UseDefault => "UseDefault",
        FailurePolicy::Ignore => "Ignore",
        FailurePolicy::Fail => "Fail",
    }
}

/// How an error names the type of `value`: as [`json_type`] does, but a
/// placeholder is named for what it is, so that a mutator meeting one (an
/// AssignImage on the field an externalData Assign sets) says why.
pub(crate) fn type_of(value: &Value) -> &'static str {
    if Placeholder::read(value).is_some() {
        "the placeholder of an externalData mutator (its provider's answer is put in place only after every mutator ran; keep other mutators off that field)"
    } else {
        json_type(value)
    }
}

/// Whether `value` holds [`PLACEHOLDER_FIELD`] anywhere.
pub(crate) fn holds_placeholder_field(value: &Value) -> bool {
    match value {
        Value::Object(fields) => {
            fields.contains_key(PLACEHOLDER_FIELD) || fields.values().any(holds_placeholder_field)
        }
        Value::Array(items) => items.iter().any(holds_placeholder_field),
        _ => false,
    }
}

/// Once a mutation converged: the providers and keys the placeholders in
/// `object` ask for, and what [`resolve`] made of them (`Done` when there
/// is none).
pub(crate) fn put_in_place(
    object: &mut Value,
    answers: &dyn ProviderAnswers,
) -> (Asks, Resolution) {
    let asks = asks(object);
    if asks.is_empty() {
        return (asks, Resolution::Done);
    }
    let resolution = resolve(object, answers);
    (asks, resolution)
}

/// The providers and keys the placeholders in `object` ask for.
pub(crate) fn asks(object: &Value) -> Asks {
    let mut asks = Asks::new();
    visit(object, &mut |placeholder| {
        asks.entry(placeholder.provider.to_string())
            .or_default()
            .insert(placeholder.key.to_string());
    });
    asks
}

/// Calls `found` with every placeholder that is a field's value (as in
/// Gatekeeper, a placeholder directly in a list is not one; an Assign
/// cannot put one there).
fn visit<'a>(value: &'a Value, found: &mut dyn FnMut(Placeholder<'a>)) {
    match value {
        Value::Object(fields) => {
            for field in fields.values() {
                match Placeholder::read(field) {
                    Some(placeholder) => found(placeholder),
                    None => visit(field, found),
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                visit(item, found);
            }
        }
        _ => {}
    }
}

/// What [`resolve`] made of the placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Resolution {
    /// Every placeholder is replaced (or there was none).
    Done,
    /// Some provider was not asked for some key: the object is half done.
    Unanswered,
    /// Placeholders whose policy is `Fail` met errors: every distinct one,
    /// in the order met, as Gatekeeper's aggregate prints them (one alone,
    /// several as `[a, b]`), after `failed to resolve external data
    /// placeholders: `.
    Failed(String),
}

/// Replaces every placeholder in `object` by its answer, or per its
/// failurePolicy.
pub(crate) fn resolve(object: &mut Value, answers: &dyn ProviderAnswers) -> Resolution {
    let mut errors: Vec<String> = Vec::new();
    if !replace(object, answers, &mut errors) {
        return Resolution::Unanswered;
    }
    match errors.as_slice() {
        [] => Resolution::Done,
        [one] => Resolution::Failed(format!(
            "failed to resolve external data placeholders: {one}"
        )),
        many => Resolution::Failed(format!(
            "failed to resolve external data placeholders: [{}]",
            many.join(", ")
        )),
    }
}

/// [`resolve`]'s walk; `false` as soon as a placeholder's provider was not
/// asked.
fn replace(value: &mut Value, answers: &dyn ProviderAnswers, errors: &mut Vec<String>) -> bool {
    match value {
        Value::Object(fields) => {
            for field in fields.values_mut() {
                let Some(placeholder) = Placeholder::read(field) else {
                    if !replace(field, answers, errors) {
                        return false;
                    }
                    continue;
                };
                let Some(answer) = resolve_one(answers, &placeholder) else {
                    return false;
                };
                let resolved = answer.or_else(|error| match placeholder.failure_policy {
                    FailurePolicy::UseDefault => Ok(placeholder.default.to_string()),
                    FailurePolicy::Ignore => Ok(placeholder.key.to_string()),
                    FailurePolicy::Fail => Err(error),
                });
                match resolved {
                    Ok(value) => *field = Value::String(value),
                    Err(error) => {
                        if !errors.contains(&error) {
                            errors.push(error);
                        }
                    }
                }
            }
            true
        }
        Value::Array(items) => items.iter_mut().all(|item| replace(item, answers, errors)),
        _ => true,
    }
}

#[cfg(test)]
mod tests;
