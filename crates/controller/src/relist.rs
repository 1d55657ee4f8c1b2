//! The one way the controller follows a kube-runtime watcher, for
//! mutators, Namespaces, Providers and the audit's kinds alike: a
//! (re)list's objects are folded from `Init` to `InitDone` and handed over
//! whole, so a cache replaces its objects in one step (dropping those
//! deleted while the watch was down), and a watch event is one object
//! applied or deleted.
//!
//! ```text
//!  Init ─▶ InitApply… (each folded in) ─▶ InitDone ══▶ Change::Listed(the fold)
//!  Apply(o) ══▶ Change::Applied(o)        Delete(o) ══▶ Change::Deleted(o)
//! ```

use kube::runtime::watcher;

/// What one watcher event means for a cache of the watched objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change<K, A = Vec<K>> {
    /// A list finished: what it found, folded (all the objects there are).
    Listed(A),
    /// One object was created or changed.
    Applied(K),
    /// One object was deleted.
    Deleted(K),
}

/// One event, folded: an object of the list in progress for the caller to
/// add to the list's accumulator, or a change, or nothing yet.
#[derive(Debug)]
pub(crate) enum Step<'a, K, A> {
    /// A list is in progress and this is one of its objects.
    Add(&'a mut A, K),
    /// A list is done, or an object was applied or deleted.
    Changed(Change<K, A>),
    /// A list began, or an object came with no list begun.
    Pending,
}

/// The list in progress, between a watcher's `Init` and `InitDone`, folded
/// into `A`: every object (`Vec`), or what a cache makes of each (the
/// audit's findings), so a list of any size is never held whole.
#[derive(Debug)]
pub(crate) struct Relist<A> {
    listing: Option<A>,
}

impl<A> Default for Relist<A> {
    fn default() -> Relist<A> {
        Relist { listing: None }
    }
}

impl<A: Default> Relist<A> {
    /// Folds one event in.
    pub(crate) fn step<K>(&mut self, event: watcher::Event<K>) -> Step<'_, K, A> {
        match event {
            watcher::Event::Init => {
                self.listing = Some(A::default());
                Step::Pending
            }
            watcher::Event::InitApply(object) => match &mut self.listing {
                Some(listing) => Step::Add(listing, object),
                None => Step::Pending,
            },
            // A list's end with no list begun (one abandoned on an error) is
            // no list: it must not empty the cache.
            watcher::Event::InitDone => match self.listing.take() {
                Some(listing) => Step::Changed(Change::Listed(listing)),
                None => Step::Pending,
            },
            watcher::Event::Apply(object) => Step::Changed(Change::Applied(object)),
            watcher::Event::Delete(object) => Step::Changed(Change::Deleted(object)),
        }
    }

    /// Drops a list that failed before it was done.
    pub(crate) fn abandon(&mut self) {
        self.listing = None;
    }
}

impl<K> Relist<Vec<K>> {
    /// Folds one event in, a list's objects gathered whole: `None` while a
    /// list is in progress.
    pub(crate) fn fold(&mut self, event: watcher::Event<K>) -> Option<Change<K>> {
        match self.step(event) {
            Step::Add(listing, object) => {
                listing.push(object);
                None
            }
            Step::Changed(change) => Some(change),
            Step::Pending => None,
        }
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
