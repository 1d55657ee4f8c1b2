#!/usr/bin/env python3
"""Writes DIR/pods.yaml (COUNT three-container Pods, 10,000 by default, in 20 namespaces, one
multi-document file) and DIR/mutators.yaml (100 mutators of all four kinds,
some matching every Pod, some a namespace or a label, 20 for Deployments only).

Usage: python3 crates/cli/scripts/large-input.py DIR [COUNT]
Then:  time target/release/sartor mutate -m DIR/mutators.yaml DIR/pods.yaml > /dev/null
"""
import os
import sys

out = sys.argv[1] if len(sys.argv) > 1 else "large-input"
os.makedirs(out, exist_ok=True)

pods = []
count = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
for i in range(count):
    pods.append(f"""apiVersion: v1
kind: Pod
metadata:
  name: web-{i}
  namespace: ns-{i % 20}
  labels: {{app: web, tier: t{i % 5}}}
spec:
  containers:
  - {{name: app, image: registry.example.com/shop/web:1.{i % 7}, args: [--debug, --v=2]}}
  - {{name: proxy, image: envoyproxy/envoy:v1.30}}
  - {{name: log, image: fluent/fluent-bit:3.0}}
""")

HEADER = "apiVersion: mutations.sartor.dev/v1\n"
POD = "[{groups: [''], versions: [v1], kinds: [Pod]}]"
mutators = []
for i in range(100):
    kind = i % 5
    if kind == 0:
        body = f"""kind: Assign
metadata: {{name: a-{i:03}}}
spec:
  applyTo: {POD}
  match: {{namespaces: [ns-{i % 20}]}}
  location: 'spec.containers[name: *].env{i}'
  parameters: {{assign: {{value: [{{name: X, value: '{i}'}}]}}}}
"""
    elif kind == 1:
        body = f"""kind: AssignMetadata
metadata: {{name: m-{i:03}}}
spec:
  match: {{labelSelector: {{matchLabels: {{tier: t{i % 5}}}}}}}
  location: metadata.labels.l{i}
  parameters: {{assign: {{value: v}}}}
"""
    elif kind == 2:
        body = f"""kind: ModifySet
metadata: {{name: s-{i:03}}}
spec:
  applyTo: {POD}
  location: 'spec.containers[name: app].args'
  parameters: {{operation: prune, values: {{fromList: ['--debug', '--x{i}']}}}}
"""
    elif kind == 3:
        body = f"""kind: AssignImage
metadata: {{name: i-{i:03}}}
spec:
  applyTo: {POD}
  match: {{namespaces: [ns-{i % 20}]}}
  location: 'spec.containers[name: *].image'
  parameters: {{assignDomain: mirror{i}.example.com}}
"""
    else:
        body = f"""kind: Assign
metadata: {{name: d-{i:03}}}
spec:
  applyTo: [{{groups: [apps], versions: [v1], kinds: [Deployment]}}]
  location: spec.x{i}
  parameters: {{assign: {{value: 1}}}}
"""
    mutators.append(HEADER + body)

with open(os.path.join(out, "pods.yaml"), "w") as f:
    f.write("---\n".join(pods))
with open(os.path.join(out, "mutators.yaml"), "w") as f:
    f.write("---\n".join(mutators))
