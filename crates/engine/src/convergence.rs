//! When a mutation has converged: Gatekeeper's rule, kept cheap.
//!
//! Gatekeeper copies the object before every pass and stops when a pass ends
//! where it started. sartor gets the same answer without a copy per pass:
//!
//! - a pass that changed nothing has converged;
//! - a later pass whose changes touch disjoint places cannot end where it
//!   started (each place it changed holds a new value), so it has not
//!   converged;
//! - pass 1 is compared with the admitted object through the originals of
//!   the places changed ([`Originals::unchanged`]);
//! - a later pass with overlapping changes (two mutators fighting over a
//!   field) is compared with its start, rebuilt by replaying the earlier
//!   passes from the admitted object, itself rebuilt from the originals
//!   (mutation is deterministic).
//!
//! Replays cost a pass each, so a set that keeps overlapping (an oscillation)
//! switches to Gatekeeper's plain copy of each pass's start after
//! [`REPLAYS`] of them.

use serde_json::Value;

use crate::mutation::{Change, Failure, Key, Step};
use crate::originals::Originals;

/// Replays allowed before switching to a copy per pass.
const REPLAYS: u8 = 2;

/// Runs the first `passes` passes again on `start` (its arguments, in
/// order), failing as the passes did.
pub(crate) type Replay<'r> = dyn FnMut(&mut Value, usize) -> Result<(), Box<Failure>> + 'r;

/// The convergence check of one mutation.
#[derive(Debug)]
pub(crate) struct Convergence {
    /// Replays left before copying each pass's start instead.
    replays: u8,
    /// The start of the current pass, when copies are being kept.
    start: Option<Value>,
}

// === impl Convergence ===

impl Convergence {
    /// The check for one mutation.
    pub(crate) fn new() -> Convergence {
        Convergence {
            replays: REPLAYS,
            start: None,
        }
    }

    /// Called when a pass is about to change `object` for the first time:
    /// keeps a copy of it when copies are being kept.
    pub(crate) fn before_first_change(&mut self, object: &Value) {
        // Copies are kept once the replays are used up.
        if self.replays == 0 && self.start.is_none() {
            self.start = Some(object.clone());
        }
    }

    /// Whether pass `pass`, which made `changes` and left `object`, ended
    /// where it started. `originals` holds what every place changed since
    /// admission held before; `replay(start, passes)` runs the first
    /// `passes` passes again on `start`.
    ///
    /// # Errors
    /// What a replay fails with (it cannot, having succeeded once, but the
    /// engine does not assume it).
    pub(crate) fn converged(
        &mut self,
        pass: usize,
        changes: &[Change],
        object: &Value,
        originals: &Originals<'_>,
        replay: &mut Replay<'_>,
    ) -> Result<bool, Box<Failure>> {
        let kept = self.start.take();
        if changes.is_empty() {
            return Ok(true);
        }
        if let Some(start) = kept {
            return Ok(start == *object);
        }
        // Pass 1 started from the admitted object: compare the places
        // changed with their originals.
        if pass == 1 {
            return Ok(originals.unchanged(object));
        }
        if !overlapping(changes) {
            return Ok(false);
        }
        self.replays = self.replays.saturating_sub(1);
        let mut start = object.clone();
        originals.restore(&mut start);
        replay(&mut start, pass - 1)?;
        Ok(start == *object)
    }
}

/// Whether some change of a pass may have undone another: two changes at the
/// same place, or one inside the other. Conservative (a glob or exclusion left
/// unpinned counts as overlapping): a false "overlapping" costs a replay, a
/// false "disjoint" would be a bug.
pub(crate) fn overlapping(changes: &[Change]) -> bool {
    let mut paths: Vec<Vec<Step<'_>>> = Vec::with_capacity(changes.len());
    for change in changes {
        let steps: Vec<Step<'_>> = change.steps().collect();
        if steps
            .iter()
            .any(|step| matches!(step, Step::Element(_, Key::Open)))
        {
            return true;
        }
        paths.push(steps);
    }
    // Sorted, every path that has another as a prefix (or equals it) comes
    // right after it or after another such path: checking neighbours is enough.
    paths.sort_unstable();
    paths
        .windows(2)
        .any(|pair| matches!(pair, [a, b] if b.starts_with(a)))
}

#[cfg(test)]
mod tests;
