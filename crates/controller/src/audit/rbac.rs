//! What the in-cluster audit may list and watch: `list` and `watch` on
//! exactly the resources the mutators can change on a stored object's next
//! write (what the audit lists), and on Namespaces. sartor cannot grant
//! itself that as the mutators change (a role granting more than its writer
//! holds needs `escalate`), so `sartor audit rbac` prints it for an admin
//! to apply, and to apply again when the mutators change.
//!
//! ```text
//!  each enforced mutator ──Targets on UPDATE, any version──▶ rules::derived
//!    (the webhook's rules: kinds to resources, here through offline Scopes)
//!    ──▶ (group, resource) pairs ──union; those a `*` covers folded in──▶
//!  one rule per API group, each resource's mutators in a comment above it
//! ```
//!
//! A mutator that applies to every kind (an AssignMetadata whose
//! `match.kinds` names none, or `kinds: ['*']` of a group) needs every
//! resource of every group (of that group), Secrets included: that cannot be
//! narrowed but by narrowing its `match.kinds`, and the output says so above
//! the rule.

use std::collections::BTreeMap;
use std::io::{self, Write};

use sartor_engine::{BUILTIN_KUBERNETES_VERSION, KindPattern, MutatorId, Scopes, System, Targets};

use super::in_cluster::OPERATION;
use crate::rules::{Served, derived};

/// The ClusterRole and ClusterRoleBinding's name when none is given: not
/// `sartor-audit`, the role of manifests/optional/audit/rbac.yaml (reports
/// and Lease), which applying this one would otherwise replace.
pub const DEFAULT_NAME: &str = "sartor-audit-objects";

/// What the Namespaces are granted for, in the output.
const NAMESPACES_WHY: &str =
    "the audit itself (namespaceSelectors, the exemption and repair labels)";

/// The role's name and the service account it is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RbacOptions {
    /// The ClusterRole's and ClusterRoleBinding's name.
    pub name: String,
    /// The service account sartor runs as (the install's `sartor`).
    pub service_account: String,
    /// The namespace sartor runs in.
    pub namespace: String,
}

impl Default for RbacOptions {
    fn default() -> RbacOptions {
        RbacOptions {
            name: DEFAULT_NAME.to_string(),
            service_account: "sartor".to_string(),
            namespace: "sartor-system".to_string(),
        }
    }
}

/// A kind mutators apply to whose resource (plural) is not known offline,
/// so no rule can name it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{kind}, which {} to, has no resource (plural) known offline: give its CRD among the mutator paths, or `kubectl api-resources` output with --api-resources",
    named_verb(mutators, "applies", "apply")
)]
pub struct UnknownKind {
    /// `Kind.group/*`, as [`KindPattern`] prints it.
    pub kind: String,
    /// The mutators that apply to it, in application order.
    pub mutators: Vec<MutatorId>,
}

/// The audit's objects role: which resources of which groups, and why each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRbac {
    options: RbacOptions,
    /// By API group (`*`: every group), the rule's resources and the
    /// comment lines above it.
    rules: BTreeMap<String, Rule>,
    /// Kinds the mutators apply to that their group does not serve, each
    /// with its mutators: nothing to list, said in the output.
    absent: BTreeMap<String, Vec<MutatorId>>,
    /// Kinds mutators change only on CREATE, which the audit never looks
    /// at, each with its mutators: said in the output.
    not_audited: BTreeMap<String, Vec<MutatorId>>,
}

/// One rule of the role.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Rule {
    /// Sorted; `*` alone when every resource of the group is granted.
    resources: Vec<String>,
    /// What each of its resources is granted for, as comment lines.
    why: Vec<String>,
    /// The same of each pair a `*` of it covers, said after.
    covered: Vec<String>,
}

/// How `audit_rbac` knows a kind pattern.
enum Known {
    /// Its resource is known, or it names no kind (`*`).
    Yes,
    /// Its group is known whole and has no such kind.
    NotServed,
    /// Its resource cannot be told.
    Unknown,
}

/// The role granting the audit `list` and `watch` on what the enforced
/// mutators of `system` can change on an UPDATE (what the in-cluster audit
/// lists) and on Namespaces, kinds mapped to resources by
/// `rules::derived` (the webhook's own derivation) through `resources`.
///
/// # Errors
/// Every kind whose resource `resources` does not know, with its mutators.
pub fn audit_rbac(
    system: &System,
    resources: &Scopes,
    options: RbacOptions,
) -> Result<AuditRbac, Vec<UnknownKind>> {
    let served = Served::of_scopes(resources);
    // (group, resource) to what it is granted for.
    let mut granted: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    granted.insert(
        (String::new(), "namespaces".to_string()),
        vec![NAMESPACES_WHY.to_string()],
    );
    let mut absent: BTreeMap<String, Vec<MutatorId>> = BTreeMap::new();
    let mut unknown: BTreeMap<String, Vec<MutatorId>> = BTreeMap::new();
    let mut not_audited: BTreeMap<String, Vec<MutatorId>> = BTreeMap::new();
    let enforced = system
        .mutators()
        .filter(|mutator| !system.is_conflicted(mutator.id()));
    for mutator in enforced {
        let id = mutator.id();
        let all = Targets::of([&**mutator]);
        let audited = all.on(OPERATION);
        for (pattern, _) in all.iter() {
            if !audited.iter().any(|(kind, _)| kind == pattern) {
                not_audited
                    .entry(
                        KindPattern {
                            version: None,
                            ..pattern.clone()
                        }
                        .to_string(),
                    )
                    .or_default()
                    .push(id.clone());
            }
        }
        let mut targets = Vec::new();
        for (pattern, operations) in audited.iter() {
            // RBAC has no versions: a kind is granted in all of them.
            let pattern = KindPattern {
                version: None,
                ..pattern.clone()
            };
            match known(resources, &pattern) {
                Known::Yes => targets.push((pattern, operations)),
                Known::NotServed => absent
                    .entry(pattern.to_string())
                    .or_default()
                    .push(id.clone()),
                Known::Unknown => unknown
                    .entry(pattern.to_string())
                    .or_default()
                    .push(id.clone()),
            }
        }
        let targets: Targets = targets.into_iter().collect();
        if targets.is_empty() {
            continue;
        }
        for rule in derived(&targets, &served) {
            for group in rule.api_groups.iter().flatten() {
                let listed = rule.resources.iter().flatten();
                // A subresource (pods/ephemeralcontainers) is written, not listed.
                for resource in listed.filter(|resource| !resource.contains('/')) {
                    let why = granted
                        .entry((group.clone(), resource.clone()))
                        .or_default();
                    let name = named([id]);
                    if !why.contains(&name) {
                        why.push(name);
                    }
                }
            }
        }
    }
    if !unknown.is_empty() {
        return Err(unknown
            .into_iter()
            .map(|(kind, mutators)| UnknownKind { kind, mutators })
            .collect());
    }
    Ok(AuditRbac {
        options,
        rules: rules(&granted),
        absent,
        not_audited,
    })
}

/// Whether `resources` knows the resource of `pattern` (any version).
fn known(resources: &Scopes, pattern: &KindPattern) -> Known {
    match (pattern.group.as_deref(), pattern.kind.as_deref()) {
        (_, None) => Known::Yes,
        (Some(group), Some(kind)) => match resources.plural(group, kind) {
            Some(_) => Known::Yes,
            None if resources.lists_group(group) => Known::NotServed,
            None => Known::Unknown,
        },
        (None, Some(kind)) => match resources.resources().any(|(_, k, _)| k == kind) {
            true => Known::Yes,
            false => Known::Unknown,
        },
    }
}

/// The rules granting every pair of `granted`, a pair that a `*` of its
/// group, of every group, or of both covers folded into that rule.
fn rules(granted: &BTreeMap<(String, String), Vec<String>>) -> BTreeMap<String, Rule> {
    let any = || "*".to_string();
    let mut rules: BTreeMap<String, Rule> = BTreeMap::new();
    for ((group, resource), why) in granted {
        let covers = [
            (any(), any()),
            (group.clone(), any()),
            (any(), resource.clone()),
        ];
        let (host_group, host_resource) = covers
            .into_iter()
            .find(|cover| {
                cover != &(group.clone(), resource.clone()) && granted.contains_key(cover)
            })
            .unwrap_or_else(|| (group.clone(), resource.clone()));
        let rule = rules.entry(host_group.clone()).or_default();
        let lines = match (&host_group, &host_resource) == (group, resource) {
            true => {
                rule.resources.push(resource.clone());
                &mut rule.why
            }
            false => &mut rule.covered,
        };
        lines.push(format!("# {}: {}", what(group, resource), why.join(", ")));
        if resource == "*" {
            let (who, whose) = match why.len() {
                1 => ("it applies", "its"),
                _ => ("they apply", "their"),
            };
            let of = match group.as_str() {
                "*" => String::new(),
                group => format!(" of {}", group_name(group)),
            };
            lines.push(format!(
                "#   {who} to every kind{of}: this cannot be narrowed but by narrowing {whose} match.kinds"
            ));
        }
    }
    for rule in rules.values_mut() {
        let covered = std::mem::take(&mut rule.covered);
        rule.why.extend(covered);
    }
    rules
}

/// What a (group, resource) pair is, for a comment.
fn what(group: &str, resource: &str) -> String {
    match (group, resource) {
        ("*", "*") => "every resource of every group, Secrets included".to_string(),
        (group, "*") => format!("every resource of {}", group_name(group)),
        ("*", resource) => format!("{resource} of every group"),
        ("", resource) => resource.to_string(),
        (group, resource) => format!("{resource}.{group}"),
    }
}

/// An API group, for a comment.
fn group_name(group: &str) -> String {
    match group {
        "" => "the core group".to_string(),
        group => group.to_string(),
    }
}

/// `Kind/name, Kind/name` and `singular` or `plural` after them.
fn named_verb(ids: &[MutatorId], singular: &str, plural: &str) -> String {
    match ids.len() {
        1 => format!("{} {singular}", named(ids)),
        _ => format!("{} {plural}", named(ids)),
    }
}

/// `Kind/name, Kind/name`.
fn named<'a>(ids: impl IntoIterator<Item = &'a MutatorId>) -> String {
    ids.into_iter()
        .map(|id| format!("{}/{}", id.kind, id.name))
        .collect::<Vec<_>>()
        .join(", ")
}

// === impl AuditRbac ===

impl AuditRbac {
    /// Whether some rule grants every resource of a group or of every
    /// group (a mutator applies to every kind).
    pub fn is_wide(&self) -> bool {
        self.rules
            .values()
            .any(|rule| rule.resources.iter().any(|resource| resource == "*"))
    }

    /// The ClusterRole and its ClusterRoleBinding, as YAML for `kubectl
    /// apply -f -`, the header comment first.
    ///
    /// # Errors
    /// Writing to `out` failed.
    pub fn write_yaml(&self, out: &mut impl Write) -> io::Result<()> {
        self.write_header(out, "# Apply it beside manifests/optional/audit/rbac.yaml.")?;
        let name = scalar(&self.options.name);
        writeln!(out, "apiVersion: rbac.authorization.k8s.io/v1")?;
        writeln!(out, "kind: ClusterRole")?;
        self.write_metadata(out, &name)?;
        writeln!(out, "rules:")?;
        for (group, rule) in &self.rules {
            for line in &rule.why {
                writeln!(out, "{line}")?;
            }
            writeln!(out, "- apiGroups: [{}]", scalar(group))?;
            writeln!(out, "  resources: [{}]", list(&rule.resources))?;
            writeln!(out, "  verbs: [list, watch]")?;
        }
        writeln!(out, "---")?;
        writeln!(out, "apiVersion: rbac.authorization.k8s.io/v1")?;
        writeln!(out, "kind: ClusterRoleBinding")?;
        self.write_metadata(out, &name)?;
        writeln!(out, "roleRef:")?;
        writeln!(out, "  apiGroup: rbac.authorization.k8s.io")?;
        writeln!(out, "  kind: ClusterRole")?;
        writeln!(out, "  name: {name}")?;
        writeln!(out, "subjects:")?;
        writeln!(out, "- kind: ServiceAccount")?;
        writeln!(out, "  name: {}", scalar(&self.options.service_account))?;
        writeln!(out, "  namespace: {}", scalar(&self.options.namespace))
    }

    /// The same rules as the Helm chart's `audit.rules` value, a values
    /// file for `helm upgrade -f`: the chart renders them as this
    /// ClusterRole (`RELEASE-audit-objects`) and its binding.
    ///
    /// # Errors
    /// Writing to `out` failed.
    pub fn write_helm_values(&self, out: &mut impl Write) -> io::Result<()> {
        self.write_header(
            out,
            "# Give it to the chart beside your values (helm upgrade -f THIS): it renders\n\
             # these rules as the ClusterRole RELEASE-audit-objects and its binding.",
        )?;
        writeln!(out, "audit:")?;
        writeln!(out, "  rules:")?;
        for (group, rule) in &self.rules {
            for line in &rule.why {
                writeln!(out, "  {line}")?;
            }
            writeln!(out, "  - apiGroups: [{}]", scalar(group))?;
            writeln!(out, "    resources: [{}]", list(&rule.resources))?;
        }
        Ok(())
    }

    /// What the objects are, how to apply them (`apply`, comment lines),
    /// and the kinds left out.
    fn write_header(&self, out: &mut impl Write, apply: &str) -> io::Result<()> {
        writeln!(
            out,
            "# What the in-cluster audit (sartor serve --audit-interval) may list and\n\
             # watch: the resources these mutators can change on an object's next write,\n\
             # and Namespaces. Printed by `sartor audit rbac` from the mutators: print\n\
             # and apply it again when they change; a kind not granted is left out of\n\
             # the audit and named on /readyz.\n\
             {apply}"
        )?;
        for (kind, mutators) in &self.absent {
            writeln!(
                out,
                "# Not granted: {kind}, which {} to, is not served (Kubernetes {BUILTIN_KUBERNETES_VERSION}, --api-resources).",
                named_verb(mutators, "applies", "apply")
            )?;
        }
        for (kind, mutators) in &self.not_audited {
            writeln!(
                out,
                "# Not granted: {kind}, which {} only on CREATE: the audit looks at the next UPDATE.",
                named_verb(mutators, "changes", "change")
            )?;
        }
        Ok(())
    }

    /// `metadata:` with `name` and sartor's labels.
    fn write_metadata(&self, out: &mut impl Write, name: &str) -> io::Result<()> {
        writeln!(out, "metadata:")?;
        writeln!(out, "  name: {name}")?;
        writeln!(out, "  labels:")?;
        writeln!(out, "    app.kubernetes.io/name: sartor")?;
        writeln!(out, "    app.kubernetes.io/part-of: sartor")
    }
}

/// A flow list of scalars.
fn list(items: &[String]) -> String {
    items
        .iter()
        .map(|item| scalar(item))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `text` as a YAML scalar: plain when it is a lower-case name no YAML
/// reader takes for a number, boolean or null; quoted otherwise (`''`,
/// `'*'`, anything else as a JSON string, which YAML reads the same).
fn scalar(text: &str) -> String {
    const RESERVED: [&str; 10] = [
        "true", "false", "null", "yes", "no", "on", "off", "y", "n", "~",
    ];
    let plain = text.starts_with(|c: char| c.is_ascii_lowercase())
        && text
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && !RESERVED.contains(&text);
    match text {
        "" => "''".to_string(),
        "*" => "'*'".to_string(),
        _ if plain => text.to_string(),
        _ => serde_json::Value::from(text).to_string(),
    }
}

#[cfg(test)]
mod tests;
