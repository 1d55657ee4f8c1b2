//! Parse errors: a byte offset and a reason, rendered with a caret.

use std::fmt;

/// `Result` with this crate's [`ParseError`] as the default error.
pub type Result<T, E = ParseError> = std::result::Result<T, E>;

/// A location that does not parse.
///
/// `Display` names the location, the reason and the byte offset, then shows
/// the location with a caret under the fault:
///
/// ```text
/// invalid location "spec.containers[name: foo": expected ']' at 25, found end of location
///   spec.containers[name: foo
///                            ^
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    location: String,
    offset: usize,
    reason: Reason,
}

/// Why a location does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reason {
    /// The location is empty or only whitespace.
    Empty,
    /// A token other than the one the grammar allows here.
    Expected {
        /// What the grammar allows at this point.
        expected: Expected,
        /// What is there instead.
        found: Found,
    },
    /// The location ends with a `.`.
    TrailingSeparator,
    /// A quoted string with no closing quote; the offset is the opening quote.
    UnterminatedString {
        /// The opening quote character, `'` or `"`.
        quote: char,
    },
    /// A `*` somewhere other than a list key value.
    MisplacedGlob,
    /// An unquoted field name or key field that starts with a digit.
    LeadingDigit {
        /// The name as it should be written, quoted.
        quoted: String,
    },
    /// An unquoted integer key value that does not fit in 64 bits.
    IntegerTooLarge {
        /// The digits as written.
        digits: String,
    },
    /// `notin ()`: a set with no value; the offset is the `)`.
    EmptySet,
    /// A `*` inside a `notin` set.
    GlobInSet,
    /// A `,` followed by the `)` closing a `notin` set; the offset is the `,`.
    TrailingComma,
    /// A value listed twice in one `notin` set; the offset is the second.
    DuplicateValue {
        /// The value in canonical form (`0080` shows as `80`).
        value: String,
    },
    /// A word other than `notin` between a key field and a `(`, or `notin`
    /// in another case (Kubernetes' `matchExpressions` write `NotIn`).
    UnknownOperator {
        /// The word as written.
        written: String,
    },
    /// `[name: notin (...)]`: a `:` before `notin`; the offset is the `:`.
    ColonBeforeNotIn,
}

/// What the grammar allows where a [`Reason::Expected`] fault is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    /// A field name, bare or quoted.
    FieldName,
    /// The key field of a list selector, as `name` in `[name: foo]`.
    KeyField,
    /// The `:` between key field and key value.
    Colon,
    /// A key value or `*`.
    KeyValue,
    /// The `]` closing a list selector.
    CloseBracket,
    /// The `(` opening the values of `notin`.
    OpenParen,
    /// A value in a `notin` set: a string or an integer.
    SetValue,
    /// A `,` before the next value of a `notin` set, or the `)` closing it.
    CommaOrCloseParen,
    /// A `.` before the next field, or the end of the location.
    SeparatorOrEnd,
}

/// What was found where something else was [`Expected`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// Nothing: the location ended.
    End,
    /// A bare word (identifier or digits).
    Word(String),
    /// A quoted string.
    Quoted,
    /// Any other single character.
    Char(char),
}

// === impl ParseError ===

impl ParseError {
    pub(crate) fn new(location: &str, offset: usize, reason: Reason) -> Self {
        ParseError {
            location: location.to_string(),
            offset,
            reason,
        }
    }

    /// The location as given.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// Byte offset of the fault in [`location`](Self::location); its length when the
    /// fault is at the end.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Why the location does not parse.
    pub fn reason(&self) -> &Reason {
        &self.reason
    }

    /// The first line of the rendering: location, reason and offset, no caret.
    pub fn message(&self) -> String {
        let (headline, detail) = self.reason.parts();
        let mut message = format!(
            "invalid location {:?}: {headline} at {}",
            self.location, self.offset
        );
        if let Some(detail) = detail {
            message.push_str(&detail);
        }
        message
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One displayed character per character of the location, so the caret
        // lines up: whitespace shows as a space, control and invisible
        // formatting characters (terminal escapes, zero-width marks) as U+FFFD.
        let shown: String = self.location.chars().map(shown_char).collect();
        let column = self
            .location
            .get(..self.offset)
            .map_or(0, |before| before.chars().count());
        write!(
            f,
            "{}\n  {shown}\n  {:column$}^",
            self.message(),
            "",
            column = column
        )
    }
}

impl std::error::Error for ParseError {}

fn shown_char(c: char) -> char {
    if c.is_whitespace() {
        ' '
    } else if c.is_control()
        || matches!(c, '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}' | '\u{feff}')
    {
        '\u{fffd}'
    } else {
        c
    }
}

// === impl Reason ===

impl Reason {
    /// What went wrong (placed before " at OFFSET") and what to do about it
    /// (after it, starting with its own punctuation).
    fn parts(&self) -> (String, Option<String>) {
        match self {
            Reason::Empty => ("location is empty".into(), None),
            Reason::Expected { expected, found } => {
                let mut detail = format!(", found {found}");
                if let Found::Char(c) = found
                    && !".[]:*".contains(*c)
                    && !(expected.is_in_set() && "(),".contains(*c))
                {
                    detail.push_str(
                        "; names with characters other than letters, digits, '_' and '-' must be quoted",
                    );
                }
                (format!("expected {expected}"), Some(detail))
            }
            Reason::TrailingSeparator => ("trailing '.'".into(), None),
            Reason::UnterminatedString { quote } => (
                "unterminated string".into(),
                Some(format!(": no closing {quote} for the {quote} opened here")),
            ),
            Reason::MisplacedGlob => (
                "unexpected '*'".into(),
                Some(": a glob is only allowed as a list key value, as in [name: *]; quote it for a literal \"*\"".into()),
            ),
            Reason::LeadingDigit { quoted } => (
                "name starts with a digit".into(),
                Some(format!(": quote it, as in {quoted}")),
            ),
            Reason::IntegerTooLarge { digits } => (
                "integer too large".into(),
                Some(format!(": {digits} is more than {}", i64::MAX)),
            ),
            Reason::EmptySet => (
                "empty notin set".into(),
                Some(": list at least one value, as in [name notin (istio-proxy)]".into()),
            ),
            Reason::GlobInSet => (
                "unexpected '*'".into(),
                Some(": a notin set lists values, not globs; quote it for a literal \"*\"".into()),
            ),
            Reason::TrailingComma => (
                "trailing ','".into(),
                Some(": a value must follow it, or remove it".into()),
            ),
            Reason::DuplicateValue { value } => (
                format!("duplicate value {value}"),
                Some(": it is already in the notin set".into()),
            ),
            Reason::UnknownOperator { written } => (
                format!("unknown operator '{written}'"),
                Some(if written.eq_ignore_ascii_case("notin") {
                    ": write notin, in lower case".into()
                } else {
                    ": a list selector takes ':' and a value, or notin and a set, as in [name notin (istio-proxy)]".into()
                }),
            ),
            Reason::ColonBeforeNotIn => (
                "unexpected ':'".into(),
                Some(": notin follows the key field directly, as in [name notin (istio-proxy)]".into()),
            ),
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (headline, detail) = self.parts();
        f.write_str(&headline)?;
        if let Some(detail) = detail {
            f.write_str(&detail)?;
        }
        Ok(())
    }
}

impl std::error::Error for Reason {}

// === impl Expected ===

impl Expected {
    /// Whether the fault is inside the parentheses of a `notin` set, where
    /// `(`, `)` and `,` are part of the grammar rather than name characters.
    fn is_in_set(self) -> bool {
        matches!(
            self,
            Expected::OpenParen | Expected::SetValue | Expected::CommaOrCloseParen
        )
    }
}

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Expected::FieldName => "a field name",
            Expected::KeyField => "a key field",
            Expected::Colon => "':'",
            Expected::KeyValue => "a key value or '*'",
            Expected::CloseBracket => "']'",
            Expected::OpenParen => "'('",
            Expected::SetValue => "a value",
            Expected::CommaOrCloseParen => "',' or ')'",
            Expected::SeparatorOrEnd => "'.' or end of location",
        })
    }
}

// === impl Found ===

impl Found {
    /// Describes the token that starts `rest`.
    pub(crate) fn at(rest: &str) -> Found {
        let mut chars = rest.chars();
        match chars.next() {
            None => Found::End,
            Some('"' | '\'') => Found::Quoted,
            Some(c) if crate::path::is_ident_char(c) => {
                let end = rest
                    .find(|c| !crate::path::is_ident_char(c))
                    .unwrap_or(rest.len());
                Found::Word(rest.get(..end).unwrap_or(rest).to_string())
            }
            Some(c) => Found::Char(c),
        }
    }
}

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Found::End => f.write_str("end of location"),
            Found::Word(w) => write!(f, "'{w}'"),
            Found::Quoted => f.write_str("a quoted string"),
            Found::Char(c) => write!(f, "{c:?}"),
        }
    }
}
