//! `sartor audit rbac`: the ClusterRole the in-cluster audit needs to list
//! and watch what the mutators can change, for an admin to apply (sartor
//! cannot grant it to itself). Offline: the files and the built-in kinds,
//! `--api-resources` and CRDs, as `sartor export map` reads them.

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use sartor_controller::audit::rbac::{self, RbacOptions};
use sartor_offline::export::{MutatorsAndResources, read_mutators};
use sartor_offline::{Exit, Io};

/// Print the RBAC the in-cluster audit needs to list what the mutators can change.
///
/// A ClusterRole (and its binding) that lets the in-cluster audit (`sartor
/// serve --audit-interval`) list and watch exactly the resources the
/// mutators can change, and Namespaces, for `kubectl apply -f -` beside
/// manifests/optional/audit/rbac.yaml; or the Helm chart's `audit.rules`
/// (`-o helm-values`). Exit 2: invalid input, or a kind whose resource is
/// not known offline (give its CRD or --api-resources).
#[derive(Debug, Args)]
pub struct RbacArgs {
    /// Mutator files or directories (sartor's or Gatekeeper's apiVersions;
    /// CRDs among them name their kinds' resources); repeat for more.
    #[arg(long = "mutators", short = 'm', value_name = "PATH", required = true, action = clap::ArgAction::Append)]
    mutators: Vec<String>,
    /// The ClusterRole's and ClusterRoleBinding's name (not `sartor-audit`,
    /// the role of the reports and Lease).
    #[arg(long, default_value = rbac::DEFAULT_NAME)]
    name: String,
    /// The service account sartor runs as.
    #[arg(long, default_value = "sartor")]
    service_account: String,
    /// The namespace sartor runs in.
    #[arg(long, default_value = "sartor-system")]
    service_account_namespace: String,
    /// The output of `kubectl api-resources` for the cluster: the resources
    /// (plurals) of kinds that are not built in, beside the CRDs among the
    /// mutator paths; repeat for more.
    #[arg(long = "api-resources", value_name = "FILE", action = clap::ArgAction::Append)]
    api_resources: Vec<String>,
    /// `yaml`: the ClusterRole and its ClusterRoleBinding; `helm-values`:
    /// the same rules as the chart's `audit.rules`, a values file.
    #[arg(long, short = 'o', value_enum, default_value_t = RbacFormat::Yaml)]
    output: RbacFormat,
}

/// How `sartor audit rbac` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum RbacFormat {
    /// Objects for kubectl.
    Yaml,
    /// A values file for the Helm chart.
    HelmValues,
}

/// Runs `sartor audit rbac`.
///
/// # Errors
/// Writing to stdout failed.
pub fn run(args: &RbacArgs, io: &mut Io<'_>) -> anyhow::Result<Exit> {
    let Some(MutatorsAndResources {
        system,
        origins,
        resources,
        ..
    }) = read_mutators(&args.mutators, &args.api_resources, io)?
    else {
        return Ok(Exit::InvalidInput);
    };
    let options = RbacOptions {
        name: args.name.clone(),
        service_account: args.service_account.clone(),
        namespace: args.service_account_namespace.clone(),
    };
    let role = match rbac::audit_rbac(&system, &resources, options) {
        Ok(role) => role,
        Err(unknown) => {
            for kind in unknown {
                let files: Vec<String> = kind
                    .mutators
                    .iter()
                    .filter_map(|id| origins.get(id))
                    .map(ToString::to_string)
                    .collect();
                writeln!(io.err, "error: {}: {kind}", files.join(", "))?;
            }
            return Ok(Exit::InvalidInput);
        }
    };
    let mut out = Vec::new();
    match args.output {
        RbacFormat::Yaml => role.write_yaml(&mut out)?,
        RbacFormat::HelmValues => role.write_helm_values(&mut out)?,
    }
    io.out
        .write_all(&out)
        .and_then(|()| io.out.flush())
        .context("writing to stdout")?;
    if role.is_wide() {
        writeln!(
            io.err,
            "warning: a mutator applies to every kind, so the role grants every resource of a group (see the comments)"
        )?;
    }
    Ok(Exit::Ok)
}
