//! Kubernetes' validation of names, label keys and label values
//! (apimachinery's `IsQualifiedName`, `IsValidLabelValue`,
//! `IsDNS1123Subdomain`), with its error messages word for word, so that what
//! the API server refuses is refused offline in the same words.

/// `labelKeyFmt`: the pattern of a key's name part.
const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_ERR_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_KEY_EXAMPLES: [&str; 3] = ["MyName", "my.name", "123-abc"];
const LABEL_KEY_MAX_LENGTH: usize = 63;

/// `labelValueFmt`: the pattern of a label value.
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_EXAMPLES: [&str; 3] = ["MyValue", "my_value", "12345"];
const LABEL_VALUE_MAX_LENGTH: usize = 63;

/// `dns1123SubdomainFmt`: the pattern of a key's prefix.
const DNS1123_SUBDOMAIN_FMT: &str =
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;

/// `dns1123LabelFmt`: the pattern of a namespace's name.
const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_LABEL_MAX_LENGTH: usize = 63;

/// Kubernetes' `EmptyError()`.
const EMPTY_ERROR: &str = "must be non-empty";

/// Checks a label key like Kubernetes' `IsLabelKey` (`IsQualifiedName`): an
/// optional prefix and `/`, then a name. The prefix is a lowercase DNS-1123
/// subdomain of at most 253 bytes; the name is at most 63 bytes of
/// alphanumerics, `-`, `_` and `.`, starting and ending with an alphanumeric.
///
/// # Errors
///
/// Every problem found, in Kubernetes' words, joined with `"; "` as
/// `NewRequirement` joins them; for example `name part must be non-empty;
/// name part must consist of alphanumeric characters, '-', '_' or '.', and
/// must start and end with an alphanumeric character (e.g. 'MyName',  or
/// 'my.name',  or '123-abc', regex used for validation is
/// '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')` for the empty key.
pub fn validate_label_key(key: &str) -> Result<(), String> {
    let mut errs = Vec::new();
    let name = match key.split_once('/') {
        None => key,
        Some((_, rest)) if rest.contains('/') => {
            return Err(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_ERR_MSG, LABEL_KEY_FMT, &LABEL_KEY_EXAMPLES)
            ));
        }
        Some((prefix, name)) => {
            if prefix.is_empty() {
                errs.push(format!("prefix part {EMPTY_ERROR}"));
            } else {
                errs.extend(
                    dns1123_subdomain_errors(prefix)
                        .into_iter()
                        .map(|msg| format!("prefix part {msg}")),
                );
            }
            name
        }
    };
    if name.is_empty() {
        errs.push(format!("name part {EMPTY_ERROR}"));
    } else if name.len() > LABEL_KEY_MAX_LENGTH {
        errs.push(format!("name part {}", max_len_error(LABEL_KEY_MAX_LENGTH)));
    }
    if !is_label_name(name) {
        errs.push(format!(
            "name part {}",
            regex_error(LABEL_KEY_ERR_MSG, LABEL_KEY_FMT, &LABEL_KEY_EXAMPLES)
        ));
    }
    joined(errs)
}

/// Checks a label value like Kubernetes' `IsLabelValue`
/// (`IsValidLabelValue`): empty, or at most 63 bytes of alphanumerics, `-`,
/// `_` and `.`, starting and ending with an alphanumeric.
///
/// # Errors
///
/// Every problem found, in Kubernetes' words, joined with `"; "`; for
/// example `must be no more than 63 bytes` for a value of 64 letters.
pub fn validate_label_value(value: &str) -> Result<(), String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX_LENGTH {
        errs.push(max_len_error(LABEL_VALUE_MAX_LENGTH));
    }
    if !(value.is_empty() || is_label_name(value)) {
        errs.push(regex_error(
            LABEL_VALUE_ERR_MSG,
            LABEL_VALUE_FMT,
            &LABEL_VALUE_EXAMPLES,
        ));
    }
    joined(errs)
}

/// Kubernetes' `IsDNS1123Label`, which a namespace's name must pass: each
/// problem in its words (none for a valid label).
pub fn dns1123_label_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
    }
    if !is_dns1123_label(value) {
        errs.push(regex_error(
            DNS1123_LABEL_ERR_MSG,
            DNS1123_LABEL_FMT,
            &["my-name", "123-abc"],
        ));
    }
    errs
}

/// Kubernetes' `IsDNS1123Subdomain`: each problem in its words (none when
/// `value` is a lowercase RFC 1123 subdomain).
pub fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !is_dns1123_subdomain(value) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_ERR_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

fn joined(errs: Vec<String>) -> Result<(), String> {
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs.join("; "))
    }
}

/// Kubernetes' `MaxLenError`.
fn max_len_error(length: usize) -> String {
    format!("must be no more than {length} bytes")
}

/// Kubernetes' `RegexError`, examples and odd spacing included:
/// `msg (e.g. 'a',  or 'b', regex used for validation is 're')`.
fn regex_error(msg: &str, re: &str, examples: &[&str]) -> String {
    let mut out = String::from(msg);
    if examples.is_empty() {
        out.push_str(" (regex used for validation is '");
    } else {
        out.push_str(" (e.g. ");
        for (i, example) in examples.iter().enumerate() {
            if i > 0 {
                out.push_str(" or ");
            }
            out.push('\'');
            out.push_str(example);
            out.push_str("', ");
        }
        out.push_str("regex used for validation is '");
    }
    out.push_str(re);
    out.push_str("')");
    out
}

/// `^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`: non-empty, alphanumerics,
/// `-`, `_` and `.`, starting and ending with an alphanumeric.
fn is_label_name(s: &str) -> bool {
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`:
/// dot-separated DNS-1123 labels (no length limit per label here, as in
/// Kubernetes).
fn is_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(is_dns1123_label)
}

/// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`.
fn is_dns1123_label(s: &str) -> bool {
    let lower_alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            lower_alnum(first)
                && lower_alnum(last)
                && bytes.iter().all(|b| lower_alnum(b) || *b == b'-')
        }
        _ => false,
    }
}
