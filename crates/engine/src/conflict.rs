//! Why a loaded mutator is not enforced: it disagrees with another about the
//! schema of an object ([`SchemaConflict`]), or one of its value conditions
//! reads what another may write ([`ConditionConflict`]).

use std::fmt;

use crate::condition::ConditionConflict;
use crate::mutator::MutatorId;
use crate::schema::SchemaConflict;

/// A reason a mutator is skipped until another mutator changes or goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conflict {
    /// Two mutators disagree about a field's type; neither is enforced.
    Schema(SchemaConflict),
    /// This mutator's condition reads what another one may write; this one
    /// is not enforced, the other one is.
    Condition(ConditionConflict),
}

// === impl Conflict ===

impl Conflict {
    /// The other mutator.
    pub fn with(&self) -> &MutatorId {
        match self {
            Conflict::Schema(conflict) => &conflict.with,
            Conflict::Condition(conflict) => &conflict.with,
        }
    }
}

impl fmt::Display for Conflict {
    /// The conflict's own message; see [`SchemaConflict`] and [`ConditionConflict`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Conflict::Schema(conflict) => conflict.fmt(f),
            Conflict::Condition(conflict) => conflict.fmt(f),
        }
    }
}

impl From<SchemaConflict> for Conflict {
    fn from(conflict: SchemaConflict) -> Self {
        Conflict::Schema(conflict)
    }
}

impl From<ConditionConflict> for Conflict {
    fn from(conflict: ConditionConflict) -> Self {
        Conflict::Condition(conflict)
    }
}
