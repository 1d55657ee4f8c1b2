//! Small mutators and objects the CLI's tests and the offline library's
//! tests both use, so each is written once.

/// On CREATE only: on UPDATE too, lint would warn (breaks-update).
pub const PULL: &str = "apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: pull}
spec:
  applyTo: [{groups: [''], versions: [v1], kinds: [Pod], operations: [CREATE]}]
  location: 'spec.containers[name: *].imagePullPolicy'
  parameters: {assign: {value: Always}}
";

/// A label set only in namespaces labelled `env: prod`.
pub const PROD_ONLY: &str = "apiVersion: mutations.sartor.dev/v1
kind: AssignMetadata
metadata: {name: tier}
spec:
  match: {namespaceSelector: {matchLabels: {env: prod}}}
  location: metadata.labels.tier
  parameters: {assign: {value: gold}}
";

/// A Pod [`PULL`] changes.
pub const POD: &str = "apiVersion: v1
kind: Pod
metadata: {name: web, namespace: shop}
spec:
  containers: [{name: app, image: nginx}]
";

/// [`POD`] as `sartor mutate` prints it after [`PULL`].
pub const MUTATED_POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: shop
spec:
  containers:
  - image: nginx
    imagePullPolicy: Always
    name: app
";
