//! sartor's mutation engine: pure Rust, no I/O, no async. JSON in, mutated
//! JSON out.
//!
//! ```text
//!   location + pathTests ──▶ walk::mutate ──▶ Setter (one per mutator kind)
//! ```
//!
//! [`walk`] is the one generic walk every mutator kind shares: follow the
//! location through objects and keyed lists, apply pathTests at each depth,
//! create what is missing, and hand the last step to the kind's [`walk::Setter`].

pub mod walk;
