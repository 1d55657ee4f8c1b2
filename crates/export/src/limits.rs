//! What kube-apiserver refuses in a MutatingAdmissionPolicy before it runs:
//! an export checks its own expressions and policy against these, so that
//! a set that cannot be stored is refused at export time, with the reason,
//! and never surprises at `kubectl apply`.
//!
//! Measured on kube-apiserver v1.37.2 (the cluster suite's
//! `export::the_api_servers_limits_are_checked_at_export` puts the same
//! expressions to it):
//! - an expression of more than 100,000 code points: "expression code
//!   point size exceeds limit";
//! - an expression nested 250 deep (parentheses, list and map literals,
//!   `a ? b : c ? ...`, a chain of field selections or indexes): "expression
//!   recursion limit exceeded: 250" or "max recursion depth exceeded";
//! - a stored object over etcd's 1.5 MiB request limit ("etcdserver:
//!   request is too large": a 1,442,573-byte policy was stored, a
//!   1,803,133-byte one was not).
//!
//! The expressions' estimated CEL cost is not checked when a policy is
//! stored (`object` is untyped there): a cost past the budget fails at
//! admission, for the object at hand, under the policy's `failurePolicy`.

/// The most code points an expression may have.
pub const MAX_CODE_POINTS: usize = 100_000;

/// The nesting at which the API server's CEL parser stops.
pub const MAX_NESTING: usize = 250;

/// The most bytes of JSON an exported policy may take: etcd's request limit
/// (1.5 MiB) less room for what the API server adds (managedFields, status).
pub const MAX_POLICY_BYTES: usize = 1_400_000;

/// Why the API server would refuse an expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Excess {
    /// More than [`MAX_CODE_POINTS`].
    Length(usize),
    /// Nested [`MAX_NESTING`] deep or more, by [`nesting`]'s count.
    Nesting(usize),
}

/// Whether the API server's CEL parser takes `expression`: `Err` with what
/// it would refuse. Conservative: [`nesting`] counts at least what the
/// parser counts.
///
/// # Errors
/// The excess, when the parser would refuse it.
pub fn check(expression: &str) -> Result<(), Excess> {
    let length = expression.chars().count();
    if length > MAX_CODE_POINTS {
        return Err(Excess::Length(length));
    }
    let depth = nesting(expression);
    if depth >= MAX_NESTING {
        return Err(Excess::Nesting(depth));
    }
    Ok(())
}

/// How deep `expression` nests, counted so as to reach at least the CEL
/// parser's recursion depth: one level per open parenthesis, list or map;
/// one per `?` of a frame (a ternary's branches nest, `a ? b : c ? d : e`
/// the more so); one per field selection or index of a chain
/// (`object.spec.containers` is two).
pub fn nesting(expression: &str) -> usize {
    /// One open bracket (or the whole expression): the ternaries and the
    /// selection chain inside it so far.
    #[derive(Default)]
    struct Frame {
        ternaries: usize,
        chain: usize,
    }
    let mut frames = vec![Frame::default()];
    let mut deepest = 0;
    let mut chars = expression.chars().peekable();
    // Whether the last token ends an operand, so that `[` indexes it and
    // `.` selects from it.
    let mut after_operand = false;
    while let Some(c) = chars.next() {
        match c {
            '"' | '\'' => {
                // A string literal: nothing inside nests.
                while let Some(inner) = chars.next() {
                    if inner == '\\' {
                        chars.next();
                    } else if inner == c {
                        break;
                    }
                }
                after_operand = true;
            }
            '(' | '[' | '{' => {
                if let Some(frame) = frames.last_mut() {
                    if c == '[' && after_operand {
                        // An index continues the chain.
                        frame.chain += 1;
                    } else if !after_operand {
                        frame.chain = 0;
                    }
                }
                frames.push(Frame::default());
                after_operand = false;
            }
            ')' | ']' | '}' => {
                if frames.len() > 1 {
                    frames.pop();
                }
                after_operand = true;
            }
            '.' if after_operand => {
                if let Some(frame) = frames.last_mut() {
                    frame.chain += 1;
                }
                after_operand = false;
            }
            '?' => {
                if let Some(frame) = frames.last_mut() {
                    frame.ternaries += 1;
                    frame.chain = 0;
                }
                after_operand = false;
            }
            c if c.is_alphanumeric() || c == '_' => after_operand = true,
            c if c.is_whitespace() => {}
            _ => {
                // An operator: the next operand starts a new chain.
                if let Some(frame) = frames.last_mut() {
                    frame.chain = 0;
                }
                after_operand = false;
            }
        }
        let depth = frames
            .iter()
            .map(|frame| 1 + frame.ternaries + frame.chain)
            .sum::<usize>();
        deepest = deepest.max(depth.saturating_sub(1));
    }
    deepest
}

/// A patch for the shapes' expressions to return.
const PATCH: &str = r#"[JSONPatch{op: "test", path: "/kind", value: "Pod"}]"#;

/// One expression of each shape the parser's limit counts, nested `n`
/// deep, by name: what the limit was measured with, and what the cluster
/// suite puts to the API server to check [`check`] against it.
pub fn shapes(n: usize) -> Vec<(&'static str, String)> {
    vec![
        (
            "parentheses",
            format!("{}true{} ? {PATCH} : []", "(".repeat(n), ")".repeat(n)),
        ),
        (
            "maps",
            format!(
                r#"[JSONPatch{{op: "add", path: "/metadata/annotations", value: {}"x"{}}}]"#,
                r#"{"a": "#.repeat(n),
                "}".repeat(n)
            ),
        ),
        ("ternaries", format!("{}{PATCH}", "true ? [] : ".repeat(n))),
        (
            "selections",
            format!("has(object{}) ? {PATCH} : []", ".a".repeat(n)),
        ),
        (
            "indexes",
            format!(
                r#"has(object.metadata) && object{} == "x" ? {PATCH} : []"#,
                r#"["a"]"#.repeat(n)
            ),
        ),
        (
            "a long string",
            format!(r#""{}" == "" ? {PATCH} : []"#, "x".repeat(n * 400)),
        ),
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn what_the_api_server_took_passes_and_one_deeper_does_not() {
        // (shape, the deepest the API server took)
        let took = [
            ("parentheses", 249),
            ("maps", 247),
            ("ternaries", 247),
            ("selections", 249),
            ("indexes", 248),
        ];
        for (name, deepest) in took {
            let fits = shapes(deepest)
                .into_iter()
                .find(|(n, _)| *n == name)
                .unwrap()
                .1;
            let over = shapes(deepest + 1)
                .into_iter()
                .find(|(n, _)| *n == name)
                .unwrap()
                .1;
            assert!(matches!(check(&over), Err(Excess::Nesting(_))), "{name} +1");
            // Selections are counted one deeper than the parser counts them.
            if name != "selections" {
                assert_eq!(check(&fits), Ok(()), "{name}: nesting {}", nesting(&fits));
            }
        }
    }

    #[test]
    fn strings_do_not_nest_and_long_ones_count_by_code_point() {
        assert_eq!(nesting(r#""((((" == "[[" ? [] : []"#), 2);
        let fits = format!(r#""{}" == "" ? [] : []"#, "é".repeat(MAX_CODE_POINTS - 18));
        assert_eq!(fits.chars().count(), MAX_CODE_POINTS);
        assert_eq!(check(&fits), Ok(()));
        let over = format!("{fits} ");
        assert_eq!(check(&over), Err(Excess::Length(MAX_CODE_POINTS + 1)));
    }
}
