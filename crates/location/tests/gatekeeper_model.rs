//! Property tests: the parser accepts exactly what Gatekeeper's parser accepts
//! (plus sartor's `[key notin (...)]`, which Gatekeeper rejects), builds the
//! same nodes, never panics, and round-trips through `Display`.
//!
//! `gatekeeper` below is a model of Gatekeeper's scanner and parser
//! (open-policy-agent/gatekeeper pkg/mutation/path/token/scanner.go and
//! pkg/mutation/path/parser/parser.go), step for step: a token stream with one
//! token of lookahead. It is deliberately written the way Gatekeeper is, not
//! the way sartor's nom grammar is, so the two can disagree.

// Test code: a panic here is a failed test, not a crash on user input.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use proptest::prelude::*;
use sartor_location::{KeySet, KeyValue, ListSelector, Literal, Node, Path, Reason};

mod gatekeeper {
    use super::*;

    #[derive(Debug, Clone, PartialEq)]
    enum Token {
        Error,
        Eof,
        Ident(String),
        Int(String),
        LBracket,
        RBracket,
        Separator,
        Glob,
        Colon,
    }

    struct Scanner {
        chars: Vec<char>,
        pos: usize,
    }

    impl Scanner {
        fn ch(&self) -> Option<char> {
            self.chars.get(self.pos).copied()
        }

        fn next(&mut self) -> Token {
            while matches!(self.ch(), Some(' ' | '\t' | '\r' | '\n')) {
                self.pos += 1;
            }
            let Some(c) = self.ch() else {
                return Token::Eof;
            };
            if c.is_ascii_digit() {
                let start = self.pos;
                while self.ch().is_some_and(|c| c.is_ascii_digit()) {
                    self.pos += 1;
                }
                return Token::Int(self.chars[start..self.pos].iter().collect());
            }
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                let start = self.pos;
                while self
                    .ch()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                {
                    self.pos += 1;
                }
                return Token::Ident(self.chars[start..self.pos].iter().collect());
            }
            let token = match c {
                '.' => Token::Separator,
                '[' => Token::LBracket,
                ']' => Token::RBracket,
                '*' => Token::Glob,
                ':' => Token::Colon,
                '"' | '\'' => self.string(c),
                _ => Token::Error,
            };
            self.pos += 1;
            token
        }

        /// Leaves `pos` on the closing quote (or past the end).
        fn string(&mut self, quote: char) -> Token {
            let mut out = String::new();
            loop {
                self.pos += 1;
                match self.ch() {
                    Some(c) if c == quote => return Token::Ident(out),
                    Some('\\') => {
                        self.pos += 1;
                        if let Some(c) = self.ch() {
                            out.push(c);
                        }
                    }
                    Some(c) => out.push(c),
                    None => return Token::Error,
                }
            }
        }
    }

    struct Parser {
        scanner: Scanner,
        cur: Token,
        peek: Token,
    }

    impl Parser {
        fn advance(&mut self) {
            self.cur = std::mem::replace(&mut self.peek, self.scanner.next());
        }

        fn expect(&mut self, want: fn(&Token) -> bool) -> bool {
            if want(&self.peek) {
                self.advance();
                true
            } else {
                false
            }
        }

        fn list(&mut self) -> Option<Node> {
            if !self.expect(|t| matches!(t, Token::Ident(_))) {
                return None;
            }
            let Token::Ident(key_field) = self.cur.clone() else {
                return None;
            };
            if !self.expect(|t| *t == Token::Colon) {
                return None;
            }
            let key_value = if self.expect(|t| *t == Token::Glob) {
                KeyValue::Glob
            } else if self.expect(|t| matches!(t, Token::Ident(_))) {
                let Token::Ident(v) = self.cur.clone() else {
                    return None;
                };
                KeyValue::String(v)
            } else if self.expect(|t| matches!(t, Token::Int(_))) {
                let Token::Int(digits) = self.cur.clone() else {
                    return None;
                };
                // parseInt64: decimal; overflow is noticed only when the
                // (wrapping) result turns negative.
                let mut n: i64 = 0;
                for d in digits.chars() {
                    n = n.wrapping_mul(10).wrapping_add(i64::from(d as u8 - b'0'));
                    if n < 0 {
                        return None;
                    }
                }
                KeyValue::Integer(n)
            } else {
                return None;
            };
            if !self.expect(|t| *t == Token::RBracket) {
                return None;
            }
            Some(Node::List(ListSelector {
                key_field,
                key_value,
            }))
        }
    }

    /// `Ok(nodes)` where Gatekeeper's Parse succeeds (an empty input gives no nodes).
    pub fn parse(input: &str) -> Result<Vec<Node>, ()> {
        let mut scanner = Scanner {
            chars: input.chars().collect(),
            pos: 0,
        };
        let cur = scanner.next();
        let peek = scanner.next();
        let mut p = Parser { scanner, cur, peek };
        let mut nodes = Vec::new();
        while let Token::Ident(name) = p.cur.clone() {
            nodes.push(Node::Field(name));
            if p.expect(|t| *t == Token::LBracket) {
                nodes.push(p.list().ok_or(())?);
            }
            if p.expect(|t| *t == Token::Separator) {
                if p.peek == Token::Eof {
                    return Err(());
                }
                p.advance();
            } else if !p.expect(|t| *t == Token::Eof) {
                return Err(());
            }
        }
        if p.cur != Token::Eof {
            return Err(());
        }
        Ok(nodes)
    }
}

/// Tokens, near-tokens and troublemakers, glued into candidate locations.
fn piece() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "spec",
        "containers",
        "a1",
        "-x",
        "_",
        "0",
        "80",
        "0080",
        "99999999999999999999",
        "9223372036854775807",
        "9223372036854775808",
        ".",
        ".",
        ".",
        "[",
        "]",
        ":",
        "*",
        " ",
        "\t",
        "\n",
        "\"q\"",
        "'s p'",
        "\"\"",
        "\"*\"",
        "'\\''",
        "\"",
        "'",
        "\\",
        "/",
        "é",
        "[name: *]",
        "[name: foo]",
        "[port: 80]",
        "0x1",
        "notin",
        "NotIn",
        " notin ",
        "(",
        ")",
        ",",
        ", ",
        "[name notin (a, 80)]",
        "[port notin ('x',0080)]",
    ])
}

fn candidate() -> impl Strategy<Value = String> {
    prop::collection::vec(piece(), 0..10).prop_map(|pieces| pieces.concat())
}

/// Any name: mostly identifier-like, sometimes any Unicode at all.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[A-Za-z_-][A-Za-z0-9_-]{0,8}",
        1 => "[0-9]{1,3}",
        2 => any::<String>(),
        1 => "[ .\\[\\]:*'\"\\\\\t\n\r/]{0,4}",
    ]
}

fn literal() -> impl Strategy<Value = Literal> {
    prop_oneof![
        name().prop_map(Literal::String),
        (0..=i64::MAX).prop_map(Literal::Integer),
    ]
}

fn key_value() -> impl Strategy<Value = KeyValue> {
    prop_oneof![
        Just(KeyValue::Glob),
        name().prop_map(KeyValue::String),
        (0..=i64::MAX).prop_map(KeyValue::Integer),
        prop::collection::btree_set(literal(), 1..4)
            .prop_map(|values| KeyValue::NotIn(KeySet::new(values).expect("distinct, not empty"))),
    ]
}

fn path() -> impl Strategy<Value = Path> {
    let segment = (name(), prop::option::of((name(), key_value())));
    prop::collection::vec(segment, 1..6).prop_map(|segments| {
        let mut nodes = Vec::new();
        for (field, list) in segments {
            nodes.push(Node::Field(field));
            if let Some((key_field, key_value)) = list {
                nodes.push(Node::List(ListSelector {
                    key_field,
                    key_value,
                }));
            }
        }
        Path::from_nodes(nodes).expect("segments always start with a field")
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn agrees_with_gatekeeper(input in candidate()) {
        let ours = Path::parse(&input);
        match gatekeeper::parse(&input) {
            Ok(nodes) if nodes.is_empty() => {
                let err = ours.expect_err("an empty path is an error in sartor");
                prop_assert_eq!(err.reason(), &Reason::Empty);
            }
            // The one other deliberate difference: integers Gatekeeper wraps around.
            Ok(_) if ours.as_ref().is_err_and(|e| matches!(e.reason(), Reason::IntegerTooLarge { .. })) => {}
            Ok(nodes) => {
                let path = ours.map_err(|e| e.to_string());
                prop_assert_eq!(path.map(|p| p.nodes().to_vec()), Ok(nodes));
            }
            // sartor's one extension: an exclusion, which Gatekeeper rejects.
            Err(()) => prop_assert!(
                ours.as_ref().map_or(true, Path::uses_exclusion),
                "accepted {:?} which Gatekeeper rejects", input
            ),
        }
    }

    #[test]
    fn display_round_trips(path in path()) {
        let shown = path.to_string();
        prop_assert_eq!(Path::parse(&shown).map_err(|e| e.to_string()), Ok(path));
    }

    #[test]
    fn display_is_canonical(input in candidate()) {
        if let Ok(path) = Path::parse(&input) {
            let shown = path.to_string();
            let again = Path::parse(&shown).expect("canonical form parses");
            prop_assert_eq!(again.to_string(), shown);
            prop_assert_eq!(again, path);
        }
    }

    #[test]
    fn never_panics_and_points_inside(input in any::<String>()) {
        if let Err(err) = Path::parse(&input) {
            prop_assert!(err.offset() <= input.len());
            prop_assert!(input.is_char_boundary(err.offset()));
            let rendered = err.to_string();
            prop_assert!(rendered.ends_with('^'));
            prop_assert_eq!(rendered.lines().count(), 3);
        }
    }

    #[test]
    fn never_panics_on_near_misses(input in candidate()) {
        if let Err(err) = Path::parse(&input) {
            prop_assert!(err.offset() <= input.len());
            prop_assert!(input.is_char_boundary(err.offset()));
        }
    }
}

#[test]
fn gatekeeper_rejects_every_exclusion() {
    for input in [
        "spec.containers[name notin (istio-proxy)].image",
        "a[port notin (80, \"80\")]",
        "a[notin notin (notin)]",
    ] {
        assert_eq!(gatekeeper::parse(input), Err(()), "{input}");
        assert!(Path::parse(input).unwrap().uses_exclusion(), "{input}");
    }
}

#[test]
fn gatekeeper_wraps_some_huge_integers_where_sartor_refuses() {
    let input = "a[port: 18446744073709551616]";
    assert_eq!(
        gatekeeper::parse(input),
        Ok(vec![
            Node::Field("a".into()),
            Node::List(ListSelector {
                key_field: "port".into(),
                key_value: KeyValue::Integer(0)
            }),
        ])
    );
    let err = Path::parse(input).unwrap_err();
    assert!(
        matches!(err.reason(), Reason::IntegerTooLarge { .. }),
        "{err}"
    );
}
