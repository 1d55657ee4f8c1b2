//! The objects sartor never mutates, whatever its mutators match: decided
//! here once, by group and kind, for the webhook, `sartor mutate` and
//! `sartor test` alike (the engine's `System::mutate` asks [`protected`]).

use std::fmt;

use crate::{EXPANSION_GROUP, EXTERNAL_DATA_GROUP, GATEKEEPER_GROUP};

/// The domain of sartor's API groups: `mutations.sartor.dev` and any group
/// sartor adds later end in it.
pub const SARTOR_DOMAIN: &str = "sartor.dev";

/// The groups of Gatekeeper's policy system that Gatekeeper's mutation
/// webhook never mutates: exactly the fixed list of its
/// `isGatekeeperResource` (v3.23.1, `pkg/webhook/common.go:119-132`, called by `pkg/webhook/mutation.go:117`), an
/// exact match on the request's group. Gatekeeper's other groups
/// (`syncset`, `connection`, `gvkmanifest`) are not on it, and are mutated
/// by Gatekeeper as by sartor.
pub const GATEKEEPER_PROTECTED_GROUPS: [&str; 7] = [
    "templates.gatekeeper.sh",
    "constraints.gatekeeper.sh",
    GATEKEEPER_GROUP,
    "config.gatekeeper.sh",
    EXTERNAL_DATA_GROUP,
    EXPANSION_GROUP,
    "status.gatekeeper.sh",
];

/// The group of the admission configuration kinds.
pub const ADMISSION_REGISTRATION_GROUP: &str = "admissionregistration.k8s.io";

/// The kinds of [`ADMISSION_REGISTRATION_GROUP`] the API server never sends
/// to admission webhooks, so that no webhook can lock the cluster out of
/// fixing its webhooks (k8s.io/apiserver v0.37.2,
/// `pkg/admission/plugin/webhook/predicates/rules/rules.go`,
/// `IsExemptAdmissionConfigurationResource`).
pub const ADMISSION_CONFIGURATION_KINDS: [&str; 6] = [
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
];

/// Why sartor never mutates an object: see [`protected`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protection {
    /// sartor's own API (a group under [`SARTOR_DOMAIN`]): mutators that
    /// changed mutator objects could change themselves and each other.
    Sartor,
    /// Gatekeeper's policy system ([`GATEKEEPER_PROTECTED_GROUPS`]), which
    /// Gatekeeper's own webhook refuses to mutate: left so whether or not
    /// Gatekeeper runs beside sartor, with or without `--gatekeeper-compat`.
    Gatekeeper,
    /// Admission configuration ([`ADMISSION_CONFIGURATION_KINDS`]), which the
    /// API server never sends to a webhook: left so offline too, so that
    /// `sartor mutate` answers as the cluster stores it.
    AdmissionConfiguration,
}

/// Whether sartor never mutates objects of `group` (empty for the core
/// group) and `kind`, and why; `None` for every other object.
///
/// ```
/// use sartor_api::{Protection, protected};
///
/// assert_eq!(protected("constraints.gatekeeper.sh", "K8sRequiredLabels"), Some(Protection::Gatekeeper));
/// assert_eq!(protected("mutations.sartor.dev", "Assign"), Some(Protection::Sartor));
/// assert_eq!(protected("", "ConfigMap"), None);
/// ```
pub fn protected(group: &str, kind: &str) -> Option<Protection> {
    if group == SARTOR_DOMAIN
        || group
            .strip_suffix(SARTOR_DOMAIN)
            .is_some_and(|prefix| prefix.ends_with('.'))
    {
        Some(Protection::Sartor)
    } else if GATEKEEPER_PROTECTED_GROUPS.contains(&group) {
        Some(Protection::Gatekeeper)
    } else if group == ADMISSION_REGISTRATION_GROUP && ADMISSION_CONFIGURATION_KINDS.contains(&kind)
    {
        Some(Protection::AdmissionConfiguration)
    } else {
        None
    }
}

impl fmt::Display for Protection {
    /// Why the object is left as it is, in one clause.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Protection::Sartor => "sartor never mutates its own API (*.sartor.dev)",
            Protection::Gatekeeper => {
                "sartor never mutates Gatekeeper's policy objects, as Gatekeeper's webhook does not"
            }
            Protection::AdmissionConfiguration => {
                "the API server never sends admission configuration to admission webhooks"
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sartors_groups_are_its_domain_and_the_groups_under_it() {
        for group in ["mutations.sartor.dev", "status.sartor.dev", "sartor.dev"] {
            assert_eq!(
                protected(group, "Anything"),
                Some(Protection::Sartor),
                "{group}"
            );
        }
        for group in ["notsartor.dev", "sartor.dev.example.com", "sartor.devx"] {
            assert_eq!(protected(group, "Anything"), None, "{group}");
        }
    }

    #[test]
    fn gatekeepers_groups_are_its_webhooks_fixed_list() {
        for group in GATEKEEPER_PROTECTED_GROUPS {
            assert_eq!(
                protected(group, "Anything"),
                Some(Protection::Gatekeeper),
                "{group}"
            );
        }
        // Not a suffix match: Gatekeeper mutates these groups of its own.
        for group in [
            "syncset.gatekeeper.sh",
            "connection.gatekeeper.sh",
            "gvkmanifest.gatekeeper.sh",
            "gatekeeper.sh",
        ] {
            assert_eq!(protected(group, "Anything"), None, "{group}");
        }
    }

    #[test]
    fn admission_configuration_is_six_kinds_of_one_group() {
        for kind in ADMISSION_CONFIGURATION_KINDS {
            assert_eq!(
                protected(ADMISSION_REGISTRATION_GROUP, kind),
                Some(Protection::AdmissionConfiguration),
                "{kind}"
            );
            assert_eq!(protected("example.com", kind), None, "{kind}");
        }
        assert_eq!(protected(ADMISSION_REGISTRATION_GROUP, "Other"), None);
        assert_eq!(protected("", "ConfigMap"), None);
    }
}
