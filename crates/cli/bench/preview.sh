#!/usr/bin/env bash
# The repository-preview figure of crates/cli/README.md (its run in bench/runs): `sartor mutate
# --expand` over a generated repository of 10,000 objects (5,000 Deployments,
# 5,000 Pods, in 10 namespaces) and 100 mutators, timed with GNU time.
#
#   crates/cli/bench/preview.sh [OBJECTS] [MUTATORS]
#
# Needs python3 and /usr/bin/time; builds the release binary first.
set -euo pipefail
cd "$(dirname "$0")/../../.."
objects="${1:-10000}"
mutators="${2:-100}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT

python3 - "$dir" "$objects" "$mutators" <<'PY'
import sys
dir, objects, mutators = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(f"{dir}/mutators.yaml", "w") as f:
    for i in range(mutators):
        if i % 2 == 0:
            f.write(f"""apiVersion: mutations.sartor.dev/v1
kind: AssignMetadata
metadata: {{name: label-{i}}}
spec:
  match: {{kinds: [{{apiGroups: [''], kinds: [Pod]}}]}}
  location: metadata.labels.l{i}
  parameters: {{assign: {{value: v{i}}}}}
---
""")
        else:
            f.write(f"""apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata: {{name: env-{i}}}
spec:
  applyTo: [{{groups: [''], versions: [v1], kinds: [Pod]}}]
  location: 'spec.containers[name: *].env[name: V{i}].value'
  parameters: {{assign: {{value: x}}}}
---
""")
with open(f"{dir}/objects.yaml", "w") as f:
    for n in range(10):
        f.write(f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: ns{n}}}\n---\n")
    for i in range(objects):
        ns = f"ns{i % 10}"
        pod_spec = "{containers: [{name: app, image: 'shop/app:1'}, {name: side, image: 'shop/side:1'}]}"
        if i % 2 == 0:
            f.write(f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: d{i}, namespace: {ns}}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: d{i}}}}}
  template:
    metadata: {{labels: {{app: d{i}}}}}
    spec: {pod_spec}
---
""")
        else:
            f.write(f"apiVersion: v1\nkind: Pod\nmetadata: {{name: p{i}, namespace: {ns}}}\nspec: {pod_spec}\n---\n")
PY

cargo build --release -q -p sartor
bin="${CARGO_TARGET_DIR:-target}/release/sartor"
echo "sartor mutate --expand: $objects objects, $mutators mutators"
/usr/bin/time -f "wall %e s, max RSS %M KB" "$bin" mutate --expand "$dir" > "$dir/out.yaml"
echo "printed $(grep -c '^kind: Pod' "$dir/out.yaml") Pods, $(grep -c '^kind: Deployment' "$dir/out.yaml") Deployments"
