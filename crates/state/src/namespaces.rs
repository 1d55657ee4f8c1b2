//! Where the webhook finds the Namespace object of a namespaced request, for
//! mutators with a `namespaceSelector`. The webhook never calls the API
//! server itself: the controller supplies a cache, file mode supplies the
//! Namespace files it was given.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{Value, json};

/// What a [`Namespaces`] provider knows of one namespace.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    /// The Namespace object.
    Found(Arc<Value>),
    /// The provider has no such namespace; a mutator that needs its labels
    /// fails to match, and the request is answered per `--on-error`.
    Unknown,
}

/// A source of Namespace objects. The webhook asks only when a mutator that
/// may apply to the object needs its Namespace.
pub trait Namespaces: Send + Sync {
    /// The Namespace named `name`, from memory.
    fn lookup(&self, name: &str) -> Lookup;

    /// The Namespace named `name` when [`Namespaces::lookup`] did not know it:
    /// a provider that can fetch one (the cluster cache, for a namespace
    /// created a moment before an object in it) does so here, without
    /// blocking a runtime thread. By default, the lookup's answer.
    fn fetch<'a>(&'a self, name: &'a str) -> Pin<Box<dyn Future<Output = Lookup> + Send + 'a>> {
        Box::pin(std::future::ready(self.lookup(name)))
    }
}

/// No provider: every namespace is known and has no labels, so a
/// `namespaceSelector` matches as it would an unlabelled namespace.
#[derive(Debug, Clone)]
pub struct Unlabelled {
    empty: Arc<Value>,
}

impl Default for Unlabelled {
    fn default() -> Unlabelled {
        Unlabelled {
            empty: Arc::new(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {}})),
        }
    }
}

impl Namespaces for Unlabelled {
    fn lookup(&self, _name: &str) -> Lookup {
        Lookup::Found(self.empty.clone())
    }
}

/// A fixed set of Namespace objects by name, such as those read from files.
#[derive(Debug, Clone, Default)]
pub struct Fixed {
    by_name: HashMap<String, Arc<Value>>,
}

impl Fixed {
    /// The provider of `namespaces`, keyed by their `metadata.name`; objects
    /// without a name are ignored.
    pub fn new(namespaces: impl IntoIterator<Item = Value>) -> Fixed {
        let by_name = namespaces
            .into_iter()
            .filter_map(|namespace| {
                let name = namespace
                    .get("metadata")?
                    .get("name")?
                    .as_str()?
                    .to_string();
                Some((name, Arc::new(namespace)))
            })
            .collect();
        Fixed { by_name }
    }
}

impl Namespaces for Fixed {
    fn lookup(&self, name: &str) -> Lookup {
        match self.by_name.get(name) {
            Some(namespace) => Lookup::Found(namespace.clone()),
            None => Lookup::Unknown,
        }
    }
}
