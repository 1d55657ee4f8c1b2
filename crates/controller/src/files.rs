//! Files as the source of mutators: a file or directory of mutator YAML (a
//! laptop, or a GitOps checkout synced into a volume), compiled into one
//! [`System`] and watched by polling.
//!
//! ```text
//!  paths ──size + mtime of every file──▶ changed? ──load_mutators + compile──▶ Compiled
//!                                                        ├─ a problem: keep the last good set
//!                                                        └─ none: Publisher::publish
//! ```
//!
//! [`compile`] is also how the CLI's offline commands turn what they read
//! into a System, so `sartor lint` and `sartor serve --mutators` agree on
//! what a set of files means.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use sartor_api::{Input, Provider, load_mutators};
use sartor_engine::{Compiled, compile};
use sartor_state::Snapshot;

use crate::feed::Feed;

/// Reads and compiles every mutator under `inputs`.
pub fn load(inputs: &[Input]) -> Compiled {
    compile(load_mutators(inputs))
}

// === watching ===

/// Size and modification time of every file under the watched paths: a
/// change in any means the set must be read again.
type Fingerprint = BTreeMap<PathBuf, (u64, Option<SystemTime>)>;

/// The mutator files under some paths, read again when they change.
#[derive(Debug, Clone)]
pub struct MutatorFiles {
    paths: Vec<PathBuf>,
    seen: Option<Fingerprint>,
}

impl MutatorFiles {
    /// The files under `paths` (each a file, or a directory read recursively).
    pub fn new(paths: Vec<PathBuf>) -> MutatorFiles {
        MutatorFiles { paths, seen: None }
    }

    /// The mutators, compiled again, when a file under the paths was added,
    /// removed or changed (size or modification time) since the last call;
    /// the first call always reads them.
    pub fn changed(&mut self) -> Option<Compiled> {
        let mut fingerprint = Fingerprint::new();
        for path in &self.paths {
            fingerprint_into(path, &mut fingerprint);
        }
        if self.seen.as_ref() == Some(&fingerprint) {
            return None;
        }
        self.seen = Some(fingerprint);
        let inputs: Vec<Input> = self.paths.iter().cloned().map(Input::Path).collect();
        Some(load(&inputs))
    }
}

/// Adds `path` (a file, or a directory walked recursively) to `fingerprint`.
/// Unreadable entries count as absent; the loader reports them.
fn fingerprint_into(path: &Path, fingerprint: &mut Fingerprint) {
    let Ok(metadata) = std::fs::metadata(path) else {
        return;
    };
    if metadata.is_dir() {
        let Ok(entries) = std::fs::read_dir(path) else {
            return;
        };
        for entry in entries.flatten() {
            // As the loader: symlinked directories are not followed (no loops).
            let symlinked_dir = entry.file_type().is_ok_and(|t| t.is_symlink())
                && std::fs::metadata(entry.path()).is_ok_and(|m| m.is_dir());
            if !symlinked_dir {
                fingerprint_into(&entry.path(), fingerprint);
            }
        }
    } else {
        fingerprint.insert(
            path.to_path_buf(),
            (metadata.len(), metadata.modified().ok()),
        );
    }
}

/// What one [`FileWatch::poll`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reload {
    /// No file changed.
    Unchanged,
    /// The files changed and a new snapshot is in force.
    Published,
    /// The files changed but some cannot be read or compiled: the last good
    /// set stays in force (or, before the first, the webhook stays unready).
    Refused,
}

/// Publishes the mutators under some paths, again whenever they change; a
/// set with a problem is refused whole.
#[derive(Debug)]
pub struct FileWatch {
    files: MutatorFiles,
    feed: Feed,
}

impl FileWatch {
    /// Watches the files under `paths`, publishing into `feed`.
    pub fn new(paths: Vec<PathBuf>, feed: Feed) -> FileWatch {
        FileWatch {
            files: MutatorFiles::new(paths),
            feed,
        }
    }

    /// Checks the files every `every`, forever; blocks the thread.
    pub fn run(mut self, every: Duration) -> ! {
        loop {
            self.poll();
            std::thread::sleep(every);
        }
    }

    /// Checks the files once and publishes them if they changed and load
    /// without a problem; logs what happened and counts it in the metrics.
    pub fn poll(&mut self) -> Reload {
        let Some(compiled) = self.files.changed() else {
            return Reload::Unchanged;
        };
        if !compiled.errors.is_empty() {
            self.feed.refuse();
            let problems: Vec<String> = compiled.errors.iter().map(ToString::to_string).collect();
            if self.feed.state().is_ready() {
                tracing::error!(problems = %problems.join("; "), "mutators changed but cannot be loaded; keeping the last good set");
            } else {
                tracing::error!(problems = %problems.join("; "), "mutators cannot be loaded; not ready until they can");
            }
            return Reload::Refused;
        }
        let providers: Vec<Provider> = compiled
            .providers
            .iter()
            .map(|p| p.provider.clone())
            .collect();
        if let Err(errors) = self.feed.set_providers(&providers) {
            self.feed.refuse();
            let problems: Vec<String> = errors
                .iter()
                .map(|error| {
                    let origin = compiled
                        .providers
                        .iter()
                        .find(|p| p.provider.name() == error.name)
                        .map(|p| p.origin.to_string())
                        .unwrap_or_default();
                    format!("{origin}: {error}")
                })
                .collect();
            tracing::error!(problems = %problems.join("; "), "external data providers cannot be used; keeping the last good set");
            return Reload::Refused;
        }
        for (origin, id, conflict) in compiled.conflicts() {
            tracing::warn!(problem = %format_args!("{origin}: {id}: {conflict}"), "mutator conflict: not enforced until it clears");
        }
        let snapshot = Snapshot {
            system: compiled.system,
            errors: Vec::new(),
        };
        let (mutators, conflicted) = (snapshot.system.len(), snapshot.system.conflicted().len());
        // Published before it is logged: whoever reads the log finds it in force.
        self.feed.publish(snapshot);
        tracing::info!(
            mutators,
            conflicted,
            providers = providers.len(),
            "mutators loaded"
        );
        Reload::Published
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;

    use prometheus_client::registry::Registry;
    use sartor_state::{Accepting, State};
    use sartor_tests::cluster::TempDir;

    use super::*;
    use crate::metrics::Metrics;

    fn assign(name: &str, location: &str) -> String {
        format!(
            "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata:\n  name: {name}\n\
             spec:\n  applyTo: [{{groups: [\"\"], versions: [v1], kinds: [Pod]}}]\n  \
             location: \"{location}\"\n  parameters:\n    assign:\n      value: x\n"
        )
    }

    /// A temporary directory of mutator files, watched for a webhook.
    struct Watched {
        dir: TempDir,
        watch: FileWatch,
        state: State,
    }

    impl Watched {
        /// A directory holding `files` (name, text), watched.
        fn start(files: &[(&str, &str)]) -> Watched {
            let dir = TempDir::new("sartor-files").unwrap();
            for (name, text) in files {
                std::fs::write(dir.path().join(name), text).unwrap();
            }
            let (publisher, state) = sartor_state::channel(Arc::new(Accepting));
            let metrics = Arc::new(Metrics::new(&mut Registry::default()));
            let watch = FileWatch::new(
                vec![dir.path().to_path_buf()],
                Feed::new(publisher, metrics),
            );
            Watched { dir, watch, state }
        }

        fn write(&self, name: &str, text: &str) {
            std::fs::write(self.dir.path().join(name), text).unwrap();
        }

        /// The locations of the mutators in force.
        fn in_force(&self) -> Vec<String> {
            self.state
                .current()
                .map(|snapshot| {
                    snapshot
                        .system
                        .mutators()
                        .map(|m| m.location().to_string())
                        .collect()
                })
                .unwrap_or_default()
        }
    }

    #[test]
    fn a_rewritten_file_is_published_as_a_new_snapshot() {
        let mut watched = Watched::start(&[("pull.yaml", &assign("pull", "spec.a"))]);
        assert_eq!(watched.watch.poll(), Reload::Published);
        assert_eq!(watched.in_force(), ["spec.a"]);
        assert_eq!(watched.watch.poll(), Reload::Unchanged);

        watched.write("pull.yaml", &assign("pull", "spec.longer"));
        assert_eq!(watched.watch.poll(), Reload::Published);
        assert_eq!(watched.in_force(), ["spec.longer"]);

        watched.write("other.yaml", &assign("other", "spec.b"));
        assert_eq!(watched.watch.poll(), Reload::Published);
        assert_eq!(watched.in_force(), ["spec.b", "spec.longer"]);
    }

    #[test]
    fn a_broken_file_keeps_the_last_good_set() {
        let mut watched = Watched::start(&[("pull.yaml", &assign("pull", "spec.a"))]);
        assert_eq!(watched.watch.poll(), Reload::Published);

        watched.write("pull.yaml", "kind: Assign\n  bad: [");
        assert_eq!(watched.watch.poll(), Reload::Refused);
        assert_eq!(watched.in_force(), ["spec.a"]);
        // A mutator that reads but does not compile is refused too.
        watched.write("pull.yaml", &assign("pull", "metadata.labels.x"));
        assert_eq!(watched.watch.poll(), Reload::Refused);
        assert_eq!(watched.in_force(), ["spec.a"]);

        std::fs::remove_file(watched.dir.path().join("pull.yaml")).unwrap();
        assert_eq!(watched.watch.poll(), Reload::Published);
        assert_eq!(watched.in_force(), Vec::<String>::new());
    }

    #[test]
    fn nothing_is_published_until_the_files_load() {
        let mut watched = Watched::start(&[("broken.yaml", "apiVersion: [")]);
        assert_eq!(watched.watch.poll(), Reload::Refused);
        assert!(!watched.state.is_ready());
    }

    #[test]
    fn errors_and_conflicts_name_the_file_and_the_mutator() {
        let dir = TempDir::new("sartor-files").unwrap();
        std::fs::write(
            dir.path().join("set.yaml"),
            [
                assign("a", "spec.x.y"),
                assign("b", "spec.x[name: n].y"),
                assign("bad", "metadata.labels.x"),
            ]
            .join("---\n"),
        )
        .unwrap();
        let compiled = load(&[Input::Path(dir.path().to_path_buf())]);
        let errors: Vec<String> = compiled.errors.iter().map(ToString::to_string).collect();
        let file = dir.path().join("set.yaml").display().to_string();
        assert_eq!(
            errors,
            [format!(
                "{file}: document 3: Assign bad: spec.location: Assign cannot change metadata; \
                 use AssignMetadata for labels and annotations"
            )]
        );
        let conflicted: Vec<String> = compiled
            .conflicts()
            .iter()
            .map(|(origin, id, _)| format!("{origin}: {id}"))
            .collect();
        assert_eq!(
            conflicted,
            [
                format!("{file}: document 1: Assign a"),
                format!("{file}: document 2: Assign b")
            ]
        );
    }
}
