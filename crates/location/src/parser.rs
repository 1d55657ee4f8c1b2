//! The location grammar, one function per rule.
//!
//! ```text
//! location  = ws segment (ws "." ws segment)* ws EOF
//! segment   = name (ws list)?
//! list      = "[" ws name ws (":" ws key_value | "notin" ws set) ws "]"
//! name      = quoted | ident
//! key_value = "*" | quoted | integer | ident
//! set       = "(" ws literal (ws "," ws literal)* ws ")"   (no value twice)
//! literal   = quoted | integer | ident
//! quoted    = "'" (("\" any) | not "'")* "'" | the same with '"'
//! ident     = [A-Za-z_-] [A-Za-z0-9_-]*
//! integer   = [0-9]+                      (decimal, fits in i64)
//! ws        = [ \t\r\n]*
//! ```
//!
//! Without `notin`, this accepts the strings Gatekeeper's scanner and parser
//! (`pkg/mutation/path/{token,parser}`) accept, with two deliberate differences:
//! - an empty or all-blank location is an error here, where Gatekeeper returns
//!   an empty path that every later step has to reject on its own;
//! - an integer above `i64::MAX` is always an error. Gatekeeper's `parseInt64`
//!   only notices overflow when the result turns negative, so some larger
//!   numbers wrap around silently (`18446744073709551616` reads as 0).
//!
//! `[key notin (a, b)]` is sartor's own: Gatekeeper's parser wants `:` after
//! the key field, so no location it accepts contains one, and every location
//! it accepts parses here to the same nodes.
//!
//! Inside the grammar a fault is a [`Fault`]: the unparsed rest of the input and
//! what went wrong there. Once a rule has seen enough to know what the user meant
//! (an opening `[` or quote, a `.`), a fault is a `nom::Err::Failure` so no
//! alternative is tried and the error points at the right place.

use nom::branch::alt;
use nom::bytes::complete::take_while;
use nom::character::complete::{char, digit1, one_of, satisfy};
use nom::combinator::{eof, opt, recognize, value};
use nom::sequence::preceded;
use nom::{IResult, Parser};

use crate::error::{Expected, Found, ParseError, Reason};
use std::collections::BTreeSet;

use crate::path::{KeySet, KeyValue, ListSelector, Literal, Node, Path, is_ident_char};

type Res<'a, T> = IResult<&'a str, T, Fault<'a>>;

/// A fault inside the grammar: where (the rest of the input) and why.
#[derive(Debug)]
struct Fault<'a> {
    rest: &'a str,
    problem: Problem<'a>,
}

#[derive(Debug)]
enum Problem<'a> {
    /// A low-level combinator did not match; rules turn it into `Expected`.
    NoMatch,
    Expected(Expected),
    TrailingSeparator,
    UnterminatedString(char),
    IntegerTooLarge(&'a str),
    EmptySet,
    GlobInSet,
    TrailingComma,
    // These two carry nothing: the value or word starts at the fault's `rest`,
    // and a payload would make every parser result larger.
    DuplicateValue,
    UnknownOperator,
    ColonBeforeNotIn,
}

impl<'a> nom::error::ParseError<&'a str> for Fault<'a> {
    fn from_error_kind(rest: &'a str, _: nom::error::ErrorKind) -> Self {
        Fault {
            rest,
            problem: Problem::NoMatch,
        }
    }

    fn append(_: &'a str, _: nom::error::ErrorKind, other: Self) -> Self {
        other
    }
}

fn failure<'a, T>(rest: &'a str, problem: Problem<'a>) -> Res<'a, T> {
    Err(nom::Err::Failure(Fault { rest, problem }))
}

/// Parses a whole location.
pub(crate) fn parse(input: &str) -> Result<Path, ParseError> {
    if input.chars().all(is_ws) {
        return Err(ParseError::new(input, 0, Reason::Empty));
    }
    let nodes = match location(input) {
        Ok((_, nodes)) => nodes,
        Err(nom::Err::Error(fault) | nom::Err::Failure(fault)) => {
            return Err(into_parse_error(input, fault));
        }
        Err(nom::Err::Incomplete(_)) => {
            return Err(ParseError::new(
                input,
                input.len(),
                Reason::Expected {
                    expected: Expected::SeparatorOrEnd,
                    found: Found::End,
                },
            ));
        }
    };
    // The grammar only produces well-shaped paths; from_nodes re-checks for free.
    Path::from_nodes(nodes).map_err(|_| ParseError::new(input, 0, Reason::Empty))
}

fn into_parse_error(input: &str, fault: Fault<'_>) -> ParseError {
    let offset = input.len().saturating_sub(fault.rest.len());
    let found = Found::at(fault.rest);
    let reason = match fault.problem {
        Problem::Expected(Expected::FieldName | Expected::KeyField)
            if fault.rest.starts_with('*') =>
        {
            Reason::MisplacedGlob
        }
        Problem::Expected(Expected::FieldName | Expected::KeyField)
            if fault.rest.starts_with(|c: char| c.is_ascii_digit()) =>
        {
            let word = match found {
                Found::Word(w) => w,
                _ => String::new(),
            };
            Reason::LeadingDigit {
                quoted: format!("\"{word}\""),
            }
        }
        Problem::Expected(expected) => Reason::Expected { expected, found },
        Problem::NoMatch => Reason::Expected {
            expected: Expected::SeparatorOrEnd,
            found,
        },
        Problem::TrailingSeparator => Reason::TrailingSeparator,
        Problem::UnterminatedString(quote) => Reason::UnterminatedString { quote },
        Problem::IntegerTooLarge(digits) => Reason::IntegerTooLarge {
            digits: digits.to_string(),
        },
        Problem::EmptySet => Reason::EmptySet,
        Problem::GlobInSet => Reason::GlobInSet,
        Problem::TrailingComma => Reason::TrailingComma,
        Problem::DuplicateValue => Reason::DuplicateValue {
            value: literal(fault.rest)
                .map(|(_, value)| value.to_string())
                .unwrap_or_default(),
        },
        Problem::UnknownOperator => Reason::UnknownOperator {
            written: match found {
                Found::Word(w) => w,
                _ => String::new(),
            },
        },
        Problem::ColonBeforeNotIn => Reason::ColonBeforeNotIn,
    };
    ParseError::new(input, offset, reason)
}

/// Runs `parser`; if it does not match, fails with "expected `what`" right here.
fn expect<'a, O>(
    what: Expected,
    mut parser: impl Parser<&'a str, Output = O, Error = Fault<'a>>,
) -> impl Parser<&'a str, Output = O, Error = Fault<'a>> {
    move |input: &'a str| match parser.parse(input) {
        Err(nom::Err::Error(_)) => failure(input, Problem::Expected(what)),
        other => other,
    }
}

/// `location = ws segment (ws "." ws segment)* ws EOF`
fn location(input: &str) -> Res<'_, Vec<Node>> {
    let (rest, _) = ws(input)?;
    let (mut rest, first) = expect(Expected::FieldName, segment).parse(rest)?;
    let mut nodes = Vec::with_capacity(4);
    push_segment(&mut nodes, first);
    loop {
        match separator(rest) {
            Ok((after, ())) => {
                let (after, next) = expect(Expected::FieldName, segment).parse(after)?;
                push_segment(&mut nodes, next);
                rest = after;
            }
            Err(nom::Err::Error(_)) => break,
            Err(e) => return Err(e),
        }
    }
    let (rest, _) = preceded(ws, expect(Expected::SeparatorOrEnd, eof)).parse(rest)?;
    Ok((rest, nodes))
}

fn push_segment(nodes: &mut Vec<Node>, (field, list): (String, Option<ListSelector>)) {
    nodes.push(Node::Field(field));
    if let Some(list) = list {
        nodes.push(Node::List(list));
    }
}

/// `ws "." ws`, refusing a `.` that ends the location.
fn separator(input: &str) -> Res<'_, ()> {
    let (dot, _) = ws(input)?;
    let (rest, _) = char('.')(dot)?;
    let (rest, _) = ws(rest)?;
    if rest.is_empty() {
        return failure(dot, Problem::TrailingSeparator);
    }
    Ok((rest, ()))
}

/// `segment = name (ws list)?`
fn segment(input: &str) -> Res<'_, (String, Option<ListSelector>)> {
    (name, opt(preceded(ws, list))).parse(input)
}

/// `list = "[" ws name ws (":" ws key_value | "notin" ws set) ws "]"`
fn list(input: &str) -> Res<'_, ListSelector> {
    let (rest, _) = char('[')(input)?;
    let (rest, key_field) = preceded(ws, expect(Expected::KeyField, name)).parse(rest)?;
    let (rest, _) = ws(rest)?;
    let (rest, key_value) = if let Some(value) = rest.strip_prefix(':') {
        let (value, _) = ws(value)?;
        if value.starts_with("notin")
            && let Ok((after, "notin")) = word(value)
            && ws(after)?.0.starts_with('(')
        {
            return failure(rest, Problem::ColonBeforeNotIn);
        }
        expect(Expected::KeyValue, key_value).parse(value)?
    } else {
        match word(rest) {
            Ok((after, "notin")) => set.map(KeyValue::NotIn).parse(after)?,
            Ok((after, other))
                if other.eq_ignore_ascii_case("notin") || ws(after)?.0.starts_with('(') =>
            {
                return failure(rest, Problem::UnknownOperator);
            }
            _ => return failure(rest, Problem::Expected(Expected::Colon)),
        }
    };
    let (rest, _) = preceded(ws, expect(Expected::CloseBracket, char(']'))).parse(rest)?;
    Ok((
        rest,
        ListSelector {
            key_field,
            key_value,
        },
    ))
}

/// `name = quoted | ident`
fn name(input: &str) -> Res<'_, String> {
    alt((quoted, ident)).parse(input)
}

/// `key_value = "*" | quoted | integer | ident`
fn key_value(input: &str) -> Res<'_, KeyValue> {
    alt((
        value(KeyValue::Glob, char('*')),
        quoted.map(KeyValue::String),
        integer.map(KeyValue::Integer),
        ident.map(KeyValue::String),
    ))
    .parse(input)
}

/// `set = "(" ws literal (ws "," ws literal)* ws ")"`, each value once.
///
/// The faults a user is likely to make get their own message: `()`, a `*`,
/// a `,` before the `)`, a value listed twice (`80` and `0080` included).
fn set(input: &str) -> Res<'_, KeySet> {
    let (mut rest, _) = preceded(ws, expect(Expected::OpenParen, char('('))).parse(input)?;
    let mut values = BTreeSet::new();
    loop {
        let (at, _) = ws(rest)?;
        if at.starts_with(')') && values.is_empty() {
            return failure(at, Problem::EmptySet);
        }
        if at.starts_with('*') {
            return failure(at, Problem::GlobInSet);
        }
        let (after, value) = expect(Expected::SetValue, literal).parse(at)?;
        if !values.insert(value) {
            return failure(at, Problem::DuplicateValue);
        }
        let (after, _) = ws(after)?;
        if let Some(next) = after.strip_prefix(',') {
            if ws(next)?.0.starts_with(')') {
                return failure(after, Problem::TrailingComma);
            }
            rest = next;
            continue;
        }
        let (after, _) = expect(Expected::CommaOrCloseParen, char(')')).parse(after)?;
        return match KeySet::from_unique(values) {
            Some(set) => Ok((after, set)),
            // Unreachable: the loop read at least one value.
            None => failure(at, Problem::EmptySet),
        };
    }
}

/// `literal = quoted | integer | ident`: a key value that is not a glob.
fn literal(input: &str) -> Res<'_, Literal> {
    alt((
        quoted.map(Literal::String),
        integer.map(Literal::Integer),
        ident.map(Literal::String),
    ))
    .parse(input)
}

/// A `'` or `"` string; `\` keeps the next character literally (no `\n`-style escapes).
fn quoted(input: &str) -> Res<'_, String> {
    let (body, quote) = one_of("'\"")(input)?;
    let mut out = String::new();
    let mut chars = body.char_indices();
    while let Some((at, c)) = chars.next() {
        if c == quote {
            let rest = body.get(at + c.len_utf8()..).unwrap_or_default();
            return Ok((rest, out));
        }
        if c == '\\' {
            match chars.next() {
                Some((_, escaped)) => out.push(escaped),
                None => break,
            }
        } else {
            out.push(c);
        }
    }
    failure(input, Problem::UnterminatedString(quote))
}

/// `ident = [A-Za-z_-] [A-Za-z0-9_-]*`; a leading digit would make it an integer.
fn ident(input: &str) -> Res<'_, String> {
    recognize((
        satisfy(|c| is_ident_char(c) && !c.is_ascii_digit()),
        take_while(is_ident_char),
    ))
    .map(str::to_string)
    .parse(input)
}

/// An `ident`, borrowed from the input: the word after a key field.
fn word(input: &str) -> Res<'_, &str> {
    recognize((
        satisfy(|c| is_ident_char(c) && !c.is_ascii_digit()),
        take_while(is_ident_char),
    ))
    .parse(input)
}

/// `integer = [0-9]+`, decimal (a leading zero is not octal), at most `i64::MAX`.
fn integer(input: &str) -> Res<'_, i64> {
    let (rest, digits) = digit1(input)?;
    match digits.parse::<i64>() {
        Ok(n) => Ok((rest, n)),
        Err(_) => failure(input, Problem::IntegerTooLarge(digits)),
    }
}

/// `ws = [ \t\r\n]*`, the whitespace Gatekeeper's scanner skips between tokens.
fn ws(input: &str) -> Res<'_, &str> {
    take_while(is_ws)(input)
}

fn is_ws(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(name: &str) -> Node {
        Node::Field(name.to_string())
    }

    fn l(key: &str, value: KeyValue) -> Node {
        Node::List(ListSelector {
            key_field: key.to_string(),
            key_value: value,
        })
    }

    fn s(value: &str) -> KeyValue {
        KeyValue::String(value.to_string())
    }

    fn nodes(location: &str) -> Vec<Node> {
        match parse(location) {
            Ok(path) => path.nodes().to_vec(),
            Err(e) => panic!("{location:?} should parse:\n{e}"),
        }
    }

    fn message(location: &str) -> String {
        match parse(location) {
            Ok(path) => panic!("{location:?} should not parse, got {path:?}"),
            Err(e) => e.message(),
        }
    }

    #[test]
    fn the_documented_examples_parse() {
        assert_eq!(nodes("spec.priority"), [f("spec"), f("priority")]);
        assert_eq!(
            nodes(r#"spec.containers[name: "foo"].volumeMounts[mountPath: "/my/mount"].readOnly"#),
            [
                f("spec"),
                f("containers"),
                l("name", s("foo")),
                f("volumeMounts"),
                l("mountPath", s("/my/mount")),
                f("readOnly"),
            ]
        );
        assert_eq!(
            nodes("spec.containers[name: *].imagePullPolicy"),
            [
                f("spec"),
                f("containers"),
                l("name", KeyValue::Glob),
                f("imagePullPolicy")
            ]
        );
        assert_eq!(
            nodes(r#"metadata.annotations."example.com/owner""#),
            [f("metadata"), f("annotations"), f("example.com/owner")]
        );
        assert_eq!(
            nodes("spec.containers[name: 'my container'].image"),
            [
                f("spec"),
                f("containers"),
                l("name", s("my container")),
                f("image")
            ]
        );
    }

    #[test]
    fn backslash_keeps_the_next_character() {
        assert_eq!(
            nodes(r#""Use \" to escape and \\\" to escape""#),
            [f(r#"Use " to escape and \" to escape"#)]
        );
        assert_eq!(nodes(r#""sp\"ec""#), [f("sp\"ec")]);
        assert_eq!(nodes(r#""trailing\\""#), [f("trailing\\")]);
        assert_eq!(nodes(r#""embedded\\slash""#), [f("embedded\\slash")]);
        // No \n-style escapes: `\n` is the letter n.
        assert_eq!(nodes(r#""a\nb""#), [f("anb")]);
        assert_eq!(
            nodes(
                r#"spec."this object"."is very"["much full": 'of everyone\'s'].'favorite thing'"#
            ),
            [
                f("spec"),
                f("this object"),
                f("is very"),
                l("much full", s("of everyone's")),
                f("favorite thing"),
            ]
        );
        assert_eq!(nodes(r#"'say "hi"'"#), [f(r#"say "hi""#)]);
    }

    #[test]
    fn quoted_strings_hold_anything() {
        assert_eq!(nodes("spec.\"foo\nbar\""), [f("spec"), f("foo\nbar")]);
        assert_eq!(nodes("'foo[bar: baz]'"), [f("foo[bar: baz]")]);
        assert_eq!(nodes("'dot..dot'"), [f("dot..dot")]);
        assert_eq!(nodes("'ünï ✓'"), [f("ünï ✓")]);
        assert_eq!(nodes(r#"foo."".bar"#), [f("foo"), f(""), f("bar")]);
        assert_eq!(
            nodes(r#"spec.containers["": ""]"#),
            [f("spec"), f("containers"), l("", s(""))]
        );
    }

    #[test]
    fn bare_identifiers_are_gatekeepers() {
        assert_eq!(nodes("-123-_456_"), [f("-123-_456_")]);
        assert_eq!(nodes("area51"), [f("area51")]);
        assert_eq!(
            nodes("spec.studio54.bar"),
            [f("spec"), f("studio54"), f("bar")]
        );
        assert_eq!(nodes(r#""012345""#), [f("012345")]);
        assert_eq!(nodes(r#"spec."123""#), [f("spec"), f("123")]);
    }

    #[test]
    fn key_values_are_strings_integers_or_globs() {
        assert_eq!(
            nodes("a[port: 8080]"),
            [f("a"), l("port", KeyValue::Integer(8080))]
        );
        assert_eq!(
            nodes("a[port: 0080]"),
            [f("a"), l("port", KeyValue::Integer(80))]
        );
        assert_eq!(
            nodes("a[port: 0123]"),
            [f("a"), l("port", KeyValue::Integer(123))]
        );
        assert_eq!(nodes(r#"a[port: "8080"]"#), [f("a"), l("port", s("8080"))]);
        assert_eq!(nodes("a[port: -80]"), [f("a"), l("port", s("-80"))]);
        assert_eq!(nodes(r#"a[name: "*"]"#), [f("a"), l("name", s("*"))]);
        assert_eq!(nodes("a[name: '*']"), [f("a"), l("name", s("*"))]);
        assert_eq!(
            nodes("spec[bignum: 9223372036854775807]"),
            [f("spec"), l("bignum", KeyValue::Integer(i64::MAX))]
        );
    }

    #[test]
    fn whitespace_may_surround_every_token() {
        assert_eq!(
            nodes("    spec   .    containers    "),
            [f("spec"), f("containers")]
        );
        assert_eq!(
            nodes("\tspec\n.\r\ncontainers [ name\t:\n* ] . image "),
            [
                f("spec"),
                f("containers"),
                l("name", KeyValue::Glob),
                f("image")
            ]
        );
    }

    #[test]
    fn rejections_say_what_and_where() {
        let cases = [
            ("", r#"invalid location "": location is empty at 0"#),
            (
                " \t\n",
                r#"invalid location " \t\n": location is empty at 0"#,
            ),
            (
                ".spec",
                r#"invalid location ".spec": expected a field name at 0, found '.'"#,
            ),
            ("spec.", r#"invalid location "spec.": trailing '.' at 4"#),
            (
                "spec . ",
                r#"invalid location "spec . ": trailing '.' at 5"#,
            ),
            (
                "foo..bar",
                r#"invalid location "foo..bar": expected a field name at 4, found '.'"#,
            ),
            (
                r#""abc"#,
                r#"invalid location "\"abc": unterminated string at 0: no closing " for the " opened here"#,
            ),
            (
                r#"a.'b\'"#,
                r#"invalid location "a.'b\\'": unterminated string at 2: no closing ' for the ' opened here"#,
            ),
            (
                r#"a["b\"#,
                r#"invalid location "a[\"b\\": unterminated string at 2: no closing " for the " opened here"#,
            ),
            (
                "foo[",
                r#"invalid location "foo[": expected a key field at 4, found end of location"#,
            ),
            (
                "a[x: y",
                r#"invalid location "a[x: y": expected ']' at 6, found end of location"#,
            ),
            (
                "spec.containers[name: foo.image",
                r#"invalid location "spec.containers[name: foo.image": expected ']' at 25, found '.'"#,
            ),
            (
                "spec.*",
                r#"invalid location "spec.*": unexpected '*' at 5: a glob is only allowed as a list key value, as in [name: *]; quote it for a literal "*""#,
            ),
            (
                "*",
                r#"invalid location "*": unexpected '*' at 0: a glob is only allowed as a list key value, as in [name: *]; quote it for a literal "*""#,
            ),
            (
                "spec.containers[*: foo]",
                r#"invalid location "spec.containers[*: foo]": unexpected '*' at 16: a glob is only allowed as a list key value, as in [name: *]; quote it for a literal "*""#,
            ),
            (
                "spec.containers[].x",
                r#"invalid location "spec.containers[].x": expected a key field at 16, found ']'"#,
            ),
            (
                "spec.containers[:].x",
                r#"invalid location "spec.containers[:].x": expected a key field at 16, found ':'"#,
            ),
            (
                "spec.containers[:foo].x",
                r#"invalid location "spec.containers[:foo].x": expected a key field at 16, found ':'"#,
            ),
            (
                "spec.containers[foo].x",
                r#"invalid location "spec.containers[foo].x": expected ':' at 19, found ']'"#,
            ),
            (
                "spec.containers[name: ].x",
                r#"invalid location "spec.containers[name: ].x": expected a key value or '*' at 22, found ']'"#,
            ),
            (
                r#"spec.containers[my key: "foo bar"]"#,
                r#"invalid location "spec.containers[my key: \"foo bar\"]": expected ':' at 19, found 'key'"#,
            ),
            (
                "spec.containers[key: foo bar]",
                r#"invalid location "spec.containers[key: foo bar]": expected ']' at 25, found 'bar'"#,
            ),
            (
                "[foo: bar]",
                r#"invalid location "[foo: bar]": expected a field name at 0, found '['"#,
            ),
            (
                "spec.containers[foo: bar][bar: *]",
                r#"invalid location "spec.containers[foo: bar][bar: *]": expected '.' or end of location at 25, found '['"#,
            ),
            (
                "spec.[foo: bar]",
                r#"invalid location "spec.[foo: bar]": expected a field name at 5, found '['"#,
            ),
            (
                "spec.containers[123: opa]",
                r#"invalid location "spec.containers[123: opa]": name starts with a digit at 16: quote it, as in "123""#,
            ),
            (
                "012345",
                r#"invalid location "012345": name starts with a digit at 0: quote it, as in "012345""#,
            ),
            (
                "spec.123.bar",
                r#"invalid location "spec.123.bar": name starts with a digit at 5: quote it, as in "123""#,
            ),
            (
                "spec[bignum: 9223372036854775808]",
                r#"invalid location "spec[bignum: 9223372036854775808]": integer too large at 13: 9223372036854775808 is more than 9223372036854775807"#,
            ),
            (
                "spec[foo: 0x123]",
                r#"invalid location "spec[foo: 0x123]": expected ']' at 11, found 'x123'"#,
            ),
            (
                "spec[foo: 80abc]",
                r#"invalid location "spec[foo: 80abc]": expected ']' at 12, found 'abc'"#,
            ),
            (
                "spec.foo bar",
                r#"invalid location "spec.foo bar": expected '.' or end of location at 9, found 'bar'"#,
            ),
            (
                "spec\"foo\"",
                r#"invalid location "spec\"foo\"": expected '.' or end of location at 4, found a quoted string"#,
            ),
            (
                "][",
                r#"invalid location "][": expected a field name at 0, found ']'"#,
            ),
            (
                "[",
                r#"invalid location "[": expected a field name at 0, found '['"#,
            ),
            (
                ":",
                r#"invalid location ":": expected a field name at 0, found ':'"#,
            ),
            (
                "metadata.annotations.example.com/owner",
                r#"invalid location "metadata.annotations.example.com/owner": expected '.' or end of location at 32, found '/'; names with characters other than letters, digits, '_' and '-' must be quoted"#,
            ),
            (
                "spec.ünï",
                r#"invalid location "spec.ünï": expected a field name at 5, found 'ü'; names with characters other than letters, digits, '_' and '-' must be quoted"#,
            ),
            (
                "spec.\u{a0}x",
                r#"invalid location "spec.\u{a0}x": expected a field name at 5, found '\u{a0}'; names with characters other than letters, digits, '_' and '-' must be quoted"#,
            ),
        ];
        for (location, want) in cases {
            assert_eq!(message(location), want, "for {location:?}");
        }
    }

    fn not_in(values: &[Literal]) -> KeyValue {
        KeyValue::NotIn(KeySet::new(values.iter().cloned()).unwrap())
    }

    fn ls(value: &str) -> Literal {
        Literal::String(value.to_string())
    }

    #[test]
    fn exclusions_parse_to_a_set_in_canonical_order() {
        assert_eq!(
            nodes("spec.containers[name notin (istio-proxy, linkerd-proxy)].imagePullPolicy"),
            [
                f("spec"),
                f("containers"),
                l("name", not_in(&[ls("istio-proxy"), ls("linkerd-proxy")])),
                f("imagePullPolicy"),
            ]
        );
        // Values follow the key-value rules: all digits is an integer (0443
        // is 443), quoted is a string, a leading '-' makes an identifier,
        // and a quoted "*" is a literal name.
        assert_eq!(
            nodes(r#"a[port notin (0443, 80, "80", -1, '*', "")]"#),
            [
                f("a"),
                l(
                    "port",
                    not_in(&[
                        Literal::Integer(80),
                        Literal::Integer(443),
                        ls(""),
                        ls("*"),
                        ls("-1"),
                        ls("80"),
                    ])
                ),
            ]
        );
        // The order values are written in does not matter.
        assert_eq!(nodes("a[name notin (b, a)]"), nodes("a[name notin (a, b)]"));
        // `notin` and a key field named notin.
        assert_eq!(
            nodes("a[notin notin (notin)].b[notin: notin]"),
            [
                f("a"),
                l("notin", not_in(&[ls("notin")])),
                f("b"),
                l("notin", s("notin")),
            ]
        );
        assert_eq!(
            nodes("spec.containers[name: *].ports[containerPort notin (80, 443)].protocol"),
            [
                f("spec"),
                f("containers"),
                l("name", KeyValue::Glob),
                f("ports"),
                l(
                    "containerPort",
                    not_in(&[Literal::Integer(80), Literal::Integer(443)])
                ),
                f("protocol"),
            ]
        );
    }

    #[test]
    fn whitespace_may_surround_every_token_of_an_exclusion() {
        let want = [f("a"), l("k y", not_in(&[ls("a"), ls("b")])), f("c")];
        assert_eq!(nodes(r#"a["k y"notin(a,b)].c"#), want);
        assert_eq!(nodes("a [ \"k y\"\tnotin\n(\r\n a ,\tb\n) ] . c"), want);
    }

    #[test]
    fn exclusion_rejections_say_what_and_where() {
        let cases = [
            (
                "a[name notin ()]",
                r#"invalid location "a[name notin ()]": empty notin set at 14: list at least one value, as in [name notin (istio-proxy)]"#,
            ),
            (
                "a[name notin ( )]",
                r#"invalid location "a[name notin ( )]": empty notin set at 15: list at least one value, as in [name notin (istio-proxy)]"#,
            ),
            (
                "a[name notin (a, )]",
                r#"invalid location "a[name notin (a, )]": trailing ',' at 15: a value must follow it, or remove it"#,
            ),
            (
                "a[name notin (a,)]",
                r#"invalid location "a[name notin (a,)]": trailing ',' at 15: a value must follow it, or remove it"#,
            ),
            (
                "a[name notin (*)]",
                r#"invalid location "a[name notin (*)]": unexpected '*' at 14: a notin set lists values, not globs; quote it for a literal "*""#,
            ),
            (
                "a[name notin (a, *)]",
                r#"invalid location "a[name notin (a, *)]": unexpected '*' at 17: a notin set lists values, not globs; quote it for a literal "*""#,
            ),
            (
                "a[name notin a]",
                r#"invalid location "a[name notin a]": expected '(' at 13, found 'a'"#,
            ),
            (
                "a[name notin]",
                r#"invalid location "a[name notin]": expected '(' at 12, found ']'"#,
            ),
            (
                "a[name notin (a b)]",
                r#"invalid location "a[name notin (a b)]": expected ',' or ')' at 16, found 'b'"#,
            ),
            (
                "a[name notin (a]",
                r#"invalid location "a[name notin (a]": expected ',' or ')' at 15, found ']'"#,
            ),
            (
                "a[name notin (a)",
                r#"invalid location "a[name notin (a)": expected ']' at 16, found end of location"#,
            ),
            (
                "a[name notin (, a)]",
                r#"invalid location "a[name notin (, a)]": expected a value at 14, found ','"#,
            ),
            (
                "a[name notin (a,,b)]",
                r#"invalid location "a[name notin (a,,b)]": expected a value at 16, found ','"#,
            ),
            (
                "a[name notin ((a))]",
                r#"invalid location "a[name notin ((a))]": expected a value at 14, found '('"#,
            ),
            (
                "a[name notin (a/b)]",
                r#"invalid location "a[name notin (a/b)]": expected ',' or ')' at 15, found '/'; names with characters other than letters, digits, '_' and '-' must be quoted"#,
            ),
            (
                "a[name notin (a, a)]",
                r#"invalid location "a[name notin (a, a)]": duplicate value a at 17: it is already in the notin set"#,
            ),
            (
                r#"a[name notin ("a", a)]"#,
                r#"invalid location "a[name notin (\"a\", a)]": duplicate value a at 19: it is already in the notin set"#,
            ),
            (
                "a[port notin (80, 0080)]",
                r#"invalid location "a[port notin (80, 0080)]": duplicate value 80 at 18: it is already in the notin set"#,
            ),
            (
                "a[port notin (99999999999999999999)]",
                r#"invalid location "a[port notin (99999999999999999999)]": integer too large at 14: 99999999999999999999 is more than 9223372036854775807"#,
            ),
            (
                "a[name notin ('x)]",
                r#"invalid location "a[name notin ('x)]": unterminated string at 14: no closing ' for the ' opened here"#,
            ),
            (
                "a[name NotIn (a)]",
                r#"invalid location "a[name NotIn (a)]": unknown operator 'NotIn' at 7: write notin, in lower case"#,
            ),
            (
                "a[name in (a, b)]",
                r#"invalid location "a[name in (a, b)]": unknown operator 'in' at 7: a list selector takes ':' and a value, or notin and a set, as in [name notin (istio-proxy)]"#,
            ),
            (
                "a[name: notin (a)]",
                r#"invalid location "a[name: notin (a)]": unexpected ':' at 6: notin follows the key field directly, as in [name notin (istio-proxy)]"#,
            ),
            (
                "a[name notin (a)][x: *]",
                r#"invalid location "a[name notin (a)][x: *]": expected '.' or end of location at 17, found '['"#,
            ),
            (
                "a[name notin (a), (b)]",
                r#"invalid location "a[name notin (a), (b)]": expected ']' at 16, found ','; names with characters other than letters, digits, '_' and '-' must be quoted"#,
            ),
        ];
        for (location, want) in cases {
            assert_eq!(message(location), want, "for {location:?}");
        }
        // `notin` is a value like any other after ':'.
        assert_eq!(nodes("a[name: notin]"), [f("a"), l("name", s("notin"))]);
    }

    #[test]
    fn exclusion_errors_render_a_caret() {
        assert_eq!(
            parse("spec.containers[name notin (istio-proxy,)].image")
                .unwrap_err()
                .to_string(),
            concat!(
                "invalid location \"spec.containers[name notin (istio-proxy,)].image\": trailing ',' at 39: a value must follow it, or remove it\n",
                "  spec.containers[name notin (istio-proxy,)].image\n",
                "                                         ^",
            )
        );
    }

    #[test]
    fn the_rendering_puts_a_caret_under_the_fault() {
        let err = parse("spec.containers[name: foo.image").unwrap_err();
        assert_eq!(err.offset(), 25);
        assert_eq!(
            err.to_string(),
            concat!(
                "invalid location \"spec.containers[name: foo.image\": expected ']' at 25, found '.'\n",
                "  spec.containers[name: foo.image\n",
                "                           ^",
            )
        );
        // At the end of the location, the caret sits just past it.
        assert_eq!(
            parse("spec.containers[name: foo").unwrap_err().to_string(),
            concat!(
                "invalid location \"spec.containers[name: foo\": expected ']' at 25, found end of location\n",
                "  spec.containers[name: foo\n",
                "                           ^",
            )
        );
        // Tabs and newlines show as one space each, and the caret counts
        // characters, not bytes, so it stays under the fault.
        assert_eq!(
            parse("a.\"ü\"\n\t. *").unwrap_err().to_string(),
            concat!(
                "invalid location \"a.\\\"ü\\\"\\n\\t. *\": unexpected '*' at 10: a glob is only allowed as a list key value, as in [name: *]; quote it for a literal \"*\"\n",
                "  a.\"ü\"  . *\n",
                "           ^",
            )
        );
    }

    #[test]
    fn the_rendering_never_prints_control_characters() {
        assert_eq!(
            parse("\u{1b}[31m.x").unwrap_err().to_string(),
            concat!(
                "invalid location \"\\u{1b}[31m.x\": expected a field name at 0, found '\\u{1b}'; names with characters other than letters, digits, '_' and '-' must be quoted\n",
                "  \u{fffd}[31m.x\n",
                "  ^",
            )
        );
        assert_eq!(
            parse("\"a\u{feff}b\".*")
                .unwrap_err()
                .to_string()
                .lines()
                .nth(1),
            Some("  \"a\u{fffd}b\".*")
        );
    }

    #[test]
    fn errors_expose_offset_and_reason() {
        let err = parse("a[x: y").unwrap_err();
        assert_eq!(err.location(), "a[x: y");
        assert_eq!(err.offset(), 6);
        assert_eq!(
            err.reason(),
            &Reason::Expected {
                expected: Expected::CloseBracket,
                found: Found::End
            }
        );
        assert_eq!(
            err.reason().to_string(),
            "expected ']', found end of location"
        );
    }
}
