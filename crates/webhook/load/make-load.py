#!/usr/bin/env python3
"""Writes the load test's inputs: 100 mutators and a realistic Pod AdmissionReview.

    python3 make-load.py OUT_DIR

OUT_DIR/heavy/100.yaml      100 mutators, 66 of them change the Pod (144 changes)
OUT_DIR/typical/100.yaml    100 mutators across kinds, 11 of them change the Pod
OUT_DIR/empty/              no mutators (the floor)
OUT_DIR/review.json         an AdmissionReview v1 CREATE of a 3-container Pod

    python3 make-load.py OUT_DIR N...

also writes OUT_DIR/scaled-N/ for each N (a multiple of 100): the typical set,
then copies of it renamed and aimed at 100 other kinds (example.com Widgets),
so the Pod meets the same 11 mutators whatever N is (for memory figures).
"""
import json
import pathlib
import sys

out = pathlib.Path(sys.argv[1])
for d in ("heavy", "typical", "empty"):
    (out / d).mkdir(parents=True, exist_ok=True)

POD = [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}]
DEPLOYMENT = [{"groups": ["apps"], "versions": ["v1"], "kinds": ["Deployment"]}]


def doc(kind, name, spec):
    return {"apiVersion": "mutations.sartor.dev/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


mutators = []
for i in range(25):  # labels and annotations on every namespaced object
    field = "labels" if i % 2 == 0 else "annotations"
    mutators.append(doc("AssignMetadata", f"meta-{i:02}", {
        "match": {"scope": "Namespaced", "excludedNamespaces": ["kube-system"]},
        "location": f"metadata.{field}.\"example.com/m{i:02}\"",
        "parameters": {"assign": {"value": f"v{i}"}},
    }))
for i in range(25):  # an env var in every container, once
    mutators.append(doc("Assign", f"env-{i:02}", {
        "applyTo": POD,
        "match": {"scope": "Namespaced", "namespaces": ["shop", "payments"]},
        "location": f"spec.containers[name: *].env[name: VAR_{i:02}]",
        "parameters": {
            "pathTests": [{"subPath": f"spec.containers[name: *].env[name: VAR_{i:02}]", "condition": "MustNotExist"}],
            "assign": {"value": {"name": f"VAR_{i:02}", "value": str(i)}},
        },
    }))
for i in range(10):  # flags appended to every container's args
    mutators.append(doc("ModifySet", f"args-{i:02}", {
        "applyTo": POD,
        "location": "spec.containers[name: *].args",
        "parameters": {"operation": "merge", "values": {"fromList": [f"--flag-{i:02}"]}},
    }))
for i in range(5):  # security defaults
    location, value = [
        ("spec.securityContext.seccompProfile.type", "RuntimeDefault"),
        ("spec.containers[name: *].imagePullPolicy", "Always"),
        ("spec.containers[name: *].securityContext.allowPrivilegeEscalation", False),
        ("spec.containers[name: *].securityContext.readOnlyRootFilesystem", True),
        ("spec.automountServiceAccountToken", False),
    ][i]
    mutators.append(doc("Assign", f"security-{i}", {
        "applyTo": POD,
        "location": location,
        "parameters": {"assign": {"value": value}},
    }))
for i in range(5):  # images through a mirror
    mutators.append(doc("AssignImage", f"mirror-{i}", {
        "applyTo": POD,
        "match": {"labelSelector": {"matchLabels": {"app": "checkout"}}},
        "location": "spec.containers[name: *].image",
        "parameters": {"assignDomain": "mirror.example.com"},
    }))
for i in range(30):  # not for Pods: must cost nothing here
    mutators.append(doc("Assign", f"deploy-{i:02}", {
        "applyTo": DEPLOYMENT,
        "location": f"spec.template.metadata.labels.d{i:02}",
        "parameters": {"assign": {"value": "x"}},
    }))


def write(name, mutators):
    assert len(mutators) == 100
    with open(out / name / "100.yaml", "w") as f:
        f.write("\n---\n".join(json.dumps(m) for m in mutators) + "\n")


write("heavy", mutators)

# Typical: most mutators are for other kinds or other workloads.
typical = [m for m in mutators if m["metadata"]["name"].startswith(("security-", "deploy-"))]
typical.append(mutators[-31])  # mirror-4: the one AssignImage that applies
for i in range(10):
    typical.append(doc("AssignMetadata", f"team-{i}", {
        "match": {"scope": "Namespaced", **({} if i < 5 else {"namespaces": ["payments"]})},
        "location": f"metadata.labels.\"example.com/t{i}\"",
        "parameters": {"assign": {"value": "x"}},
    }))
for i in range(4):
    typical.append(doc("AssignImage", f"mirror-other-{i}", {
        "applyTo": POD,
        "match": {"labelSelector": {"matchLabels": {"app": f"other-{i}"}}},
        "location": "spec.containers[name: *].image",
        "parameters": {"assignDomain": "mirror.example.com"},
    }))
for kind, group in [("StatefulSet", "apps"), ("DaemonSet", "apps"), ("Job", "batch"), ("CronJob", "batch")]:
    for i in range(5):
        typical.append(doc("Assign", f"{kind.lower()}-{i}", {
            "applyTo": [{"groups": [group], "versions": ["v1"], "kinds": [kind]}],
            "location": f"spec.x{i}",
            "parameters": {"assign": {"value": "x"}},
        }))
for i in range(10):
    typical.append(doc("Assign", f"payments-env-{i}", {
        "applyTo": POD,
        "match": {"namespaces": ["payments"]},
        "location": f"spec.containers[name: *].env[name: P_{i}]",
        "parameters": {"assign": {"value": {"name": f"P_{i}", "value": "1"}}},
    }))
for i in range(10):
    typical.append(doc("ModifySet", f"batch-args-{i}", {
        "applyTo": POD,
        "match": {"labelSelector": {"matchLabels": {"app": "batch"}}},
        "location": "spec.containers[name: *].args",
        "parameters": {"values": {"fromList": [f"--batch-{i}"]}},
    }))
for i in range(10):
    typical.append(doc("Assign", f"service-{i}", {
        "applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Service"]}],
        "location": f"spec.x{i}",
        "parameters": {"assign": {"value": "x"}},
    }))
write("typical", typical)


def container(name, image):
    return {
        "name": name,
        "image": image,
        "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
        "env": [{"name": "LOG_LEVEL", "value": "info"}, {"name": "REGION", "value": "eu-west-1"}],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
        "volumeMounts": [{"name": "config", "mountPath": "/etc/app", "readOnly": True}],
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }


pod = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "generateName": "checkout-7d9f8b6c5-",
        "namespace": "shop",
        "labels": {"app": "checkout", "pod-template-hash": "7d9f8b6c5", "version": "v42"},
        "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "9090"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "checkout-7d9f8b6c5",
                             "uid": "4f7c2c1e-98d0-4c8e-8b1e-2d5c8a1f7e10", "controller": True,
                             "blockOwnerDeletion": True}],
    },
    "spec": {
        "containers": [container("app", "registry.example.com/shop/checkout:v42"),
                       container("proxy", "envoyproxy/envoy:v1.30.1"),
                       container("log-shipper", "fluent/fluent-bit:3.0")],
        "volumes": [{"name": "config", "configMap": {"name": "checkout-config"}}],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "checkout",
        "schedulerName": "default-scheduler",
        "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                         "tolerationSeconds": 300}],
        "priority": 0,
        "enableServiceLinks": True,
    },
    "status": {},
}
review = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {
        "uid": "0c9a8d74-9cb7-44dd-b98e-09fd62def2f4",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
        "requestResource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "shop",
        "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller",
                     "uid": "a1b2", "groups": ["system:serviceaccounts", "system:authenticated"]},
        "object": pod,
        "oldObject": None,
        "dryRun": False,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
    },
}
with open(out / "review.json", "w") as f:
    json.dump(review, f)


def aimed_elsewhere(mutator, copy):
    """`mutator` renamed for copy `copy`, applying to a Widget kind instead."""
    m = json.loads(json.dumps(mutator))
    m["metadata"]["name"] += f"-c{copy}"
    widget = [{"groups": ["example.com"], "versions": ["v1"], "kinds": [f"Widget{copy % 100}"]}]
    if "applyTo" in m["spec"]:
        m["spec"]["applyTo"] = widget
    else:  # AssignMetadata: every kind, narrowed by match.kinds
        m["spec"].setdefault("match", {})["kinds"] = [
            {"apiGroups": ["example.com"], "kinds": [f"Widget{copy % 100}"]}]
    return m


for n in map(int, sys.argv[2:]):
    assert n % 100 == 0, "N must be a multiple of 100"
    scaled = out / f"scaled-{n}"
    scaled.mkdir(parents=True, exist_ok=True)
    for copy in range(n // 100):
        batch = typical if copy == 0 else [aimed_elsewhere(m, copy) for m in typical]
        with open(scaled / f"{copy:03}.yaml", "w") as f:
            f.write("\n---\n".join(json.dumps(m) for m in batch) + "\n")
