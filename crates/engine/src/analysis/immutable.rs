//! Fields the API server refuses to change once an object exists, for the
//! built-in kinds, from Kubernetes v1.37.2's validation (pkg/apis/*/validation).
//!
//! A mutator that applies on UPDATE and writes one of these fields makes the
//! update of every object that already holds a different value fail: the
//! webhook's patch is applied, then the API server's update validation rejects
//! the result (gatekeeper#2196, #4121). The static analysis looks a mutator's
//! location up in [`IMMUTABLE_FIELDS`] to warn about that before it is deployed.
//!
//! Reading an entry: `path` names a field in sartor's location syntax; the field
//! and everything under it is immutable, except the places listed in `except`,
//! which may change (sometimes only one way: the `rule` says which). `rule`
//! gives the API server's words and the Go function that enforces them.
//!
//! What the table leaves out, and why:
//! - immutability an object opts into: ConfigMap and Secret `data` (and
//!   ConfigMap `binaryData`) once `immutable: true` is set. The table has no way
//!   to say "only when another field is true", and for most objects the data is
//!   mutable, so a warning would be wrong more often than right;
//! - object metadata every kind shares (`metadata.name`, `metadata.namespace`,
//!   `metadata.uid`, ...; `ValidateObjectMetaUpdate`): mutators do not write
//!   them, and repeating them for every kind would bury the useful entries;
//! - fields the API server silently resets instead of refusing (the
//!   CertificateSigningRequest `spec`, whose update strategy copies the old spec
//!   back; a Namespace's `spec.finalizers`): the update succeeds, the mutation
//!   is just lost;
//! - status and subresource-only fields (Pod resize, ephemeral containers,
//!   binding): a mutation webhook on the main resource never writes them;
//! - `events.k8s.io` Events and kinds only served behind alpha or beta feature
//!   gates that are off by default (scheduling.k8s.io Workload and PodGroup),
//!   with one exception noted on its entry (Job `spec.scheduling`).
//!
//! Where the exception to a rule depends on the object's state (a suspended
//! Job, a scheduling-gated Pod, an ExternalName Service, a field that may be set
//! once while empty), the entry describes the common state and the `rule` text
//! names the exception.

/// The Kubernetes version whose validation the table follows.
pub const KUBERNETES_VERSION: &str = "v1.37.2";

/// A field (and everything under it) that cannot change after creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImmutableField {
    /// The kind's API group ("" for core).
    pub group: &'static str,
    /// The kind.
    pub kind: &'static str,
    /// Where, in sartor's location syntax; `[name: *]` for every element of a keyed list.
    pub path: &'static str,
    /// Places under `path` that may change (also location syntax, each starting with `path`).
    pub except: &'static [&'static str],
    /// What the API server says, and where the rule lives (function name).
    pub rule: &'static str,
}

/// The rule shared by the volume sources of a PersistentVolume: they sit inline
/// in `spec` (`PersistentVolumeSource` is embedded), so each has its own entry.
const PV_SOURCE_RULE: &str = "\"spec.persistentvolumesource is immutable after creation\" \
     (ValidatePersistentVolumeUpdate, pkg/apis/core/validation): the volume source is \
     compared as a whole";

impl ImmutableField {
    /// The validation function that enforces it: the first `Validate...`
    /// name in [`Self::rule`].
    pub fn source(&self) -> &'static str {
        self.rule
            .split(|c: char| !c.is_ascii_alphanumeric())
            .find(|word| word.starts_with("Validate") || word.starts_with("validate"))
            .unwrap_or("Kubernetes validation")
    }
}

/// Every entry, grouped by kind.
pub const IMMUTABLE_FIELDS: &[ImmutableField] = &[
    // ---- core: Pod ----
    ImmutableField {
        group: "",
        kind: "Pod",
        path: "spec",
        except: &[
            "spec.containers[name: *].image",
            "spec.initContainers[name: *].image",
            "spec.activeDeadlineSeconds",
            "spec.tolerations",
            "spec.schedulingGates",
        ],
        rule: "\"pod updates may not change fields other than `spec.containers[*].image`, \
               `spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` \
               (only additions to existing tolerations), `spec.terminationGracePeriodSeconds` \
               (allow it to be set to 1 if it was previously negative)\" (ValidatePodUpdate, \
               pkg/apis/core/validation). One-way changes: activeDeadlineSeconds may only be set \
               from nil or lowered, never removed; tolerations may only be added (an existing one \
               may change only its tolerationSeconds; validateOnlyAddedTolerations); \
               schedulingGates may only be removed (validateOnlyDeletedSchedulingGates). \
               terminationGracePeriodSeconds stays immutable here: the only change allowed is from \
               a negative value to 1. Containers and init containers may not be added or removed \
               (ValidateContainerUpdates). While the pod still has scheduling gates, \
               spec.nodeSelector may gain entries and spec.affinity.nodeAffinity may be narrowed \
               (validateNodeSelectorMutation, validateNodeAffinityMutation). Container resources \
               change only through the resize subresource, ephemeral containers only through \
               the ephemeralcontainers subresource.",
    },
    ImmutableField {
        group: "",
        kind: "Pod",
        path: "metadata.annotations.\"kubernetes.io/config.mirror\"",
        except: &[],
        rule: "\"may not add mirror pod annotation\" / \"may not remove or update mirror pod \
               annotation\" (ValidatePodSpecificAnnotationUpdates, pkg/apis/core/validation)",
    },
    // ---- core: Service ----
    ImmutableField {
        group: "",
        kind: "Service",
        path: "spec.clusterIP",
        except: &[],
        rule: "\"may not change once set\" (validateUpgradeDowngradeClusterIPs via \
               ValidateServiceUpdate, pkg/apis/core/validation; clusterIP must equal clusterIPs[0], \
               ValidateServiceClusterIPsRelatedFields). Not enforced when the old or new type is \
               ExternalName, or between two headless (None) services.",
    },
    ImmutableField {
        group: "",
        kind: "Service",
        path: "spec.clusterIPs",
        except: &[],
        rule: "\"may not change once set\" (validateUpgradeDowngradeClusterIPs via \
               ValidateServiceUpdate, pkg/apis/core/validation): the primary clusterIP never \
               changes; a secondary IP may be added (dual-stack upgrade) or released (downgrade, \
               with ipFamilyPolicy SingleStack). Not enforced when the old or new type is \
               ExternalName, or between two headless services.",
    },
    ImmutableField {
        group: "",
        kind: "Service",
        path: "spec.ipFamilies",
        except: &[],
        rule: "\"may not change once set\" (validateUpgradeDowngradeIPFamilies via \
               ValidateServiceUpdate, pkg/apis/core/validation): the primary family never \
               changes; a secondary one may be added or released. Not enforced for ExternalName \
               or headless services, or when switching to or from headless.",
    },
    ImmutableField {
        group: "",
        kind: "Service",
        path: "spec.loadBalancerClass",
        except: &[],
        rule: "\"may not change once set\" (validateLoadBalancerClassField via \
               ValidateServiceUpdate, pkg/apis/core/validation), while the service stays of type \
               LoadBalancer; the field is forbidden on every other type.",
    },
    ImmutableField {
        group: "",
        kind: "Service",
        path: "spec.healthCheckNodePort",
        except: &[],
        rule: "\"field is immutable\" (validateServiceExternalTrafficFieldsUpdate via \
               ValidateServiceUpdate, pkg/apis/core/validation), while the service needs a health \
               check before and after the update (type LoadBalancer with externalTrafficPolicy \
               Local), the only case the field is used.",
    },
    // ---- core: PersistentVolumeClaim ----
    ImmutableField {
        group: "",
        kind: "PersistentVolumeClaim",
        path: "spec",
        except: &[
            "spec.resources.requests.storage",
            "spec.volumeAttributesClassName",
        ],
        rule: "\"spec is immutable after creation except resources.requests and \
               volumeAttributesClassName for bound claims\" (ValidatePersistentVolumeClaimUpdate, \
               pkg/apis/core/validation). Both exceptions hold only for a Bound claim; the storage \
               request may only grow (or shrink back to no less than status.capacity when \
               RecoverVolumeExpansionFailure is on); other requests keys are immutable. \
               spec.volumeName may be set once while empty (the PV controller binds it); \
               spec.storageClassName may be set once while nil, to the beta annotation's value if \
               that is present (validateStorageClassUpgradeFromNil / FromAnnotation); \
               spec.volumeMode is checked on its own too.",
    },
    ImmutableField {
        group: "",
        kind: "PersistentVolumeClaim",
        path: "metadata.annotations.\"volume.beta.kubernetes.io/storage-class\"",
        except: &[],
        rule: "\"field is immutable\" (ValidateImmutableAnnotation via \
               ValidatePersistentVolumeClaimUpdate, pkg/apis/core/validation), except when moving \
               the class from this annotation to spec.storageClassName.",
    },
    // ---- core: PersistentVolume ----
    ImmutableField {
        group: "",
        kind: "PersistentVolume",
        path: "spec.awsElasticBlockStore",
        except: &[],
        rule: PV_SOURCE_RULE,
    },
    ImmutableField {
        group: "",
        kind: "PersistentVolume",
        path: "spec.azureDisk",
        except: &[],
        rule: PV_SOURCE_RULE,
    },
    ImmutableField {
        group: "",
        kind: "PersistentVolume",
        path: "spec.azureFile",
        except: &[],
        rule: PV_SOURCE_RULE,
    },
    ImmutableField {
        group: "",
        kind: "PersistentVolume",
        path: "spec.cephfs",
        except: &[],
        rule: PV_SOURCE_RULE,
    },
    ImmutableField {
        group: "",
        kind: "PersistentVolume",
        path: "spec.cinder",
        except: &[],
        rule: PV_SOURCE_RULE,
    },
    ImmutableField {
        group: "",
        kind: "PersistentVolume",
        path: "spec.csi",
        except: &[],
        rule: "\"spec.persistentvolumesource is immutable after creation\" \
               (ValidatePersistentVolumeUpdate, pkg/apis/core/validation); the one exception: \
               spec.csi.controllerExpandSecretRef may be set once while unset.",
    },
    ImmutableField {
        group: "",
        kind: "PersistentVolume",
        path: "spec.fc",
        except: &[],
        rule: PV_SOURCE_RULE,
    },
    ImmutableField {
        group: "",
        kind: "PersistentVolume",
        path: "spec.flexVolume",
        except: &[],
        rule: PV_SOURCE_RULE,
    },
    ImmutableField {
        group: "",
        kind: "PersistentVolume",
        path: "spec.flocker",
        except: &[],
        rule: PV_SOURCE_RULE,
    },
    ImmutableField {
        group: "",
        kind: "PersistentVolume",
        path: "spec.gcePersistentDisk",
        except: &[],
        rule: PV_SOURCE_RULE,
    },
    ImmutableField {
        group: "",
        kind: "PersistentVolume",
        path: "spec.glusterfs",
        except: &[],
        rule: PV_SOURCE_RULE,
    },
    ImmutableField {
        group: "",
        kind: "PersistentVolume",
        path: "spec.hostPath",
        except: &[],
        rule: PV_SOURCE_RULE,
    },
    ImmutableField {
        group: "",
        kind: "PersistentVolume",
        path: "spec.iscsi",
        except: &[],
        rule: PV_SOURCE_RULE,
    },
    ImmutableField {
        group: "",
        kind: "PersistentVolume",
        path: "spec.local",
        except: &[],
        rule: PV_SOURCE_RULE,
    },
    ImmutableField {
        group: "",
        kind: "PersistentVolume",
        path: "spec.nfs",
        except: &[],
        rule: PV_SOURCE_RULE,
    },
    ImmutableField {
        group: "",
        kind: "PersistentVolume",
        path: "spec.photonPersistentDisk",
        except: &[],
        rule: PV_SOURCE_RULE,
    },
    ImmutableField {
        group: "",
        kind: "PersistentVolume",
        path: "spec.portworxVolume",
        except: &[],
        rule: PV_SOURCE_RULE,
    },
    ImmutableField {
        group: "",
        kind: "PersistentVolume",
        path: "spec.quobyte",
        except: &[],
        rule: PV_SOURCE_RULE,
    },
    ImmutableField {
        group: "",
        kind: "PersistentVolume",
        path: "spec.rbd",
        except: &[],
        rule: PV_SOURCE_RULE,
    },
    ImmutableField {
        group: "",
        kind: "PersistentVolume",
        path: "spec.scaleIO",
        except: &[],
        rule: PV_SOURCE_RULE,
    },
    ImmutableField {
        group: "",
        kind: "PersistentVolume",
        path: "spec.storageos",
        except: &[],
        rule: PV_SOURCE_RULE,
    },
    ImmutableField {
        group: "",
        kind: "PersistentVolume",
        path: "spec.vsphereVolume",
        except: &[],
        rule: PV_SOURCE_RULE,
    },
    ImmutableField {
        group: "",
        kind: "PersistentVolume",
        path: "spec.volumeMode",
        except: &[],
        rule: "\"field is immutable\" (ValidateImmutableField in ValidatePersistentVolumeUpdate, \
               pkg/apis/core/validation)",
    },
    ImmutableField {
        group: "",
        kind: "PersistentVolume",
        path: "spec.nodeAffinity",
        except: &[],
        rule: "\"field is immutable, except for updating from beta label to GA\" \
               (validatePvNodeAffinity via ValidatePersistentVolumeUpdate, \
               pkg/apis/core/validation), once set; it may be set while unset, and the alpha \
               MutablePVNodeAffinity feature gate (off by default) lifts the rule.",
    },
    // ---- core: Secret ----
    ImmutableField {
        group: "",
        kind: "Secret",
        path: "type",
        except: &[],
        rule: "\"field is immutable\" (ValidateImmutableField in ValidateSecretUpdate, \
               pkg/apis/core/validation). data is also frozen once immutable: true is set, which \
               this table does not express.",
    },
    // ---- core: Node ----
    ImmutableField {
        group: "",
        kind: "Node",
        path: "spec.podCIDR",
        except: &[],
        rule: "\"node updates may not change podCIDR except from \"\" to valid\" \
               (ValidateNodeUpdate, pkg/apis/core/validation): may be set once while empty. \
               v1 podCIDR converts to podCIDRs[0] (Convert_v1_NodeSpec_To_core_NodeSpec).",
    },
    ImmutableField {
        group: "",
        kind: "Node",
        path: "spec.podCIDRs",
        except: &[],
        rule: "\"node updates may not change podCIDR except from \"\" to valid\" \
               (ValidateNodeUpdate, pkg/apis/core/validation): may be set once while empty.",
    },
    ImmutableField {
        group: "",
        kind: "Node",
        path: "spec.providerID",
        except: &[],
        rule: "\"field cannot be modified once set\" / \"field cannot be cleared once set\" \
               (ValidateNodeUpdate, pkg/apis/core/validation): may be set once while empty.",
    },
    ImmutableField {
        group: "",
        kind: "Node",
        path: "spec.externalID",
        except: &[],
        rule: "\"may not be updated\" (ValidateNodeUpdate, pkg/apis/core/validation)",
    },
    // ---- core: ResourceQuota ----
    ImmutableField {
        group: "",
        kind: "ResourceQuota",
        path: "spec.scopes",
        except: &[],
        rule: "\"field is immutable\" (ValidateResourceQuotaUpdate, pkg/apis/core/validation): \
               the set of scopes may not change (order does not matter).",
    },
    // ---- apps ----
    ImmutableField {
        group: "apps",
        kind: "Deployment",
        path: "spec.selector",
        except: &[],
        rule: "\"field is immutable\" (ValidateDeploymentUpdate, pkg/apis/apps/validation)",
    },
    ImmutableField {
        group: "apps",
        kind: "ReplicaSet",
        path: "spec.selector",
        except: &[],
        rule: "\"field is immutable\" (ValidateReplicaSetUpdate, pkg/apis/apps/validation)",
    },
    ImmutableField {
        group: "apps",
        kind: "DaemonSet",
        path: "spec.selector",
        except: &[],
        rule: "\"field is immutable\" (ValidateDaemonSetSpecUpdate via ValidateDaemonSetUpdate, \
               pkg/apis/apps/validation)",
    },
    ImmutableField {
        group: "apps",
        kind: "StatefulSet",
        path: "spec.selector",
        except: &[],
        rule: "\"field is immutable\" (ValidateStatefulSetUpdate, pkg/apis/apps/validation)",
    },
    ImmutableField {
        group: "apps",
        kind: "StatefulSet",
        path: "spec.volumeClaimTemplates",
        except: &[],
        rule: "\"field is immutable\" (ValidateStatefulSetUpdate, pkg/apis/apps/validation)",
    },
    ImmutableField {
        group: "apps",
        kind: "StatefulSet",
        path: "spec.serviceName",
        except: &[],
        rule: "\"field is immutable\" (ValidateStatefulSetUpdate, pkg/apis/apps/validation)",
    },
    ImmutableField {
        group: "apps",
        kind: "StatefulSet",
        path: "spec.podManagementPolicy",
        except: &[],
        rule: "\"field is immutable\" (ValidateStatefulSetUpdate, pkg/apis/apps/validation)",
    },
    ImmutableField {
        group: "apps",
        kind: "ControllerRevision",
        path: "data",
        except: &[],
        rule: "\"field is immutable\" (ValidateControllerRevisionUpdate, pkg/apis/apps/validation)",
    },
    // ---- batch: Job ----
    ImmutableField {
        group: "batch",
        kind: "Job",
        path: "spec.selector",
        except: &[],
        rule: "\"field is immutable\" (ValidateJobSpecUpdate via ValidateJobUpdate, \
               pkg/apis/batch/validation)",
    },
    ImmutableField {
        group: "batch",
        kind: "Job",
        path: "spec.template",
        except: &[],
        rule: "\"field is immutable\" (validatePodTemplateUpdate via ValidateJobSpecUpdate, \
               pkg/apis/batch/validation) unless the Job is suspended (old spec.suspend true): \
               then nodeSelector, affinity.nodeAffinity, tolerations, schedulingGates and the \
               template's labels and annotations may change (suspended Jobs that have not \
               started, or per MutableSchedulingDirectivesForSuspendedJobs), and container and \
               init container resources may change (MutablePodResourcesForSuspendedJobs, beta, on \
               by default); see the Job strategy's ValidateUpdate options.",
    },
    ImmutableField {
        group: "batch",
        kind: "Job",
        path: "spec.completions",
        except: &[],
        rule: "\"field is immutable\" (validateCompletions via ValidateJobSpecUpdate, \
               pkg/apis/batch/validation) for NonIndexed Jobs, the default; an Indexed Job may \
               change it together with parallelism (both equal).",
    },
    ImmutableField {
        group: "batch",
        kind: "Job",
        path: "spec.completionMode",
        except: &[],
        rule: "\"field is immutable\" (ValidateJobSpecUpdate, pkg/apis/batch/validation)",
    },
    ImmutableField {
        group: "batch",
        kind: "Job",
        path: "spec.podFailurePolicy",
        except: &[],
        rule: "\"field is immutable\" (ValidateJobSpecUpdate, pkg/apis/batch/validation)",
    },
    ImmutableField {
        group: "batch",
        kind: "Job",
        path: "spec.backoffLimitPerIndex",
        except: &[],
        rule: "\"field is immutable\" (ValidateJobSpecUpdate, pkg/apis/batch/validation)",
    },
    ImmutableField {
        group: "batch",
        kind: "Job",
        path: "spec.managedBy",
        except: &[],
        rule: "\"field is immutable\" (ValidateJobSpecUpdate, pkg/apis/batch/validation)",
    },
    ImmutableField {
        group: "batch",
        kind: "Job",
        path: "spec.successPolicy",
        except: &[],
        rule: "\"field is immutable\" (ValidateJobSpecUpdate, pkg/apis/batch/validation)",
    },
    ImmutableField {
        group: "batch",
        kind: "Job",
        path: "spec.scheduling",
        except: &["spec.scheduling.schedulingPolicy.gang.minCount"],
        rule: "\"the basic/gang policy variant is immutable after creation; only \
               schedulingPolicy.gang.minCount may be updated\" (validateJobSchedulingUpdate via \
               ValidateJobSpecUpdate, pkg/apis/batch/validation), with the declarative \
               +k8s:update=NoSet/NoUnset and +k8s:immutable tags on batch/v1 JobSpec.scheduling \
               and JobSchedulingConfiguration. Alpha: only settable with the WorkloadWithJob \
               feature gate (off by default).",
    },
    // ---- rbac.authorization.k8s.io ----
    ImmutableField {
        group: "rbac.authorization.k8s.io",
        kind: "RoleBinding",
        path: "roleRef",
        except: &[],
        rule: "\"field is immutable\" (ValidateRoleBindingUpdate, pkg/apis/rbac/validation)",
    },
    ImmutableField {
        group: "rbac.authorization.k8s.io",
        kind: "ClusterRoleBinding",
        path: "roleRef",
        except: &[],
        rule: "\"field is immutable\" (ValidateClusterRoleBindingUpdate, pkg/apis/rbac/validation)",
    },
    // ---- storage.k8s.io ----
    ImmutableField {
        group: "storage.k8s.io",
        kind: "StorageClass",
        path: "parameters",
        except: &[],
        rule: "\"field is immutable\" (ValidateStorageClassUpdate, pkg/apis/storage/validation)",
    },
    ImmutableField {
        group: "storage.k8s.io",
        kind: "StorageClass",
        path: "provisioner",
        except: &[],
        rule: "\"field is immutable\" (ValidateStorageClassUpdate, pkg/apis/storage/validation)",
    },
    ImmutableField {
        group: "storage.k8s.io",
        kind: "StorageClass",
        path: "reclaimPolicy",
        except: &[],
        rule: "\"field is immutable\" (ValidateStorageClassUpdate, pkg/apis/storage/validation)",
    },
    ImmutableField {
        group: "storage.k8s.io",
        kind: "StorageClass",
        path: "volumeBindingMode",
        except: &[],
        rule: "\"field is immutable\" (ValidateStorageClassUpdate, pkg/apis/storage/validation)",
    },
    ImmutableField {
        group: "storage.k8s.io",
        kind: "VolumeAttachment",
        path: "spec",
        except: &[],
        rule: "\"field is immutable\" (ValidateVolumeAttachmentUpdate, \
               pkg/apis/storage/validation)",
    },
    ImmutableField {
        group: "storage.k8s.io",
        kind: "CSIDriver",
        path: "spec.attachRequired",
        except: &[],
        rule: "\"field is immutable\" (ValidateCSIDriverUpdate, pkg/apis/storage/validation; \
               the error names it spec.attachedRequired)",
    },
    ImmutableField {
        group: "storage.k8s.io",
        kind: "CSIDriver",
        path: "spec.volumeLifecycleModes",
        except: &[],
        rule: "\"field is immutable\" (ValidateCSIDriverUpdate, pkg/apis/storage/validation)",
    },
    ImmutableField {
        group: "storage.k8s.io",
        kind: "CSINode",
        path: "spec.drivers[name: *]",
        except: &["spec.drivers[name: *].allocatable"],
        rule: "\"field is immutable\" (ValidateCSINodeUpdate, pkg/apis/storage/validation): an \
               existing driver entry may change only its allocatable (MutableCSINodeAllocatableCount, \
               GA); drivers may be added or removed.",
    },
    ImmutableField {
        group: "storage.k8s.io",
        kind: "CSIStorageCapacity",
        path: "nodeTopology",
        except: &[],
        rule: "\"field is immutable\" (ValidateCSIStorageCapacityUpdate, \
               pkg/apis/storage/validation)",
    },
    ImmutableField {
        group: "storage.k8s.io",
        kind: "CSIStorageCapacity",
        path: "storageClassName",
        except: &[],
        rule: "\"field is immutable\" (ValidateCSIStorageCapacityUpdate, \
               pkg/apis/storage/validation)",
    },
    ImmutableField {
        group: "storage.k8s.io",
        kind: "VolumeAttributesClass",
        path: "driverName",
        except: &[],
        rule: "\"updates to driverName are forbidden.\" (ValidateVolumeAttributesClassUpdate, \
               pkg/apis/storage/validation)",
    },
    ImmutableField {
        group: "storage.k8s.io",
        kind: "VolumeAttributesClass",
        path: "parameters",
        except: &[],
        rule: "\"updates to parameters are forbidden.\" (ValidateVolumeAttributesClassUpdate, \
               pkg/apis/storage/validation)",
    },
    // ---- networking.k8s.io ----
    ImmutableField {
        group: "networking.k8s.io",
        kind: "IngressClass",
        path: "spec.controller",
        except: &[],
        rule: "\"field is immutable\" (validateIngressClassSpecUpdate via \
               ValidateIngressClassUpdate, pkg/apis/networking/validation)",
    },
    ImmutableField {
        group: "networking.k8s.io",
        kind: "IPAddress",
        path: "spec.parentRef",
        except: &[],
        rule: "\"field is immutable\" (ValidateIPAddressUpdate, pkg/apis/networking/validation)",
    },
    ImmutableField {
        group: "networking.k8s.io",
        kind: "ServiceCIDR",
        path: "spec.cidrs",
        except: &[],
        rule: "\"field is immutable\" (ValidateServiceCIDRUpdate, \
               pkg/apis/networking/validation): existing CIDRs never change; a single-stack \
               ServiceCIDR may gain a second CIDR of the other family.",
    },
    // ---- discovery.k8s.io ----
    ImmutableField {
        group: "discovery.k8s.io",
        kind: "EndpointSlice",
        path: "addressType",
        except: &[],
        rule: "\"field is immutable\" (ValidateEndpointSliceUpdate, pkg/apis/discovery/validation)",
    },
    // ---- scheduling.k8s.io ----
    ImmutableField {
        group: "scheduling.k8s.io",
        kind: "PriorityClass",
        path: "value",
        except: &[],
        rule: "\"may not be changed in an update.\" (ValidatePriorityClassUpdate, \
               pkg/apis/scheduling/validation)",
    },
    ImmutableField {
        group: "scheduling.k8s.io",
        kind: "PriorityClass",
        path: "preemptionPolicy",
        except: &[],
        rule: "\"field is immutable\" (ValidatePriorityClassUpdate, \
               pkg/apis/scheduling/validation)",
    },
    // ---- node.k8s.io ----
    ImmutableField {
        group: "node.k8s.io",
        kind: "RuntimeClass",
        path: "handler",
        except: &[],
        rule: "\"field is immutable\" (ValidateRuntimeClassUpdate, pkg/apis/node/validation)",
    },
    // ---- certificates.k8s.io ----
    ImmutableField {
        group: "certificates.k8s.io",
        kind: "ClusterTrustBundle",
        path: "spec.signerName",
        except: &[],
        rule: "\"field is immutable\" (ValidateClusterTrustBundleUpdate, \
               pkg/apis/certificates/validation)",
    },
    ImmutableField {
        group: "certificates.k8s.io",
        kind: "PodCertificateRequest",
        path: "spec",
        except: &[],
        rule: "\"field is immutable\" (ValidatePodCertificateRequestUpdate, \
               pkg/apis/certificates/validation): all spec fields are immutable.",
    },
    // ---- coordination.k8s.io ----
    ImmutableField {
        group: "coordination.k8s.io",
        kind: "LeaseCandidate",
        path: "spec.leaseName",
        except: &[],
        rule: "\"field is immutable\" (ValidateLeaseCandidateSpecUpdate via \
               ValidateLeaseCandidateUpdate, pkg/apis/coordination/validation)",
    },
    // ---- resource.k8s.io ----
    ImmutableField {
        group: "resource.k8s.io",
        kind: "ResourceClaim",
        path: "spec",
        except: &[],
        rule: "\"field is immutable\" (ValidateResourceClaimUpdate, \
               pkg/apis/resource/validation): the spec is immutable.",
    },
    ImmutableField {
        group: "resource.k8s.io",
        kind: "ResourceClaimTemplate",
        path: "spec",
        except: &[],
        rule: "\"field is immutable\" (ValidateResourceClaimTemplateUpdate, \
               pkg/apis/resource/validation): the spec is immutable.",
    },
    ImmutableField {
        group: "resource.k8s.io",
        kind: "ResourceSlice",
        path: "spec.driver",
        except: &[],
        rule: "\"field is immutable\" (validateResourceSliceSpec via ValidateResourceSliceUpdate, \
               pkg/apis/resource/validation)",
    },
    ImmutableField {
        group: "resource.k8s.io",
        kind: "ResourceSlice",
        path: "spec.pool.name",
        except: &[],
        rule: "\"field is immutable\" (validateResourceSliceSpec via ValidateResourceSliceUpdate, \
               pkg/apis/resource/validation)",
    },
    ImmutableField {
        group: "resource.k8s.io",
        kind: "ResourceSlice",
        path: "spec.nodeName",
        except: &[],
        rule: "\"field is immutable\" (validateResourceSliceSpec via ValidateResourceSliceUpdate, \
               pkg/apis/resource/validation)",
    },
    // ---- storagemigration.k8s.io ----
    ImmutableField {
        group: "storagemigration.k8s.io",
        kind: "StorageVersionMigration",
        path: "spec",
        except: &[],
        rule: "\"field is immutable\" (ValidateStorageVersionMigrationUpdate, \
               pkg/apis/storagemigration/validation)",
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use sartor_location::Path;
    use std::collections::HashSet;

    #[test]
    fn every_path_and_exception_parses_and_exceptions_lie_under_their_path() {
        for field in IMMUTABLE_FIELDS {
            let path = Path::parse(field.path)
                .unwrap_or_else(|e| panic!("{} {}: {e}", field.kind, field.path));
            assert!(
                !path.has_glob() || field.path.contains("[name: *]"),
                "{} {}: only name globs are expected",
                field.kind,
                field.path
            );
            for except in field.except {
                let except_path =
                    Path::parse(except).unwrap_or_else(|e| panic!("{} {except}: {e}", field.kind));
                assert!(
                    path.is_prefix_of(&except_path),
                    "{} {except} is not under {}",
                    field.kind,
                    field.path
                );
                assert_ne!(
                    path, except_path,
                    "{} {except} would except the whole field",
                    field.kind
                );
            }
        }
    }

    #[test]
    fn no_duplicate_entries() {
        let mut seen = HashSet::new();
        for field in IMMUTABLE_FIELDS {
            assert!(
                seen.insert((field.group, field.kind, field.path)),
                "duplicate entry {:?} {} {}",
                field.group,
                field.kind,
                field.path
            );
        }
    }

    #[test]
    fn no_entry_is_under_another_of_the_same_kind() {
        // An entry under another entry of the same kind adds nothing: the outer
        // one already covers it (unless it is one of the outer's exceptions,
        // which would contradict it).
        let parsed: Vec<(&ImmutableField, Path)> = IMMUTABLE_FIELDS
            .iter()
            .map(|f| (f, Path::parse(f.path).unwrap()))
            .collect();
        for (a, pa) in &parsed {
            for (b, pb) in &parsed {
                if std::ptr::eq(*a, *b) || a.group != b.group || a.kind != b.kind {
                    continue;
                }
                assert!(
                    !pa.is_prefix_of(pb),
                    "{} {} is under {}",
                    a.kind,
                    b.path,
                    a.path
                );
            }
        }
    }

    #[test]
    fn entries_are_grouped_by_kind() {
        // Each (group, kind) forms one contiguous run, so the table reads kind by kind.
        let mut finished: HashSet<(&str, &str)> = HashSet::new();
        let mut current: Option<(&str, &str)> = None;
        for field in IMMUTABLE_FIELDS {
            let key = (field.group, field.kind);
            if current != Some(key) {
                if let Some(previous) = current {
                    finished.insert(previous);
                }
                assert!(
                    !finished.contains(&key),
                    "{key:?} appears in two separate runs"
                );
                current = Some(key);
            }
        }
    }

    #[test]
    fn every_rule_names_its_function() {
        for field in IMMUTABLE_FIELDS {
            assert!(
                field.rule.contains("(Validate")
                    || field.rule.contains("(validate")
                    || field.rule.contains(" via Validate"),
                "{} {}: rule names no validation function",
                field.kind,
                field.path
            );
            assert!(!field.kind.is_empty() && !field.rule.is_empty());
            assert_ne!(field.source(), "Kubernetes validation", "{}", field.rule);
        }
    }

    #[test]
    fn pod_allows_exactly_what_validate_pod_update_allows() {
        let pod = IMMUTABLE_FIELDS
            .iter()
            .find(|f| f.group.is_empty() && f.kind == "Pod" && f.path == "spec")
            .expect("Pod spec entry");
        assert_eq!(
            pod.except,
            &[
                "spec.containers[name: *].image",
                "spec.initContainers[name: *].image",
                "spec.activeDeadlineSeconds",
                "spec.tolerations",
                "spec.schedulingGates",
            ]
        );
    }

    #[test]
    fn version_is_a_kubernetes_tag() {
        assert!(KUBERNETES_VERSION.starts_with('v'));
        assert_eq!(KUBERNETES_VERSION.split('.').count(), 3);
    }
}
