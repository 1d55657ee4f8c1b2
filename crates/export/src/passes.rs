//! What a mutator's decision reads and what one writes, so the export
//! knows in which pass sartor may apply it: sartor runs its mutators again
//! until nothing changes, the API server runs a policy at most twice.
//!
//! What is read: a label a selector names, the name, a pathTest's path (is
//! it there?), what a removal removes (is it there?), the elements a glob
//! or `notin` picks (which are there?). What is written: a location,
//! element by element. A glob element never
//! creates an element, so writing below `[name: *]` changes which
//! `containers` there are no more than writing a field does; writing below
//! `[name: app]` may add `app`.
//!
//! A mutation that reads what another writes may apply a pass later than
//! it; [`late`] finds the first one that sartor may apply in a third pass.

use std::collections::BTreeSet;
use std::fmt;

use sartor_api::{Match, SetOperation};
use sartor_engine::json_equal;
use sartor_location::{KeyValue, Node, Path};
use serde_json::Value;

/// One step of a path read or written.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Segment {
    /// A field, by name.
    Field(String),
    /// List elements by their key: one (`Some`: created when missing), or
    /// every one there is (`None`: a glob or `notin`).
    Element { key: String, value: Option<Value> },
}

/// What a mutator's decision reads.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Read {
    /// Where.
    pub(crate) path: Vec<Segment>,
    /// Whether only whether something is there (pathTests, list
    /// selectors), rather than its value (labels, names).
    pub(crate) existence: bool,
}

/// A location's or a pathTest's path as segments.
pub(crate) fn segments(path: &Path) -> Vec<Segment> {
    path.nodes()
        .iter()
        .map(|node| match node {
            Node::Field(name) => Segment::Field(name.clone()),
            Node::List(selector) => Segment::Element {
                key: selector.key_field.clone(),
                value: match &selector.key_value {
                    KeyValue::String(text) => Some(Value::from(text.as_str())),
                    KeyValue::Integer(number) => Some(Value::from(*number)),
                    KeyValue::Glob | KeyValue::NotIn(_) => None,
                },
            },
        })
        .collect()
}

/// A path of fields.
pub(crate) fn fields(names: &[&str]) -> Vec<Segment> {
    names
        .iter()
        .map(|name| Segment::Field((*name).to_string()))
        .collect()
}

/// The reads of a location's globs and `notin`s: which elements are
/// there, at each one. A keyed element is not read: the mutator writes
/// there whether it is there or not (creating it), so another's creating
/// it changes neither whether nor what it writes. What would (a pathTest
/// on it, a removal's need of what it removes) is read on its own.
pub(crate) fn selector_reads(location: &[Segment]) -> Vec<Read> {
    location
        .iter()
        .enumerate()
        .filter(|(_, segment)| matches!(segment, Segment::Element { value: None, .. }))
        .map(|(at, _)| Read {
            path: location.get(..=at).unwrap_or_default().to_vec(),
            existence: true,
        })
        .collect()
}

/// What a mutator writes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Write {
    /// Where.
    pub(crate) path: Vec<Segment>,
    /// Whether it removes (a removal creates nothing on its way).
    pub(crate) removes: bool,
}

/// Whether writing `write` may change what `read` reads.
pub(crate) fn overlaps(read: &Read, write: &Write) -> bool {
    let removes = write.removes;
    let write = write.path.as_slice();
    let same = read.path.iter().zip(write).all(|pair| match pair {
        (Segment::Field(a), Segment::Field(b)) => a == b,
        (Segment::Element { key: a, value: x }, Segment::Element { key: b, value: y }) => {
            a == b && (x.is_none() || y.is_none() || x == y)
        }
        _ => false,
    });
    if !same {
        return false;
    }
    if !read.existence || write.len() < read.path.len() {
        return true;
    }
    if removes {
        // Removing what is read, or something below it that is not it.
        return write.len() == read.path.len();
    }
    // The writer goes through what is read: it creates it when missing,
    // unless it is every element there is.
    !matches!(
        read.path.len().checked_sub(1).and_then(|at| write.get(at)),
        Some(Segment::Element { value: None, .. })
    )
}

/// What a mutation reads and writes, and what tells whether two of them
/// meet: all the pass analysis needs of it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Effects {
    /// What it writes.
    pub(crate) writes: Vec<Write>,
    /// What its decision reads.
    pub(crate) reads: Vec<Read>,
    /// The kinds (group, kind) it can apply to; `None`: any kind.
    pub(crate) kinds: Option<BTreeSet<(String, String)>>,
    /// A ModifySet's operation and values.
    pub(crate) set: Option<(SetOperation, Vec<Value>)>,
}

impl Effects {
    /// Whether `self`, reading its own list, may need to run again after
    /// `writer` writes it at `write`: not when both are ModifySets whose
    /// values the other does not undo (merges only add, prunes only
    /// remove; a merge and a prune commute unless they share a value).
    fn rereads(&self, read: &Read, writer: &Effects, write: &Write) -> bool {
        let own = self.writes.iter().any(|mine| mine.path == read.path);
        match (&self.set, &writer.set) {
            (Some((merges, values)), Some((other_merges, others)))
                if own && write.path.len() == read.path.len() =>
            {
                merges != other_merges
                    && values
                        .iter()
                        .any(|value| others.iter().any(|other| json_equal(value, other)))
            }
            _ => true,
        }
    }
}

/// The passes the API server runs a policy: once, and once more when the
/// first run changed the object (`reinvocationPolicy: IfNeeded`; a policy is
/// run again after its own change, as the cluster suite checks).
pub(crate) const PASSES: usize = 2;

/// A mutation sartor may apply in a pass after [`PASSES`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Late {
    /// Its place in the list.
    pub(crate) at: usize,
    /// What it reads that a later write changes, as a location.
    pub(crate) path: String,
    /// The place of the mutation whose write it waits for.
    pub(crate) writer: usize,
    /// The pass sartor may apply it in.
    pub(crate) pass: usize,
}

/// The first of `mutations` (in sartor's order) that sartor may apply in a
/// pass after [`PASSES`].
///
/// A mutation whose decision reads what another writes may first apply in
/// the pass that write happens in, when the writer comes before it, or in
/// the pass after, when the writer comes after it.
pub(crate) fn late(mutations: &[&Effects]) -> Option<Late> {
    // (reader, writer, what the reader reads)
    let mut edges = Vec::new();
    for (reader_at, reader) in mutations.iter().enumerate() {
        for (writer_at, writer) in mutations.iter().enumerate() {
            let common_kind = match (&reader.kinds, &writer.kinds) {
                (Some(a), Some(b)) => !a.is_disjoint(b),
                _ => true,
            };
            if reader_at == writer_at || !common_kind {
                continue;
            }
            let read = reader.reads.iter().find(|read| {
                writer
                    .writes
                    .iter()
                    .any(|write| overlaps(read, write) && reader.rereads(read, writer, write))
            });
            if let Some(read) = read {
                edges.push((reader_at, writer_at, Shown(&read.path).to_string()));
            }
        }
    }
    let mut pass = vec![1usize; mutations.len()];
    let mut why: Vec<Option<(String, usize)>> = vec![None; mutations.len()];
    // Each round lengthens the longest chain by one; a cycle grows past
    // PASSES, where the loop stops.
    for _ in 0..=mutations.len() {
        let mut changed = false;
        for (reader, writer, path) in &edges {
            let written = pass.get(*writer).copied().unwrap_or(1);
            let needed = if writer > reader {
                written + 1
            } else {
                written
            };
            if let (Some(at), Some(reason)) = (pass.get_mut(*reader), why.get_mut(*reader))
                && needed > *at
            {
                *at = needed;
                *reason = Some((path.clone(), *writer));
                changed = true;
            }
        }
        if !changed || pass.iter().any(|p| *p > PASSES) {
            break;
        }
    }
    let (at, pass) = pass.iter().enumerate().find(|(_, p)| **p > PASSES)?;
    let (path, writer) = why.get(at).cloned().flatten()?;
    Some(Late {
        at,
        path,
        writer,
        pass: *pass,
    })
}

/// What `match` reads of the object, which a write before it may change.
pub(crate) fn match_reads(criteria: &Match) -> Vec<Read> {
    let value = |names: &[&str]| Read {
        path: fields(names),
        existence: false,
    };
    let mut reads = Vec::new();
    // A namespaceSelector reads a Namespace's own labels.
    for selector in [&criteria.label_selector, &criteria.namespace_selector]
        .into_iter()
        .flatten()
    {
        let keys = selector
            .match_labels
            .keys()
            .chain(selector.match_expressions.iter().map(|r| &r.key));
        for key in keys {
            reads.push(value(&["metadata", "labels", key]));
        }
    }
    if criteria.name.is_some()
        || !criteria.namespaces.is_empty()
        || !criteria.excluded_namespaces.is_empty()
    {
        reads.push(value(&["metadata", "name"]));
        reads.push(value(&["metadata", "generateName"]));
    }
    reads
}

/// A path as a location writes it.
pub(crate) struct Shown<'a>(pub(crate) &'a [Segment]);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (at, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Field(name) if at == 0 => write!(f, "{name}")?,
                Segment::Field(name) => write!(f, ".{name}")?,
                Segment::Element { key, value: None } => write!(f, "[{key}: *]")?,
                Segment::Element {
                    key,
                    value: Some(Value::String(text)),
                } => write!(f, "[{key}: {text}]")?,
                Segment::Element {
                    key,
                    value: Some(value),
                } => write!(f, "[{key}: {value}]")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn path(location: &str) -> Vec<Segment> {
        segments(&Path::parse(location).unwrap())
    }

    fn sets(location: &str) -> Write {
        Write {
            path: path(location),
            removes: false,
        }
    }

    fn exists(location: &str) -> Read {
        Read {
            path: path(location),
            existence: true,
        }
    }

    #[test]
    fn a_glob_reads_which_elements_there_are() {
        let every = exists("spec.containers[name: *]");
        assert!(overlaps(&every, &sets("spec.containers[name: sidecar]")));
        assert!(overlaps(&every, &sets("spec.containers")));
        assert!(!overlaps(&every, &sets("spec.containers[name: *].image")));
        assert!(!overlaps(&every, &sets("spec.volumes[name: data]")));
    }

    #[test]
    fn an_element_is_read_by_its_key() {
        let app = exists("spec.containers[name: app]");
        assert!(overlaps(
            &app,
            &sets("spec.containers[name: app].ports[containerPort: 80].name")
        ));
        assert!(!overlaps(&app, &sets("spec.containers[name: sidecar]")));
        assert!(!overlaps(
            &app,
            &sets("spec.containers[name: *].securityContext.privileged")
        ));
    }

    #[test]
    fn a_removal_below_an_element_leaves_it_there() {
        let app = exists("spec.containers[name: app]");
        let removal = |location: &str| Write {
            path: path(location),
            removes: true,
        };
        assert!(!overlaps(
            &app,
            &removal("spec.containers[name: app].ports[containerPort: 80].hostPort")
        ));
        assert!(overlaps(&app, &removal("spec.containers[name: app]")));
    }

    #[test]
    fn a_field_tested_is_created_by_writes_below_it() {
        let context = exists("spec.securityContext");
        assert!(overlaps(&context, &sets("spec.securityContext.runAsUser")));
        assert!(!overlaps(&context, &sets("spec.hostname")));
        let label = Read {
            path: fields(&["metadata", "labels", "tier"]),
            existence: false,
        };
        let labels = |names: &[&str]| Write {
            path: fields(names),
            removes: false,
        };
        assert!(overlaps(&label, &labels(&["metadata", "labels"])));
        assert!(!overlaps(&label, &labels(&["metadata", "labels", "team"])));
        assert_eq!(
            Shown(&path("spec.containers[name: app].ports[containerPort: 80]")).to_string(),
            "spec.containers[name: app].ports[containerPort: 80]"
        );
    }
}
