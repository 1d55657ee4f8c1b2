//! What a set of mutator documents compiles into: one [`System`], where
//! each mutator was read, and what yielded no mutator. The one compile step
//! the server's file watch and the offline commands (`sartor lint`,
//! `mutate`, `test`) share, so they cannot disagree on what a set of files
//! means. Pure: the reading is the loader's ([`sartor_api::load_mutators`]).

use std::fmt;

use sartor_api::{LoadError, Loaded, LoadedProvider, Origin};

use crate::conflict::Conflict;
use crate::mutator::{CompileError, Mutator, MutatorId};
use crate::system::System;

/// Mutators read from files and compiled.
#[derive(Debug, Default)]
pub struct Compiled {
    /// The mutators that compiled (those in conflict included: the System
    /// does not enforce them).
    pub system: System,
    /// Where each mutator of the system was read, in input order.
    pub origins: Vec<(MutatorId, Origin)>,
    /// What could not be read or compiled, in input order.
    pub errors: Vec<FileError>,
    /// The external data providers read, in input order.
    pub providers: Vec<LoadedProvider>,
}

/// A document that yields no mutator.
#[derive(Debug)]
pub enum FileError {
    /// It could not be read or is not a valid mutator.
    Load(LoadError),
    /// It is a mutator that does not compile.
    Compile {
        /// Where it was read.
        origin: Origin,
        /// Why it does not compile.
        error: CompileError,
    },
}

/// Compiles what the loader read into one System.
pub fn compile(loaded: Loaded) -> Compiled {
    let mut compiled = Compiled {
        errors: loaded.errors.into_iter().map(FileError::Load).collect(),
        providers: loaded.providers,
        ..Compiled::default()
    };
    for mutator in loaded.mutators {
        match Mutator::compile(&mutator.object) {
            Ok(mutator_compiled) => {
                // sartor's API previews generated objects as created.
                let group = mutator.api_version.split_once('/').map(|(group, _)| group);
                let mutator_compiled = if group == Some(sartor_api::GROUP) {
                    mutator_compiled.generated_as_created()
                } else {
                    mutator_compiled
                };
                compiled
                    .origins
                    .push((mutator_compiled.id().clone(), mutator.origin));
                compiled.system.upsert(mutator_compiled);
            }
            Err(error) => compiled.errors.push(FileError::Compile {
                origin: mutator.origin,
                error,
            }),
        }
    }
    compiled
}

// === impl Compiled ===

impl Compiled {
    /// Every conflict of every mutator, with where the mutator was read, in
    /// input order (a conflict between two mutators is listed on both).
    pub fn conflicts(&self) -> Vec<(&Origin, &MutatorId, Conflict)> {
        self.origins
            .iter()
            .flat_map(|(id, origin)| {
                self.system
                    .conflicts(id)
                    .into_iter()
                    .map(move |conflict| (origin, id, conflict))
            })
            .collect()
    }
}

// === impl FileError ===

impl FileError {
    /// Where the document is.
    pub fn origin(&self) -> &Origin {
        match self {
            FileError::Load(error) => &error.origin,
            FileError::Compile { origin, .. } => origin,
        }
    }

    /// `Kind name` of the document, when known.
    pub fn subject(&self) -> Option<String> {
        match self {
            FileError::Load(error) => error.subject.clone(),
            FileError::Compile { error, .. } => Some(error.mutator.to_string()),
        }
    }

    /// What is wrong, without where.
    pub fn message(&self) -> String {
        match self {
            FileError::Load(error) => error.problem.to_string(),
            FileError::Compile { error, .. } => error.problem.to_string(),
        }
    }
}

impl fmt::Display for FileError {
    /// `file: document N: Kind name: message`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.origin())?;
        if let Some(subject) = self.subject() {
            write!(f, ": {subject}")?;
        }
        write!(f, ": {}", self.message())
    }
}
