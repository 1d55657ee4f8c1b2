//! The resource (plural) of each built-in kind a policy's `resourceRules`
//! name, from k8s-openapi's own constants: an offline export has no
//! discovery, and a kind outside this table is refused rather than guessed.
//! The table holds every kind of the groups it names, so a kind of one of
//! those groups that is not in it does not exist (`match.kinds` crosses its
//! groups with its kinds: `["", apps]` x `[Pod, Deployment]` names
//! `apps/Pod`, which no cluster serves).

use k8s_openapi::Resource;
use k8s_openapi::api::{apps, batch, core, networking, policy, rbac};

/// `(group, kind, plural)` of `K`.
fn entry<K: Resource>() -> (&'static str, &'static str, &'static str) {
    (K::GROUP, K::KIND, K::URL_PATH_SEGMENT)
}

/// The plural of the built-in `kind` of `group`, when the table has it.
pub(crate) fn plural(group: &str, kind: &str) -> Option<&'static str> {
    let table = [
        entry::<core::v1::Binding>(),
        entry::<core::v1::ComponentStatus>(),
        entry::<core::v1::ConfigMap>(),
        entry::<core::v1::Endpoints>(),
        entry::<core::v1::Event>(),
        entry::<core::v1::LimitRange>(),
        entry::<core::v1::Namespace>(),
        entry::<core::v1::Node>(),
        entry::<core::v1::PersistentVolume>(),
        entry::<core::v1::PersistentVolumeClaim>(),
        entry::<core::v1::Pod>(),
        entry::<core::v1::PodTemplate>(),
        entry::<core::v1::ReplicationController>(),
        entry::<core::v1::ResourceQuota>(),
        entry::<core::v1::Secret>(),
        entry::<core::v1::Service>(),
        entry::<core::v1::ServiceAccount>(),
        entry::<apps::v1::ControllerRevision>(),
        entry::<apps::v1::DaemonSet>(),
        entry::<apps::v1::Deployment>(),
        entry::<apps::v1::ReplicaSet>(),
        entry::<apps::v1::StatefulSet>(),
        entry::<batch::v1::CronJob>(),
        entry::<batch::v1::Job>(),
        entry::<networking::v1::IPAddress>(),
        entry::<networking::v1::Ingress>(),
        entry::<networking::v1::IngressClass>(),
        entry::<networking::v1::NetworkPolicy>(),
        entry::<networking::v1::ServiceCIDR>(),
        entry::<policy::v1::PodDisruptionBudget>(),
        entry::<rbac::v1::ClusterRole>(),
        entry::<rbac::v1::ClusterRoleBinding>(),
        entry::<rbac::v1::Role>(),
        entry::<rbac::v1::RoleBinding>(),
    ];
    table
        .into_iter()
        .find(|(g, k, _)| *g == group && *k == kind)
        .map(|(_, _, plural)| plural)
}

/// The plural of an admission configuration kind (`sartor_api`'s
/// `ADMISSION_CONFIGURATION_KINDS`), as the API server serves it: the kind
/// in lower case, `-y` as `-ies`.
pub(crate) fn plural_of_configuration(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    match lower.strip_suffix('y') {
        Some(stem) => format!("{stem}ies"),
        None => format!("{lower}s"),
    }
}

/// Whether the table holds every kind of `group`.
pub(crate) fn knows_group(group: &str) -> bool {
    [
        "",
        "apps",
        "batch",
        "networking.k8s.io",
        "policy",
        "rbac.authorization.k8s.io",
    ]
    .contains(&group)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_kinds_have_their_plural() {
        assert_eq!(plural("", "Pod"), Some("pods"));
        assert_eq!(plural("", "Endpoints"), Some("endpoints"));
        assert_eq!(plural("apps", "Deployment"), Some("deployments"));
        assert_eq!(
            plural("networking.k8s.io", "NetworkPolicy"),
            Some("networkpolicies")
        );
        assert_eq!(plural("example.com", "Widget"), None);
        assert!(knows_group("apps") && !knows_group("example.com"));
        assert_eq!(
            plural_of_configuration("ValidatingAdmissionPolicy"),
            "validatingadmissionpolicies"
        );
        assert_eq!(
            plural_of_configuration("MutatingWebhookConfiguration"),
            "mutatingwebhookconfigurations"
        );
    }
}
