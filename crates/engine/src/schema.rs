//! Schema conflicts between mutators (Gatekeeper's `pkg/mutation/schema`).
//!
//! For every (kind, operation) a mutator applies to, its location implies a
//! shape for each field on the way: `spec.containers[name: *].image` says
//! `spec` is an object, `containers` a list keyed by `name`, `image` anything
//! (an Assign), a list of values (a ModifySet) or a string (an AssignImage).
//! Two mutators that disagree about a field — object vs list, lists keyed by
//! different fields, a set vs a keyed list — cannot both be right, so both
//! are marked conflicting and skipped until the disagreement goes away.
//!
//! The tree per binding mirrors Gatekeeper's: each node records who walks
//! through it, and children are grouped by field name (or list key field) and
//! by the shape the walker expects there.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

use sartor_location::{Node as PathNode, Path};

use crate::mutator::{MutatorId, Terminal};
use crate::request::{Gvk, Operation};

/// One (kind, operation) scope of the schema.
pub type Binding = (Gvk, Operation);

/// The schema implied by every mutator that takes part in conflict checks.
#[derive(Debug, Clone, Default)]
pub struct SchemaDb {
    trees: HashMap<Binding, Node>,
    entries: HashMap<MutatorId, Entry>,
    conflicted: BTreeSet<MutatorId>,
}

/// What the database remembers about one mutator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The scopes it applies to.
    pub bindings: Vec<Binding>,
    /// Its location.
    pub path: Path,
    /// What it implies about the last field.
    pub terminal: Terminal,
    /// Whether nothing may live below its location.
    pub must_terminate: bool,
}

/// What a mutator expects to find at a field.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Shape {
    /// An object with fields.
    Object,
    /// A list whose elements are identified by `key`.
    List {
        /// The key field.
        key: String,
    },
    /// A list of values (ModifySet).
    Set,
    /// A string (AssignImage).
    String,
}

/// Two mutators disagreeing about one field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaConflict {
    /// The other mutator.
    pub with: MutatorId,
    /// The field they disagree about (a prefix of this mutator's location).
    pub path: Path,
    /// What this mutator expects there.
    pub mine: Shape,
    /// What the other one expects there.
    pub theirs: Shape,
    /// The kinds and operations in which both apply.
    pub bindings: Vec<Binding>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum NodeType {
    Object,
    List,
    Terminal(Terminal),
}

#[derive(Debug, Clone, Default)]
struct Node {
    referenced_by: BTreeSet<MutatorId>,
    must_terminate: BTreeSet<MutatorId>,
    children: BTreeMap<String, BTreeMap<NodeType, Node>>,
}

// === impl SchemaDb ===

impl SchemaDb {
    /// Adds or replaces a mutator's entry. Returns the mutators newly found
    /// in conflict because of it (itself included).
    pub fn upsert(&mut self, id: &MutatorId, entry: Entry) -> BTreeSet<MutatorId> {
        if self.entries.get(id) == Some(&entry) {
            return BTreeSet::new();
        }
        self.remove(id);
        let mut conflicts = BTreeSet::new();
        for binding in &entry.bindings {
            let tree = self.trees.entry(binding.clone()).or_default();
            tree.add(
                id,
                entry.path.nodes(),
                entry.terminal,
                entry.must_terminate,
                &mut conflicts,
            );
        }
        self.conflicted.extend(conflicts.iter().cloned());
        self.entries.insert(id.clone(), entry);
        conflicts
    }

    /// Removes a mutator; conflicts it caused clear.
    pub fn remove(&mut self, id: &MutatorId) {
        let Some(entry) = self.entries.remove(id) else {
            return;
        };
        for binding in &entry.bindings {
            if let Some(tree) = self.trees.get_mut(binding) {
                tree.remove(id, entry.path.nodes(), entry.terminal);
                if tree.referenced_by.is_empty() {
                    self.trees.remove(binding);
                }
            }
        }
        self.conflicted.remove(id);
        let still: Vec<MutatorId> = self
            .conflicted
            .iter()
            .filter(|other| self.has_conflicts_on_path(other))
            .cloned()
            .collect();
        self.conflicted = still.into_iter().collect();
    }

    /// Every mutator in conflict.
    pub fn conflicted(&self) -> &BTreeSet<MutatorId> {
        &self.conflicted
    }

    /// The disagreements of one mutator, for status and messages: one entry
    /// per other mutator and field, with the scopes it happens in.
    pub fn conflicts(&self, id: &MutatorId) -> Vec<SchemaConflict> {
        let Some(entry) = self.entries.get(id) else {
            return Vec::new();
        };
        if !self.conflicted.contains(id) {
            return Vec::new();
        }
        let mut found: BTreeMap<(MutatorId, usize, Shape, Shape), Vec<Binding>> = BTreeMap::new();
        for binding in &entry.bindings {
            let Some(tree) = self.trees.get(binding) else {
                continue;
            };
            let nodes = entry.path.nodes();
            let mut node = tree;
            for depth in 0..nodes.len() {
                let Some(rest) = nodes.get(depth..) else {
                    break;
                };
                let key = key_of(rest);
                let mine = head_type(rest, entry.terminal);
                let Some(types) = node.children.get(key) else {
                    break;
                };
                for (other, my_shape, their_shape) in disagreements(id, types, mine, rest) {
                    found
                        .entry((other, depth, my_shape, their_shape))
                        .or_default()
                        .push(binding.clone());
                }
                match types.get(&mine) {
                    Some(child) => node = child,
                    None => break,
                }
            }
        }
        let mut conflicts: Vec<SchemaConflict> = found
            .into_iter()
            .map(|((with, depth, mine, theirs), mut bindings)| {
                bindings.sort();
                SchemaConflict {
                    with,
                    path: entry
                        .path
                        .prefix(depth + 1)
                        .unwrap_or_else(|| entry.path.clone()),
                    mine,
                    theirs,
                    bindings,
                }
            })
            .collect();
        conflicts.sort_by(|a, b| (a.path.len(), &a.with).cmp(&(b.path.len(), &b.with)));
        conflicts
    }

    fn has_conflicts_on_path(&self, id: &MutatorId) -> bool {
        let Some(entry) = self.entries.get(id) else {
            return false;
        };
        entry.bindings.iter().any(|binding| {
            self.trees
                .get(binding)
                .is_some_and(|tree| tree.conflicts_on_path(entry.path.nodes(), entry.terminal))
        })
    }
}

/// Who at this field expects something other than `mine` (and what), seen
/// from mutator `me` walking `rest` (whose first node is this field).
fn disagreements(
    me: &MutatorId,
    types: &BTreeMap<NodeType, Node>,
    mine: NodeType,
    rest: &[PathNode],
) -> Vec<(MutatorId, Shape, Shape)> {
    let mut out = Vec::new();
    let Some(my_shape) = shape(mine, rest.get(1)) else {
        return out;
    };
    let typed = types
        .keys()
        .filter(|t| **t != NodeType::Terminal(Terminal::Any))
        .count();
    if typed > 1 {
        for (t, child) in types {
            if *t == mine || *t == NodeType::Terminal(Terminal::Any) {
                continue;
            }
            for other in child.referenced_by.iter().filter(|o| *o != me) {
                if let Some(theirs) = shape_of_other(*t, child, other) {
                    out.push((other.clone(), my_shape.clone(), theirs));
                }
            }
        }
    }
    if let (NodeType::List, Some(PathNode::List(selector))) = (mine, rest.get(1))
        && let Some(list) = types.get(&NodeType::List)
    {
        for (key, by_type) in &list.children {
            if *key == selector.key_field {
                continue;
            }
            for child in by_type.values() {
                for other in child.referenced_by.iter().filter(|o| *o != me) {
                    out.push((
                        other.clone(),
                        my_shape.clone(),
                        Shape::List { key: key.clone() },
                    ));
                }
            }
        }
    }
    out
}

/// The shape a node type stands for; the list key comes from the next node.
fn shape(t: NodeType, next: Option<&PathNode>) -> Option<Shape> {
    match (t, next) {
        (NodeType::Object, _) => Some(Shape::Object),
        (NodeType::List, Some(PathNode::List(selector))) => Some(Shape::List {
            key: selector.key_field.clone(),
        }),
        (NodeType::List, _) => None,
        (NodeType::Terminal(Terminal::Set), _) => Some(Shape::Set),
        (NodeType::Terminal(Terminal::String), _) => Some(Shape::String),
        (NodeType::Terminal(Terminal::Any), _) => None,
    }
}

/// The shape `other` expects at a field where it is under `child` of type `t`.
fn shape_of_other(t: NodeType, child: &Node, other: &MutatorId) -> Option<Shape> {
    match t {
        NodeType::List => child
            .children
            .iter()
            .find(|(_, by_type)| by_type.values().any(|n| n.referenced_by.contains(other)))
            .map(|(key, _)| Shape::List { key: key.clone() }),
        _ => shape(t, None),
    }
}

/// The child key of a path's first node: a field's name, a list's key field.
fn key_of(path: &[PathNode]) -> &str {
    match path.first() {
        Some(PathNode::Field(name)) => name,
        Some(PathNode::List(selector)) => &selector.key_field,
        None => "",
    }
}

/// The type the walker expects at the first node of `path`: given by the
/// node after it, or by the mutator's terminal at the end.
fn head_type(path: &[PathNode], terminal: Terminal) -> NodeType {
    match path.get(1) {
        None => NodeType::Terminal(terminal),
        Some(PathNode::Field(_)) => NodeType::Object,
        Some(PathNode::List(_)) => NodeType::List,
    }
}

// === impl Node ===

impl Node {
    fn add(
        &mut self,
        id: &MutatorId,
        path: &[PathNode],
        terminal: Terminal,
        must_terminate: bool,
        conflicts: &mut BTreeSet<MutatorId>,
    ) {
        self.referenced_by.insert(id.clone());
        if path.is_empty() {
            if must_terminate {
                self.must_terminate.insert(id.clone());
            }
            return;
        }
        let key = key_of(path);
        let child = self
            .children
            .entry(key.to_string())
            .or_default()
            .entry(head_type(path, terminal))
            .or_default();
        child.add(
            id,
            path.get(1..).unwrap_or_default(),
            terminal,
            must_terminate,
            conflicts,
        );
        self.conflicts_at(key, conflicts);
    }

    fn remove(&mut self, id: &MutatorId, path: &[PathNode], terminal: Terminal) {
        self.referenced_by.remove(id);
        if path.is_empty() {
            self.must_terminate.remove(id);
            return;
        }
        let key = key_of(path);
        let Some(types) = self.children.get_mut(key) else {
            return;
        };
        let t = head_type(path, terminal);
        if let Some(child) = types.get_mut(&t) {
            child.remove(id, path.get(1..).unwrap_or_default(), terminal);
            if child.referenced_by.is_empty() {
                types.remove(&t);
            }
        }
        if types.is_empty() {
            self.children.remove(key);
        }
    }

    /// Gatekeeper's rule for the children at `key`: more than one shape
    /// (an Assign's "anything" aside), or a list keyed by more than one field,
    /// puts everyone with a shape there in conflict; a mutator that must
    /// terminate conflicts with everyone who goes further.
    fn conflicts_at(&self, key: &str, conflicts: &mut BTreeSet<MutatorId>) {
        let Some(types) = self.children.get(key) else {
            return;
        };
        let typed = types
            .keys()
            .filter(|t| **t != NodeType::Terminal(Terminal::Any))
            .count();
        let mut must_terminate = false;
        let mut has_grandchildren = false;
        for (t, child) in types {
            must_terminate |= !child.must_terminate.is_empty();
            has_grandchildren |= !child.children.is_empty();
            if *t == NodeType::Terminal(Terminal::Any) {
                continue;
            }
            if typed > 1 || (*t == NodeType::List && child.children.len() > 1) {
                conflicts.extend(child.referenced_by.iter().cloned());
            }
        }
        if must_terminate && has_grandchildren {
            for child in types.values() {
                conflicts.extend(child.must_terminate.iter().cloned());
                for grandchildren in child.children.values() {
                    for grandchild in grandchildren.values() {
                        conflicts.extend(grandchild.referenced_by.iter().cloned());
                    }
                }
            }
        }
    }

    fn conflicts_on_path(&self, path: &[PathNode], terminal: Terminal) -> bool {
        if path.is_empty() {
            return false;
        }
        let key = key_of(path);
        let Some(child) = self
            .children
            .get(key)
            .and_then(|types| types.get(&head_type(path, terminal)))
        else {
            return false;
        };
        let mut here = BTreeSet::new();
        self.conflicts_at(key, &mut here);
        !here.is_empty() || child.conflicts_on_path(path.get(1..).unwrap_or_default(), terminal)
    }
}

// === impl Shape ===

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shape::Object => f.write_str("an object"),
            Shape::List { key } => write!(f, "a list keyed by {key}"),
            Shape::Set => f.write_str("a list of values"),
            Shape::String => f.write_str("a string"),
        }
    }
}

/// ` (v1 Pod CREATE and 2 more)`: where two mutators meet, as conflict
/// messages end; nothing when `bindings` is empty.
pub(crate) fn write_bindings(f: &mut fmt::Formatter<'_>, bindings: &[Binding]) -> fmt::Result {
    if let Some((gvk, operation)) = bindings.first() {
        write!(f, " ({gvk} {operation}")?;
        if bindings.len() > 1 {
            write!(f, " and {} more", bindings.len() - 1)?;
        }
        f.write_str(")")?;
    }
    Ok(())
}

// === impl SchemaConflict ===

impl fmt::Display for SchemaConflict {
    /// `conflicts with ModifySet b about spec.containers: this mutator treats
    /// it as a list keyed by name, ModifySet b as a list of values (v1 Pod CREATE)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "conflicts with {} about {}: this mutator treats it as {}, {} as {}",
            self.with, self.path, self.mine, self.with, self.theirs
        )?;
        write_bindings(f, &self.bindings)
    }
}
