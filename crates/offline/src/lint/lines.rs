//! Where in its file a lint finding points: the line of the field its
//! message names (`spec.location: ...`), else the first line of its
//! document (or `List` item), or the line a YAML error names. The loader
//! numbers documents; CI annotations and the playground mark lines.

use std::collections::HashMap;

use granit_parser::{Event, Parser};

/// The lines of one YAML text: for each document, in the order the loader
/// numbers them (from 1, empty ones included), where it starts and where
/// each of its fields is.
#[derive(Debug, Default)]
pub struct Lines {
    documents: Vec<Document>,
    /// The text's last line (a text ending in a newline has an empty one).
    last: usize,
}

/// One document's lines.
#[derive(Debug, Default)]
struct Document {
    /// The line of its content (after any `---`).
    start: usize,
    /// By path (`spec.location`, `spec.applyTo[0].kinds`): the line of the
    /// key, or of the item's start for a list item.
    fields: HashMap<String, usize>,
}

/// One level of the walk: a mapping (waiting for a key, or holding the key
/// whose value comes next) or a sequence (and its next index).
enum Level {
    Mapping { path: String, key: Option<String> },
    Sequence { path: String, next: usize },
}

impl Lines {
    /// The lines of `text`; a text that stops parsing keeps the documents
    /// and fields found before the error.
    pub fn of(text: &str) -> Lines {
        let mut lines = Lines {
            last: text.matches('\n').count() + 1,
            ..Lines::default()
        };
        let mut stack: Vec<Level> = Vec::new();
        for event in Parser::new_from_str(text) {
            let Ok((event, span)) = event else { break };
            let line = span.start.line();
            match event {
                Event::DocumentStart(..) => {
                    stack.clear();
                    // Where it starts until its content says better.
                    lines.documents.push(Document {
                        start: line,
                        fields: HashMap::new(),
                    });
                }
                Event::Scalar(value, ..) => {
                    // A key, or a value (which ends its key's entry).
                    if let Some(Level::Mapping { path, key }) = stack.last_mut()
                        && key.is_none()
                    {
                        let at = join(path, &value);
                        lines.field(at, line);
                        *key = Some(value.into_owned());
                    } else {
                        lines.node(&mut stack, line);
                    }
                }
                Event::Alias(_) => {
                    lines.node(&mut stack, line);
                }
                Event::MappingStart(..) => {
                    let path = lines.node(&mut stack, line);
                    stack.push(Level::Mapping { path, key: None });
                }
                Event::SequenceStart(..) => {
                    let path = lines.node(&mut stack, line);
                    stack.push(Level::Sequence { path, next: 0 });
                }
                Event::MappingEnd | Event::SequenceEnd => {
                    stack.pop();
                    if let Some(Level::Mapping { key, .. }) = stack.last_mut() {
                        *key = None;
                    }
                }
                _ => {}
            }
        }
        lines
    }

    /// Records a value node at `line` in the current level, and returns
    /// its path: a document's root starts it, a list item gets its index,
    /// a mapping value ends its key's entry.
    fn node(&mut self, stack: &mut [Level], line: usize) -> String {
        match stack.last_mut() {
            None => {
                if let Some(document) = self.documents.last_mut() {
                    document.start = line;
                }
                String::new()
            }
            Some(Level::Sequence { path, next }) => {
                let at = format!("{path}[{next}]");
                *next += 1;
                self.field(at.clone(), line);
                at
            }
            Some(Level::Mapping { path, key }) => {
                let at = join(path, key.as_deref().unwrap_or_default());
                *key = None;
                at
            }
        }
    }

    fn field(&mut self, path: String, line: usize) {
        if let Some(document) = self.documents.last_mut() {
            document.fields.entry(path).or_insert(line);
        }
    }

    /// The line a finding about `document` (and `List` item `item`, both
    /// from 1) with `message` points at ([`Lines::line`], or the line an
    /// invalid YAML error names), never past the text's last line (a YAML
    /// error at the end of the text names the line after it).
    pub fn finding(
        &self,
        document: Option<usize>,
        item: Option<usize>,
        message: &str,
    ) -> Option<usize> {
        yaml_error_line(message)
            .or_else(|| self.line(document?, item, message))
            .map(|line| line.min(self.last))
    }

    /// The line a finding about document `document` (and `List` item
    /// `item`, both from 1) points at: that of the field `message` begins
    /// with, or of its nearest enclosing field, else the item's or the
    /// document's first line.
    pub fn line(&self, document: usize, item: Option<usize>, message: &str) -> Option<usize> {
        let found = self.documents.get(document.checked_sub(1)?)?;
        let base = match item {
            Some(item) => format!("items[{}]", item.checked_sub(1)?),
            None => String::new(),
        };
        if let Some(field) = field_of(message) {
            let mut path = join(&base, field);
            loop {
                if let Some(line) = found.fields.get(&path) {
                    return Some(*line);
                }
                match path.rfind(['.', '[']) {
                    Some(end) if end > base.len() => path.truncate(end),
                    _ => break,
                }
            }
        }
        match item {
            Some(_) => found.fields.get(&base).copied(),
            None => Some(found.start),
        }
        .filter(|line| *line > 0)
    }
}

/// The line a YAML error names (`... at line 3 column 5`), which the
/// loader reports for a text that does not parse.
fn yaml_error_line(message: &str) -> Option<usize> {
    let (_, after) = message.split_once("invalid YAML: ")?;
    let (_, at) = after.rsplit_once(" at line ")?;
    let digits: String = at.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// `path.key`, or `key` at the root.
fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The field a message begins with (`spec.location: invalid ...`): a word
/// of letters, digits, `.`, `_`, `-` and `[n]` before `: `.
fn field_of(message: &str) -> Option<&str> {
    let (field, _) = message.split_once(": ")?;
    let path_like = !field.is_empty()
        && field
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-[]".contains(c));
    path_like.then_some(field)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const TEXT: &str = "\
# two mutators
apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata:
  name: ok
spec:
  applyTo:
  - groups: [\"\"]
    kinds: [Pod]
  location: spec.dnsPolicy
---
---
apiVersion: v1
kind: List
items:
- kind: Assign
  spec:
    location: x
- kind: Assign
  spec: {location: y,
    parameters: {assign: {value: 3}}}
";

    #[test]
    fn a_finding_points_at_its_field_or_its_document() {
        let lines = Lines::of(TEXT);
        assert_eq!(lines.line(1, None, "spec.location: invalid"), Some(10));
        assert_eq!(lines.line(1, None, "spec.applyTo[0].kinds: x"), Some(9));
        assert_eq!(lines.line(1, None, "spec.applyTo[0].versions: x"), Some(8));
        assert_eq!(lines.line(1, None, "spec.match.scope: x"), Some(6));
        assert_eq!(lines.line(1, None, "metadata.name: x"), Some(5));
        assert_eq!(lines.line(1, None, "it never applies"), Some(2));
        // An empty document is at its `---`.
        assert_eq!(lines.line(2, None, "anything"), Some(11));
        assert_eq!(lines.line(3, Some(1), "spec.location: x"), Some(18));
        assert_eq!(lines.line(3, Some(2), "spec.location: y"), Some(20));
        assert_eq!(
            lines.line(3, Some(2), "spec.parameters.assign.value: 3"),
            Some(21)
        );
        assert_eq!(lines.line(3, Some(2), "no field"), Some(19));
        assert_eq!(lines.line(4, None, "x: y"), None);
        assert_eq!(lines.line(0, None, "x: y"), None);
    }

    #[test]
    fn a_yaml_error_is_at_its_line_and_never_past_the_text() {
        let lines = Lines::of("a: 1\nb: [\n");
        let error = "invalid YAML: did not find expected node content at line 3 column 1, while parsing a flow node (the rest of the file is not read)";
        assert_eq!(lines.finding(Some(1), None, error), Some(3));
        let lines = Lines::of("a: 1\nb: [");
        assert_eq!(lines.finding(Some(1), None, error), Some(2));
        assert_eq!(lines.finding(None, None, "cannot read: denied"), None);
    }

    #[test]
    fn a_text_that_stops_parsing_keeps_what_came_before() {
        let lines = Lines::of("a: 1\n---\nb: [\n");
        assert_eq!(lines.line(1, None, "a: x"), Some(1));
        assert_eq!(lines.line(1, None, "nothing here"), Some(1));
        // A control character stops the parser before any content.
        let lines = Lines::of("\u{1}");
        assert!(
            lines.line(1, None, "x").is_none_or(|line| line == 1),
            "{:?}",
            lines.line(1, None, "x")
        );
    }
}
