//! What a mutator's decision reads and what one writes, so the export
//! knows in which pass sartor may apply it: sartor runs its mutators again
//! until nothing changes, the API server runs a policy at most twice.
//!
//! What is read: a label a selector names, the name, a pathTest's path (is
//! it there?), the elements a list selector picks (which are there?). What
//! is written: a location, element by element. A glob element never
//! creates an element, so writing below `[name: *]` changes which
//! `containers` there are no more than writing a field does; writing below
//! `[name: app]` may add `app`.

use std::fmt;

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

/// The reads of a location's list selectors: which elements are there, at
/// each selector.
pub(crate) fn selector_reads(location: &[Segment]) -> Vec<Read> {
    location
        .iter()
        .enumerate()
        .filter(|(_, segment)| matches!(segment, Segment::Element { .. }))
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
