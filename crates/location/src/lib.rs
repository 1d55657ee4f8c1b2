//! Gatekeeper's mutation `location` syntax: parse a location into a typed
//! [`Path`], print it back in canonical form, and check pathTests against it.
//!
//! ```text
//!   "spec.containers[name: *].imagePullPolicy"
//!        │ Path::parse                       ▲ Display (canonical)
//!        ▼                                   │
//!   Path [Field spec, Field containers, List [name: *], Field imagePullPolicy]
//!        │ PathTests::new(&location, &tests)
//!        ▼
//!   depth -> MustExist | MustNotExist, for the engine's walk
//! ```
//!
//! The syntax, exactly as Gatekeeper's parser accepts it:
//! - fields separated by `.`; a field may carry one keyed-list selector
//!   `[key: value]`, where value is a string, an integer or the glob `*`;
//! - bare names are `[A-Za-z0-9_-]+` not starting with a digit; anything else is
//!   quoted with `'` or `"`, inside which `\` keeps the next character literally;
//! - an unquoted all-digit value is an integer (`0080` is 80), a quoted one is a
//!   string, so `[port: "80"]` never selects `port: 80`;
//! - spaces, tabs and newlines may surround any token.
//!
//! sartor adds one selector Gatekeeper's parser rejects, the exclusion
//! `[key notin (v1, v2)]`: every element `[key: *]` selects except those whose
//! key is one of the values ([`KeyValue::NotIn`], [`Path::uses_exclusion`]).
//!
//! Deliberate differences: an empty or blank location is an error here
//! (Gatekeeper parses it to an empty path and leaves rejecting it to each
//! caller), and so is an integer above `i64::MAX` (Gatekeeper wraps some of them
//! around to small numbers).
//!
//! ```
//! use sartor_location::Path;
//!
//! let path: Path = "spec . containers[ name : 'my container' ].image".parse()?;
//! assert_eq!(path.to_string(), r#"spec.containers[name: "my container"].image"#);
//!
//! let err = Path::parse("spec.containers[name: foo").unwrap_err();
//! assert_eq!(err.offset(), 25);
//! assert_eq!(
//!     err.to_string(),
//!     "invalid location \"spec.containers[name: foo\": expected ']' at 25, found end of location\n\
//!      \x20 spec.containers[name: foo\n\
//!      \x20                          ^"
//! );
//! # Ok::<(), sartor_location::ParseError>(())
//! ```
//!
//! Parsing a five-field location with a keyed list takes about a quarter of a
//! microsecond; see the crate README for figures and how to reproduce them.

mod error;
mod parser;
mod path;
mod tester;

pub use error::{Expected, Found, ParseError, Reason, Result};
pub use path::{KeySet, KeySetError, KeyValue, ListSelector, Literal, Node, Path, ShapeError};
pub use tester::{Condition, PathTest, PathTestError, PathTests, UnknownCondition};
