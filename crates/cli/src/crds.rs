//! `sartor crds`: the CustomResourceDefinitions of sartor's mutator kinds.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;
use sartor_api::MutatorKind;
use sartor_api::crd::{crd_file_name, crd_yaml};

use sartor_offline::{Exit, Io};

/// Print the CRDs of sartor's four mutator kinds (mutations.sartor.dev/v1),
/// generated from the types this binary was built with.
///
/// Without `--out`, prints them as one multi-document YAML stream, ready for
/// `kubectl apply -f -`. With `--out DIR`, writes one file per kind
/// (assign.yaml, assignimage.yaml, assignmetadata.yaml, modifyset.yaml), the
/// same files as the repository's crds/ directory.
#[derive(Debug, Args)]
pub struct CrdsArgs {
    /// A directory to write one file per CRD into (created if missing).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// Runs `sartor crds`.
///
/// # Errors
/// A file that cannot be written, naming it.
pub fn run(args: &CrdsArgs, io: &mut Io<'_>) -> anyhow::Result<Exit> {
    let mut stream = String::new();
    for kind in MutatorKind::ALL {
        let yaml = crd_yaml(kind).with_context(|| format!("generating the {kind} CRD"))?;
        match &args.out {
            Some(dir) => {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
                let path = dir.join(crd_file_name(kind));
                std::fs::write(&path, yaml)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            None => {
                if !stream.is_empty() {
                    stream.push_str("---\n");
                }
                stream.push_str(&yaml);
            }
        }
    }
    io.print(&stream)?;
    Ok(Exit::Ok)
}
