//! The one way the controller follows a kube-runtime watcher, for
//! mutators, Namespaces and Providers alike: a (re)list's objects are held
//! from `Init` to `InitDone` and handed over whole, so a cache replaces its
//! objects in one step (dropping those deleted while the watch was down),
//! and a watch event is one object applied or deleted.
//!
//! ```text
//!  Init ─▶ InitApply… ─▶ InitDone ══▶ Change::Listed(every object)
//!  Apply(o) ══▶ Change::Applied(o)        Delete(o) ══▶ Change::Deleted(o)
//! ```

use kube::runtime::watcher;

/// What one watcher event means for a cache of the watched objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change<K> {
    /// A list finished: these are all the objects there are.
    Listed(Vec<K>),
    /// One object was created or changed.
    Applied(K),
    /// One object was deleted.
    Deleted(K),
}

/// The list in progress, between a watcher's `Init` and `InitDone`.
#[derive(Debug)]
pub(crate) struct Relist<K> {
    listing: Option<Vec<K>>,
}

impl<K> Default for Relist<K> {
    fn default() -> Relist<K> {
        Relist { listing: None }
    }
}

impl<K> Relist<K> {
    /// Folds one event in: `None` while a list is in progress.
    pub(crate) fn fold(&mut self, event: watcher::Event<K>) -> Option<Change<K>> {
        match event {
            watcher::Event::Init => {
                self.listing = Some(Vec::new());
                None
            }
            watcher::Event::InitApply(object) => {
                if let Some(listing) = &mut self.listing {
                    listing.push(object);
                }
                None
            }
            // A list's end with no list begun (one abandoned on an error) is
            // no list: it must not empty the cache.
            watcher::Event::InitDone => self.listing.take().map(Change::Listed),
            watcher::Event::Apply(object) => Some(Change::Applied(object)),
            watcher::Event::Delete(object) => Some(Change::Deleted(object)),
        }
    }

    /// Drops a list that failed before it was done.
    pub(crate) fn abandon(&mut self) {
        self.listing = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_is_handed_over_whole_and_events_one_by_one() {
        let mut relist = Relist::default();
        assert_eq!(relist.fold(watcher::Event::Init), None);
        assert_eq!(relist.fold(watcher::Event::InitApply("a")), None);
        assert_eq!(relist.fold(watcher::Event::InitApply("b")), None);
        assert_eq!(
            relist.fold(watcher::Event::InitDone),
            Some(Change::Listed(vec!["a", "b"]))
        );
        assert_eq!(
            relist.fold(watcher::Event::Apply("c")),
            Some(Change::Applied("c"))
        );
        assert_eq!(
            relist.fold(watcher::Event::Delete("a")),
            Some(Change::Deleted("a"))
        );
        // A relist that fails halfway hands over nothing of it.
        assert_eq!(relist.fold(watcher::Event::Init), None);
        assert_eq!(relist.fold(watcher::Event::InitApply("d")), None);
        relist.abandon();
        assert_eq!(relist.fold(watcher::Event::InitDone), None);
        // An empty list is a list: the cache empties.
        assert_eq!(relist.fold(watcher::Event::Init), None);
        assert_eq!(
            relist.fold(watcher::Event::InitDone),
            Some(Change::Listed(Vec::new()))
        );
    }
}
