//! `sartor test`'s results, and their machine-readable forms: JUnit XML (the
//! Ant/Jenkins flavour every CI test reporter reads: `testsuites` >
//! `testsuite` > `testcase` with `failure` or `error`) and JSON.

use std::fmt::Write as _;

use serde_json::{Value, json};

/// What one suite file gave.
#[derive(Debug, Clone, PartialEq)]
pub struct SuiteResult {
    /// The suite file, as given or found.
    pub file: String,
    /// Why the suite could not run (unreadable, malformed, invalid mutators);
    /// empty when its cases ran.
    pub problems: Vec<String>,
    /// Its cases, in order (those `--run` selected).
    pub cases: Vec<CaseResult>,
}

/// What one case gave.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseResult {
    /// The case's name.
    pub name: String,
    /// Why it failed (a diff, or the error that was or was not expected);
    /// `None` when it passed.
    pub failure: Option<String>,
    /// How long it took.
    pub seconds: f64,
}

/// The results as one JUnit XML document, its `testsuites` named `name`
/// (the command: `sartor test`, `sartor audit`). A suite that could not run
/// is a `testsuite` with one `testcase` named `(suite)` holding an `error`,
/// since the schema has no error element on the suite itself.
pub fn junit(name: &str, results: &[SuiteResult]) -> String {
    let count = |f: &dyn Fn(&SuiteResult) -> usize| results.iter().map(f).sum::<usize>();
    let tests = count(&|r| r.cases.len().max(usize::from(!r.problems.is_empty())));
    let failed = count(&failures);
    let errors = count(&|r| usize::from(!r.problems.is_empty()));
    let time = results.iter().fold(0.0, |sum, r| sum + seconds(r));
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        xml,
        "<testsuites name=\"{}\" tests=\"{tests}\" failures=\"{failed}\" errors=\"{errors}\" time=\"{time:.6}\">",
        escape_attribute(name)
    );
    for result in results {
        let file = escape_attribute(&result.file);
        let problems = !result.problems.is_empty();
        let _ = writeln!(
            xml,
            "  <testsuite name=\"{file}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"0\" time=\"{:.6}\">",
            result.cases.len().max(usize::from(problems)),
            failures(result),
            usize::from(problems),
            seconds(result),
        );
        if problems {
            let message = result.problems.join("\n");
            let _ = writeln!(
                xml,
                "    <testcase name=\"(suite)\" classname=\"{file}\" time=\"0\">\n      <error message=\"{}\" type=\"invalid suite\">{}</error>\n    </testcase>",
                escape_attribute(first_line(&message)),
                escape(&message),
            );
        }
        for case in &result.cases {
            let name = escape_attribute(&case.name);
            match &case.failure {
                None => {
                    let _ = writeln!(
                        xml,
                        "    <testcase name=\"{name}\" classname=\"{file}\" time=\"{:.6}\"/>",
                        case.seconds
                    );
                }
                Some(report) => {
                    let _ = writeln!(
                        xml,
                        "    <testcase name=\"{name}\" classname=\"{file}\" time=\"{:.6}\">\n      <failure message=\"{}\" type=\"mismatch\">{}</failure>\n    </testcase>",
                        case.seconds,
                        escape_attribute(first_line(report)),
                        escape(report),
                    );
                }
            }
        }
        xml.push_str("  </testsuite>\n");
    }
    xml.push_str("</testsuites>\n");
    xml
}

/// The results as JSON: the same content as [`junit`].
pub fn json(results: &[SuiteResult]) -> Value {
    let suites: Vec<Value> = results
        .iter()
        .map(|result| {
            let cases: Vec<Value> = result
                .cases
                .iter()
                .map(|case| {
                    json!({
                        "name": case.name,
                        "outcome": if case.failure.is_some() { "failed" } else { "passed" },
                        "failure": case.failure,
                        "seconds": case.seconds,
                    })
                })
                .collect();
            json!({"file": result.file, "problems": result.problems, "cases": cases})
        })
        .collect();
    let passed: usize = results.iter().map(|r| r.cases.len() - failures(r)).sum();
    json!({
        "passed": passed,
        "failed": results.iter().map(failures).sum::<usize>(),
        "invalidSuites": results.iter().filter(|r| !r.problems.is_empty()).count(),
        "suites": suites,
    })
}

fn failures(result: &SuiteResult) -> usize {
    result.cases.iter().filter(|c| c.failure.is_some()).count()
}

/// The cases' time; 0 (not the empty sum's -0) for none.
fn seconds(result: &SuiteResult) -> f64 {
    result.cases.iter().fold(0.0, |sum, c| sum + c.seconds)
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

/// `text` for XML element content: the five special characters escaped, and
/// the characters XML 1.0 cannot hold at all dropped (controls other than
/// tab, newline and carriage return, such as a colour escape; U+FFFE and
/// U+FFFF).
fn escape(text: &str) -> String {
    escape_as(text, false)
}

/// `text` for an XML attribute: as [`escape`], with tab, newline and
/// carriage return as character references (a parser would turn them into
/// spaces).
fn escape_attribute(text: &str) -> String {
    escape_as(text, true)
}

fn escape_as(text: &str, attribute: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' if attribute => out.push_str("&#9;"),
            '\n' if attribute => out.push_str("&#10;"),
            '\r' if attribute => out.push_str("&#13;"),
            '\t' | '\n' | '\r' => out.push(c),
            '\u{fffe}' | '\u{ffff}' => {}
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn results() -> Vec<SuiteResult> {
        vec![
            SuiteResult {
                file: "t/a.sartor-test.yaml".into(),
                problems: vec![],
                cases: vec![
                    CaseResult {
                        name: "pods <pull> & \"mirror\"\tx\u{ffff}".into(),
                        failure: None,
                        seconds: 0.25,
                    },
                    CaseResult {
                        name: "labels".into(),
                        failure: Some("--- expected #1\n+++ got #1\n-  a: 1\n+  a: 2\n".into()),
                        seconds: 0.5,
                    },
                ],
            },
            SuiteResult {
                file: "t/b.sartor-test.yaml".into(),
                problems: vec![
                    "invalid suite: cases: missing field `cases` at line 1 column 1\u{1b}".into(),
                ],
                cases: vec![],
            },
        ]
    }

    #[test]
    fn junit_holds_every_case_failure_and_invalid_suite() {
        assert_eq!(
            junit("sartor test", &results()),
            r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="sartor test" tests="3" failures="1" errors="1" time="0.750000">
  <testsuite name="t/a.sartor-test.yaml" tests="2" failures="1" errors="0" skipped="0" time="0.750000">
    <testcase name="pods &lt;pull&gt; &amp; &quot;mirror&quot;&#9;x" classname="t/a.sartor-test.yaml" time="0.250000"/>
    <testcase name="labels" classname="t/a.sartor-test.yaml" time="0.500000">
      <failure message="--- expected #1" type="mismatch">--- expected #1
+++ got #1
-  a: 1
+  a: 2
</failure>
    </testcase>
  </testsuite>
  <testsuite name="t/b.sartor-test.yaml" tests="1" failures="0" errors="1" skipped="0" time="0.000000">
    <testcase name="(suite)" classname="t/b.sartor-test.yaml" time="0">
      <error message="invalid suite: cases: missing field `cases` at line 1 column 1" type="invalid suite">invalid suite: cases: missing field `cases` at line 1 column 1</error>
    </testcase>
  </testsuite>
</testsuites>
"#
        );
    }

    #[test]
    fn json_holds_the_same() {
        assert_eq!(
            json(&results()),
            json!({
                "passed": 1,
                "failed": 1,
                "invalidSuites": 1,
                "suites": [
                    {"file": "t/a.sartor-test.yaml", "problems": [], "cases": [
                        {"name": "pods <pull> & \"mirror\"\tx\u{ffff}", "outcome": "passed", "failure": null, "seconds": 0.25},
                        {"name": "labels", "outcome": "failed", "failure": "--- expected #1\n+++ got #1\n-  a: 1\n+  a: 2\n", "seconds": 0.5},
                    ]},
                    {"file": "t/b.sartor-test.yaml", "problems": ["invalid suite: cases: missing field `cases` at line 1 column 1\u{1b}"], "cases": []},
                ],
            })
        );
    }
}
