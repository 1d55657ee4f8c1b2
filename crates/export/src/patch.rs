//! A mutator's JSON patch as CEL. An Assign's (an AssignImage's, a
//! ModifySet's) goes node by node of its location, with the engine's rules
//! for what is missing: a missing field is added with the rest of the path
//! built below it (the engine creates parents), a keyed list element
//! `[k: v]` that is not there is appended with its key, a glob `[k: *]`
//! sets the field in every element there is and never creates one. An
//! AssignMetadata's adds its label or annotation when it is missing.
//!
//! ```text
//!  spec . containers [name: *] . securityContext . readOnlyRootFilesystem
//!  has(object.spec) ? (has(object.spec.containers) ?
//!      lists.range(size(object.spec.containers)).map(g,
//!        <the patches for object.spec.containers[g] at /spec/containers/<g>>).flatten() : [])
//!    : []                                  (a glob creates nothing)
//! ```
//!
//! A glob (and `notin`, filtered) visits the elements by position, as the
//! engine does, so an element without its key or with another's is visited
//! as itself; a glob inside a glob counts `g1`, `g2`, ... A keyed element's
//! index comes from its key: `list.map(x, x.k).indexOf(v)` (Kubernetes' CEL
//! `lists` library). A ModifySet never writes back the elements there (the
//! API server cannot turn a built-in kind's typed elements into JSON): a
//! merge appends at `/-`, a prune removes by index, last first.

use sartor_engine::{ImageParts, json_equal};
use sartor_location::{Condition, KeyValue, ListSelector, Node, PathTests};
use serde_json::Value;

use crate::Reason;
use crate::cel::{self, Literal, Step};

/// What a mutator writes at the end of its location.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Leaf {
    /// A value that does not depend on what is there (an Assign's).
    Value(Literal),
    /// The image there with these parts put in (an AssignImage's); the
    /// parts alone where there is none, as the engine writes them.
    Image(ImageParts),
    /// A ModifySet `merge`: each value the list lacks appended (whole-value
    /// equality, numbers by value, as CEL's `in` compares); a missing list
    /// made of the values as they are.
    Merge(Vec<Value>),
    /// A ModifySet `prune`: every element equal to a value removed; a
    /// missing list left missing (its parents are still created, as the
    /// engine creates them).
    Prune(Vec<Value>),
}

impl Leaf {
    /// What is written where nothing is, parents included: `None` for
    /// nothing (a prune).
    fn missing(&self) -> Option<Literal> {
        match self {
            Leaf::Value(value) => Some(value.clone()),
            Leaf::Image(parts) => Some(Literal::Json(Value::from(parts.apply("")))),
            Leaf::Merge(values) => Some(Literal::Json(Value::Array(values.clone()))),
            Leaf::Prune(_) => None,
        }
    }

    /// What is written over `read` (CEL), which is there, as one value:
    /// `None` when it does not depend on what is there, or is not one value
    /// (a ModifySet's, whose patches leave the elements there untouched:
    /// the API server cannot write a built-in kind's typed elements back).
    fn over(&self, read: &str) -> Option<String> {
        match self {
            Leaf::Image(parts) => Some(image(read, parts)),
            Leaf::Value(_) | Leaf::Merge(_) | Leaf::Prune(_) => None,
        }
    }

    /// What is written over `read` when it is there, as one value.
    fn at_present(&self, read: &str) -> String {
        match (self.over(read), self.missing()) {
            (Some(over), _) => over,
            (None, Some(missing)) => missing.render(),
            (None, None) => read.to_string(),
        }
    }

    /// The patches writing at `at`, which is `read` (CEL) when `present`
    /// holds.
    fn write(&self, at: &Pointer, read: &str, present: &str) -> Patches {
        let missing = self.missing().map(|m| operation("add", at, &m.render()));
        let cel = match self {
            Leaf::Value(_) => {
                return match missing {
                    Some(add) => Patches::one(add),
                    None => Patches::none(),
                };
            }
            Leaf::Image(_) => {
                let written = match self.missing() {
                    Some(m) => format!("({present} ? {} : {})", self.at_present(read), m.render()),
                    None => self.at_present(read),
                };
                return Patches::one(operation("add", at, &written));
            }
            Leaf::Merge(values) => {
                // Appending a value makes the next one equal to it present:
                // the values once each, first occurrences kept.
                let mut distinct: Vec<Value> = Vec::new();
                for value in values {
                    if !distinct.iter().any(|seen| json_equal(seen, value)) {
                        distinct.push(value.clone());
                    }
                }
                format!(
                    "({present} ? {}.filter(v, !(v in {read})).map(v, {}) : [{}])",
                    cel::literal(&Value::Array(distinct)),
                    operation("add", &at.text("/-"), "v"),
                    missing.unwrap_or_default()
                )
            }
            // Removed from the last to the first, so each index still
            // names the element it was computed for.
            Leaf::Prune(values) => format!(
                "({present} ? lists.range(size({read})).map(j, size({read}) - 1 - j).filter(i, {read}[i] in {}).map(i, JSONPatch{{op: \"remove\", path: {}}}) : [])",
                cel::literal(&Value::Array(values.clone())),
                at.index("i").render()
            ),
        };
        // A typed list in every case (`.map(v, JSONPatch{...})`).
        Patches { cel, writes: true }
    }
}

/// A CEL list of JSONPatch values, and whether any branch of it holds one:
/// a list none of whose branches does is `[]`, which the API server types
/// `list(dyn)` and refuses as a mutation's expression.
#[derive(Debug)]
struct Patches {
    cel: String,
    writes: bool,
}

impl Patches {
    /// No patch.
    fn none() -> Patches {
        Patches {
            cel: "[]".to_string(),
            writes: false,
        }
    }

    /// One patch (a `JSONPatch{...}` expression).
    fn one(patch: String) -> Patches {
        Patches {
            cel: format!("[{patch}]"),
            writes: true,
        }
    }

    /// `then` when `condition` (CEL) holds, else `otherwise`.
    fn either(condition: &str, then: Patches, otherwise: Patches) -> Patches {
        Patches {
            cel: format!("({condition} ? {} : {})", then.cel, otherwise.cel),
            writes: then.writes || otherwise.writes,
        }
    }
}

/// The image `read` with `parts` put in, split as Gatekeeper splits it:
/// the domain is what comes before the first `/` when it has a `.` or a
/// `:` or is `localhost`; the tag is the rest from its first `:` or `@`.
/// Each step is bound to a name with a one-element `map` (CEL in the API
/// server has no `cel.bind`).
pub(crate) fn image(read: &str, parts: &ImageParts) -> String {
    let bind = |name: &str, value: &str, body: &str| format!("[{value}].map({name}, {body})[0]");
    let set = |part: &Option<String>| {
        part.as_deref()
            .filter(|text| !text.is_empty())
            .map(cel::string)
    };
    let domain = match set(&parts.domain) {
        Some(domain) => format!("{domain} + \"/\""),
        None => "(domain != \"\" ? domain + \"/\" : \"\")".to_string(),
    };
    let path =
        set(&parts.path).unwrap_or_else(|| "rest.substring(0, size(rest) - size(tag))".to_string());
    let tag = set(&parts.tag).unwrap_or_else(|| "tag".to_string());
    let joined = format!("{domain} + {path} + {tag}");
    bind(
        "img",
        read,
        &bind(
            "slash",
            "img.indexOf(\"/\")",
            &bind(
                "head",
                "slash >= 0 ? img.substring(0, slash) : \"\"",
                &bind(
                    "domain",
                    "head.contains(\".\") || head.contains(\":\") || head == \"localhost\" ? head : \"\"",
                    &bind(
                        "rest",
                        "domain != \"\" ? img.substring(slash + 1) : img",
                        &bind("tag", "rest.find(\"(?s)[:@].*\")", &joined),
                    ),
                ),
            ),
        ),
    )
}

/// A JSON pointer being built: literal text and CEL expressions of strings.
#[derive(Debug, Clone, Default)]
struct Pointer(Vec<Part>);

#[derive(Debug, Clone)]
enum Part {
    Text(String),
    Expression(String),
}

impl Pointer {
    /// One field further down.
    fn field(&self, name: &str) -> Pointer {
        self.text(&format!("/{}", name.replace('~', "~0").replace('/', "~1")))
    }

    /// `text` appended.
    fn text(&self, text: &str) -> Pointer {
        let mut parts = self.0.clone();
        match parts.last_mut() {
            Some(Part::Text(last)) => last.push_str(text),
            _ => parts.push(Part::Text(text.to_string())),
        }
        Pointer(parts)
    }

    /// The list element at the CEL integer `index`.
    fn index(&self, index: &str) -> Pointer {
        let mut pointer = self.text("/");
        pointer.0.push(Part::Expression(format!("string({index})")));
        pointer
    }

    /// As a CEL string expression.
    fn render(&self) -> String {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|part| match part {
                Part::Text(text) => cel::string(text),
                Part::Expression(expression) => expression.clone(),
            })
            .collect();
        match parts.is_empty() {
            true => cel::string(""),
            false => parts.join(" + "),
        }
    }
}

/// `JSONPatch{op: ..., path: ..., value: ...}`.
fn operation(op: &str, path: &Pointer, value: &str) -> String {
    format!(
        "JSONPatch{{op: {}, path: {}, value: {value}}}",
        cel::string(op),
        path.render()
    )
}

/// The patches (a CEL list) that set `value` at `nodes` below `object`,
/// where `tests` let the walk go on: each pathTest checked at its own
/// node, per element below a glob, as the engine checks it.
///
/// # Errors
/// A location the export cannot write exactly yet.
pub(crate) fn assign(nodes: &[Node], value: &Leaf, tests: &PathTests) -> Result<String, Reason> {
    let writer = Writer {
        nodes,
        value,
        tests,
    };
    let patches = writer.below("object", &Pointer::default(), 0, 0)?;
    // pathTests may leave no branch that writes (a MustNotExist on a glob
    // below a list the walk would create empty): the API server wants the
    // list typed all the same.
    Ok(match patches.writes {
        true => patches.cel,
        false => NO_PATCHES.to_string(),
    })
}

/// An empty list the API server types as `list(JSONPatch)`: `[]` alone is
/// `list(dyn)`, which it refuses as a mutation's expression.
const NO_PATCHES: &str = "[].map(p, JSONPatch{op: \"test\", path: \"\", value: p})";

/// One location's patches being written.
struct Writer<'a> {
    nodes: &'a [Node],
    value: &'a Leaf,
    tests: &'a PathTests,
}

impl Writer<'_> {
    /// The patches that set the value at the nodes from `depth` on, below
    /// `current` (at `pointer`), inside `globs` globs.
    fn below(
        &self,
        current: &str,
        pointer: &Pointer,
        depth: usize,
        globs: usize,
    ) -> Result<Patches, Reason> {
        let (Some(node), Some(rest)) = (self.nodes.get(depth), self.nodes.get(depth + 1..)) else {
            return Ok(Patches::none());
        };
        match node {
            Node::Field(name) => {
                let step = Step::of(name);
                let at = pointer.field(name);
                let present = step.present(current);
                if rest.is_empty() {
                    let write = self.value.write(&at, &step.read(current), &present);
                    return Ok(match self.tests.condition_at(depth) {
                        None => write,
                        Some(Condition::MustExist) => {
                            Patches::either(&present, write, Patches::none())
                        }
                        Some(Condition::MustNotExist) => {
                            Patches::either(&present, Patches::none(), write)
                        }
                    });
                }
                let there = match self.tests.exists_ok(depth) {
                    true => self.below(&step.read(current), &at, depth + 1, globs)?,
                    false => Patches::none(),
                };
                let missing = match self.created(depth) {
                    Some(subtree) => Patches::one(operation("add", &at, &subtree.render())),
                    None => Patches::none(),
                };
                Ok(Patches::either(&present, there, missing))
            }
            Node::List(selector) => self.element(current, pointer, selector, depth, globs),
        }
    }

    /// The patches for the list `current` (at `pointer`): the elements
    /// `selector` (the node at `depth`) picks, then the rest below each.
    fn element(
        &self,
        current: &str,
        pointer: &Pointer,
        selector: &ListSelector,
        depth: usize,
        globs: usize,
    ) -> Result<Patches, Reason> {
        let last = depth + 1 == self.nodes.len();
        // The engine asks a glob's test once, when it reaches the list (an
        // empty one too), and a keyed element's when it finds it.
        if !self.tests.exists_ok(depth) && !selector.key_value.is_concrete() {
            return Ok(Patches::none());
        }
        match &selector.key_value {
            KeyValue::Glob | KeyValue::NotIn(_) => {
                if last {
                    return Err(Reason::GlobElement);
                }
                // Each selected element's patches, one list.
                let index = index_name(globs);
                let each = format!("{current}[{index}]");
                let patches = self.below(&each, &pointer.index(&index), depth + 1, globs + 1)?;
                let chosen = selected(current, &index, selector)?;
                Ok(Patches {
                    cel: format!("{chosen}.map({index}, {}).flatten()", patches.cel),
                    writes: patches.writes,
                })
            }
            KeyValue::String(_) | KeyValue::Integer(_) => {
                let index = key_index(current, selector);
                let at = pointer.index(&index);
                let present = match (self.tests.exists_ok(depth), last) {
                    (false, _) => Patches::none(),
                    (true, true) => {
                        let written = self.value.at_present(&format!("{current}[{index}]"));
                        Patches::one(operation("replace", &at, &written))
                    }
                    (true, false) => {
                        self.below(&format!("{current}[{index}]"), &at, depth + 1, globs)?
                    }
                };
                let missing = match self.tests_let_create(depth) {
                    true => {
                        let rest = self.nodes.get(depth + 1..).unwrap_or_default();
                        let appended = new_element(selector, rest, self.value)
                            .ok_or(Reason::GlobBelowKeyed)?;
                        Patches::one(operation("add", &pointer.text("/-"), &appended.render()))
                    }
                    false => Patches::none(),
                };
                Ok(Patches::either(&format!("{index} >= 0"), present, missing))
            }
        }
    }

    /// What the engine creates for the node at `depth` missing, the rest
    /// below it: `None` when a glob is on the way or a pathTest from
    /// `depth` on needs something there (what is created is empty).
    fn created(&self, depth: usize) -> Option<Literal> {
        let rest = self.nodes.get(depth + 1..)?;
        match self.tests_let_create(depth) {
            true => built(rest, self.value),
            false => None,
        }
    }

    /// Whether no pathTest from `depth` on is a MustExist: below a node
    /// the walk creates, nothing exists.
    fn tests_let_create(&self, depth: usize) -> bool {
        (depth..self.nodes.len()).all(|d| self.tests.missing_ok(d))
    }
}

/// What the index of a glob's element is called inside `globs` globs: `g`,
/// `g1`, ..., so an inner one does not hide an outer one.
fn index_name(globs: usize) -> String {
    match globs {
        0 => "g".to_string(),
        n => format!("g{n}"),
    }
}

/// The indexes (`index` in CEL) of the elements of the list `current` that
/// the glob or `notin` `selector` visits, as the engine visits them: every
/// element (by index, so an element without its key, or with the key of
/// another, is visited as itself), or every one whose key is missing or
/// equals none of the `notin` values (strings: a number never equals one,
/// in CEL as in the engine).
fn selected(current: &str, index: &str, selector: &ListSelector) -> Result<String, Reason> {
    let every = format!("lists.range(size({current}))");
    let KeyValue::NotIn(set) = &selector.key_value else {
        return Ok(every);
    };
    let names: Option<Vec<&str>> = set
        .values()
        .iter()
        .map(|value| match value {
            sartor_location::Literal::String(name) => Some(name.as_str()),
            sartor_location::Literal::Integer(_) => None,
        })
        .collect();
    let names = names.ok_or(Reason::NotIn)?;
    let element = format!("{current}[{index}]");
    let key = Step::of(&selector.key_field);
    let listed: Vec<String> = names.iter().map(|name| cel::string(name)).collect();
    Ok(format!(
        "{every}.filter({index}, !({}) || !({} in [{}]))",
        key.present(&element),
        key.read(&element),
        listed.join(", ")
    ))
}

/// The index in the list `current` of the element the keyed `selector`
/// names, `-1` when it is not there: `current.map(x, x.name).indexOf("app")`.
fn key_index(current: &str, selector: &ListSelector) -> String {
    let key = Step::of(&selector.key_field);
    format!(
        "{current}.map(x, {}).indexOf({})",
        key.read("x"),
        cel::literal(&key_literal(&selector.key_value))
    )
}

/// The field names of `nodes` when they are all fields.
fn fields_only(nodes: &[Node]) -> Option<Vec<&str>> {
    nodes
        .iter()
        .map(|node| match node {
            Node::Field(name) => Some(name.as_str()),
            Node::List(_) => None,
        })
        .collect()
}

/// Whether the engine creates something for `nodes` missing, `value` at
/// the end (not when a glob is on the way).
pub(crate) fn creates(nodes: &[Node], value: &Leaf) -> bool {
    built(nodes, value).is_some()
}

/// What the engine creates for `nodes` missing, `value` at the end: `None`
/// when a glob is on the way (a glob creates nothing).
fn built(nodes: &[Node], value: &Leaf) -> Option<Literal> {
    let Some((node, rest)) = nodes.split_first() else {
        return value.missing();
    };
    match node {
        // A prune writes nothing at the end: its parent is created empty.
        Node::Field(_) if rest.is_empty() && value.missing().is_none() => {
            Some(Literal::Map(Vec::new()))
        }
        Node::Field(name) => Some(Literal::Map(vec![(name.clone(), built(rest, value)?)])),
        Node::List(selector) => Some(Literal::List(vec![new_element(selector, rest, value)?])),
    }
}

/// The element `selector` names, made as the engine makes one that is not
/// there: its key, and `rest` built below (or `value` itself when the
/// location ends at the element).
fn new_element(selector: &ListSelector, rest: &[Node], value: &Leaf) -> Option<Literal> {
    if matches!(selector.key_value, KeyValue::Glob | KeyValue::NotIn(_)) {
        return None;
    }
    if rest.is_empty() {
        return value.missing();
    }
    let Literal::Map(mut members) = built(rest, value)? else {
        return None;
    };
    members.push((
        selector.key_field.clone(),
        Literal::Json(key_literal(&selector.key_value)),
    ));
    Some(Literal::Map(members))
}

/// Whether everything `nodes` names is there below `object`: fields and
/// keyed elements (`None` for a glob or `notin`, which test each element).
pub(crate) fn present(nodes: &[Node]) -> Option<String> {
    let mut current = "object".to_string();
    let mut tests = Vec::new();
    for node in nodes {
        match node {
            Node::Field(name) => {
                let step = Step::of(name);
                tests.push(step.present(&current));
                current = step.read(&current);
            }
            Node::List(selector) => {
                if matches!(selector.key_value, KeyValue::Glob | KeyValue::NotIn(_)) {
                    return None;
                }
                let index = key_index(&current, selector);
                tests.push(format!("{index} >= 0"));
                current = format!("{current}[{index}]");
            }
        }
    }
    Some(tests.join(" && "))
}

/// A key value as JSON: a string, or an integer.
fn key_literal(key: &KeyValue) -> Value {
    match key {
        KeyValue::String(text) => Value::from(text.as_str()),
        KeyValue::Integer(number) => Value::from(*number),
        KeyValue::Glob | KeyValue::NotIn(_) => Value::Null,
    }
}

/// The patches (a CEL list) that remove what `nodes` names below `object`,
/// where it is there: nothing is created.
///
/// # Errors
/// A location the export cannot remove exactly yet.
pub(crate) fn remove(nodes: &[Node]) -> Result<String, Reason> {
    removed("object", &Pointer::default(), nodes, 0)
}

/// The removals of `nodes` below `current` (at `pointer`).
fn removed(
    current: &str,
    pointer: &Pointer,
    nodes: &[Node],
    globs: usize,
) -> Result<String, Reason> {
    let Some((node, rest)) = nodes.split_first() else {
        return Ok("[]".to_string());
    };
    let removal = |at: &Pointer| format!("JSONPatch{{op: \"remove\", path: {}}}", at.render());
    match node {
        Node::Field(name) => {
            let step = Step::of(name);
            let at = pointer.field(name);
            let present = match rest.is_empty() {
                true => format!("[{}]", removal(&at)),
                false => removed(&step.read(current), &at, rest, globs)?,
            };
            Ok(format!("({} ? {present} : [])", step.present(current)))
        }
        Node::List(selector) => {
            match &selector.key_value {
                // Removing every element there is (or every one `notin`
                // selects).
                KeyValue::Glob | KeyValue::NotIn(_) if rest.is_empty() => Err(Reason::GlobElement),
                KeyValue::Glob | KeyValue::NotIn(_) => {
                    let index = index_name(globs);
                    let each = format!("{current}[{index}]");
                    let chosen = selected(current, &index, selector)?;
                    match fields_only(rest) {
                        // The elements with the field, one removal each.
                        Some(fields) => {
                            let names: Vec<String> =
                                fields.iter().map(|f| (*f).to_string()).collect();
                            let mut at = pointer.index(&index);
                            for name in &fields {
                                at = at.field(name);
                            }
                            Ok(format!(
                                "{chosen}.filter({index}, {}).map({index}, {})",
                                cel::has_path(&each, &names),
                                removal(&at)
                            ))
                        }
                        // Each element's removals, one list (below a list
                        // there, no removal moves another's index).
                        None => {
                            let patches = removed(&each, &pointer.index(&index), rest, globs + 1)?;
                            Ok(format!("{chosen}.map({index}, {patches}).flatten()"))
                        }
                    }
                }
                KeyValue::String(_) | KeyValue::Integer(_) => {
                    let index = key_index(current, selector);
                    let at = pointer.index(&index);
                    let present = match rest.is_empty() {
                        true => format!("[{}]", removal(&at)),
                        false => removed(&format!("{current}[{index}]"), &at, rest, globs)?,
                    };
                    Ok(format!("({index} >= 0 ? {present} : [])"))
                }
            }
        }
    }
}

/// An AssignMetadata's patch: the label or annotation added when it is not
/// there (Gatekeeper never changes one that is), the map too when missing.
pub(crate) fn metadata(names: &[String], value: &Literal) -> String {
    let (Some(key), Some(map)) = (names.last(), names.get(..names.len().saturating_sub(1))) else {
        return "[]".to_string();
    };
    let map_read = cel::read_path("object", map);
    format!(
        "(!({}) ? [JSONPatch{{op: \"add\", path: {}, value: {{{}: {}}}}}] : ({} in {map_read} ? [] : [JSONPatch{{op: \"add\", path: {}, value: {}}}]))",
        cel::has_path("object", map),
        cel::string(&cel::pointer(map)),
        cel::string(key),
        value.render(),
        cel::string(key),
        cel::string(&cel::pointer(names)),
        value.render()
    )
}
