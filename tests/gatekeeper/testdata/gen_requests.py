# Regenerates requests.jsonl (run from this directory: python3 gen_requests.py),
# then `go test ./... -run TestGolden -update` rewrites answers.jsonl.
import json
POD2 = {"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"default","labels":{"a":"x"}},"spec":{"containers":[{"name":"app","image":"nginx"},{"name":"side","image":"busybox"}]}}
POD3 = {"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"prod","labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"nginx:1.25","ports":[{"containerPort":80}]},{"name":"side","image":"docker.io/library/busybox:1.36","args":["sleep","3600"]},{"name":"log","image":"fluent/fluent-bit:2.2","resources":{"limits":{"cpu":"100m"}}}]}}
NS = lambda n, labels=None: {"apiVersion":"v1","kind":"Namespace","metadata":{"name":n, **({"labels":labels} if labels else {})}}
POD_APPLY = [{"groups":[""],"kinds":["Pod"],"versions":["v1"]}]
def assign(name, loc, value, version="v1", extra_params=None, match=None, apply=POD_APPLY):
    spec = {"applyTo":apply,"location":loc,"parameters":{"assign":{"value":value}}}
    if extra_params: spec["parameters"].update(extra_params)
    if match is not None: spec["match"] = match
    return {"apiVersion":f"mutations.gatekeeper.sh/{version}","kind":"Assign","metadata":{"name":name},"spec":spec}
def req(i, muts, obj, ns, op="CREATE", user=None):
    r = {"id":i,"mutators":muts,"object":obj,"namespace":ns,"operation":op}
    if user is not None: r["username"] = user
    return r
reqs = []
# (a) aliasing
reqs.append(req("a-aliasing",[assign("a-sc","spec.containers[name: *].securityContext",{}),assign("b-priv","spec.containers[name: app].securityContext.privileged",False)],POD2,NS("default")))
# (b) unknown parameter field pruned
reqs.append(req("b-assignif-pruned",[assign("b",'spec.containers[name: *].imagePullPolicy',"Always",extra_params={"assignIf":{"in":["x"]}})],POD2,NS("default")))
# (c) pathTest without condition
reqs.append(req("c-pathtest-no-condition",[assign("c",'spec.containers[name: app].imagePullPolicy',"Always",extra_params={"pathTests":[{"subPath":"spec.containers[name: app]"}]})],POD2,NS("default")))
# (d) matchExpressions In without values
reqs.append(req("d-in-without-values",[assign("d",'spec.containers[name: *].imagePullPolicy',"Always",match={"labelSelector":{"matchExpressions":[{"key":"a","operator":"In"}]}})],POD2,NS("default")))
# (e) core group mutated, gatekeeper group skipped
reqs.append(req("e-core-pod",[assign("e",'metadata.labels.team',"blue", extra_params=None) if False else {"apiVersion":"mutations.gatekeeper.sh/v1","kind":"AssignMetadata","metadata":{"name":"e"},"spec":{"location":"metadata.labels.team","parameters":{"assign":{"value":"blue"}}}}],POD2,NS("default")))
reqs.append(req("e-constraint-skipped",[{"apiVersion":"mutations.gatekeeper.sh/v1","kind":"AssignMetadata","metadata":{"name":"e"},"spec":{"location":"metadata.labels.team","parameters":{"assign":{"value":"blue"}}}}],{"apiVersion":"constraints.gatekeeper.sh/v1beta1","kind":"K8sRequiredLabels","metadata":{"name":"must-have-team"},"spec":{}},None))
# (f) big integer
reqs.append(req("f-big-int",[assign("f","spec.activeDeadlineSeconds",9007199254740993)],POD2,NS("default")))
# more
reqs.append(req("g-v1beta1-assign",[assign("g",'spec.containers[name: *].imagePullPolicy',"IfNotPresent",version="v1beta1")],POD2,NS("default")))
reqs.append(req("h-bad-name",[assign("Bad_Name","spec.priority",1)],POD2,NS("default")))
reqs.append(req("i-compile-error-metadata",[assign("i","metadata.labels.x","y")],POD2,NS("default")))
reqs.append(req("j-schema-conflict",[assign("j1","spec.containers[name: app].image","nginx"),assign("j2","spec.containers.app.image","nginx")],POD2,NS("default")))
reqs.append(req("k-delete-skipped",[assign("k","spec.priority",1)],POD2,NS("default"),op="DELETE"))
reqs.append(req("l-namespace-object",[{"apiVersion":"mutations.gatekeeper.sh/v1","kind":"AssignMetadata","metadata":{"name":"l"},"spec":{"match":{"namespaceSelector":{"matchLabels":{"env":"prod"}}},"location":"metadata.labels.owned","parameters":{"assign":{"value":"yes"}}}}],NS("prod",{"env":"prod"}),NS("other")))
reqs.append(req("m-missing-namespace",[assign("m","spec.priority",1)],POD2,None))
reqs.append(req("n-modifyset",[{"apiVersion":"mutations.gatekeeper.sh/v1","kind":"ModifySet","metadata":{"name":"n"},"spec":{"applyTo":POD_APPLY,"location":"spec.containers[name: side].args","parameters":{"operation":"merge","values":{"fromList":["--verbose"]}}}}],POD3,NS("prod")))
reqs.append(req("o-assignimage",[{"apiVersion":"mutations.gatekeeper.sh/v1alpha1","kind":"AssignImage","metadata":{"name":"o"},"spec":{"applyTo":POD_APPLY,"location":"spec.containers[name: *].image","parameters":{"assignDomain":"registry.example.com"}}}],POD3,NS("prod")))
reqs.append(req("p-unknown-kind",[{"apiVersion":"mutations.gatekeeper.sh/v1","kind":"AssignImage","metadata":{"name":"p"},"spec":{}}],POD2,NS("default")))
reqs.append(req("q-match-username-pruned",[assign("q","spec.priority",1,match={"username":"alice"})],POD2,NS("default"),user="alice"))
reqs.append(req("r-unchanged",[assign("r","spec.containers[name: app].image","nginx")],POD2,NS("default")))
reqs.append(req("s-gk-service-account",[assign("s","spec.priority",1)],POD2,NS("default"),user="system:serviceaccount:gatekeeper-system:gatekeeper-admin"))
reqs.append(req("t-update-operation-filter",[assign("t","spec.priority",1,apply=[{"groups":[""],"kinds":["Pod"],"versions":["v1"],"operations":["CREATE"]}])],POD2,NS("default"),op="UPDATE"))
reqs.append(req("u-invalid-enum",[{"apiVersion":"mutations.gatekeeper.sh/v1","kind":"ModifySet","metadata":{"name":"u"},"spec":{"applyTo":POD_APPLY,"location":"spec.containers[name: side].args","parameters":{"operation":"add","values":{"fromList":["x"]}}}}],POD2,NS("default")))
reqs.append(req("v-typical-5",[
  assign("v1-pull",'spec.containers[name: *].imagePullPolicy',"Always"),
  assign("v2-nonroot",'spec.securityContext.runAsNonRoot',True),
  {"apiVersion":"mutations.gatekeeper.sh/v1","kind":"AssignMetadata","metadata":{"name":"v3-team"},"spec":{"location":"metadata.labels.team","parameters":{"assign":{"value":"blue"}}}},
  {"apiVersion":"mutations.gatekeeper.sh/v1","kind":"ModifySet","metadata":{"name":"v4-args"},"spec":{"applyTo":POD_APPLY,"location":"spec.containers[name: side].args","parameters":{"values":{"fromList":["--verbose"]}}}},
  {"apiVersion":"mutations.gatekeeper.sh/v1alpha1","kind":"AssignImage","metadata":{"name":"v5-registry"},"spec":{"applyTo":POD_APPLY,"location":"spec.containers[name: *].image","parameters":{"assignDomain":"registry.example.com"}}},
],POD3,NS("prod",{"env":"prod"})))
reqs.append(req("w-assign-on-namespace-nodefault",[assign("w","spec.priority",1)],{"apiVersion":"v1","kind":"Pod","metadata":{"name":"nons"},"spec":{}},None))
reqs.append(req("y-namespace-without-typemeta",[{"apiVersion":"mutations.gatekeeper.sh/v1","kind":"AssignMetadata","metadata":{"name":"y"},"spec":{"match":{"namespaceSelector":{"matchLabels":{"env":"prod"}}},"location":"metadata.labels.owned","parameters":{"assign":{"value":"yes"}}}}],POD3,{"metadata":{"name":"prod","labels":{"env":"prod"}}}))
# expansion (requests with "templates")
def template(name, kinds, source, gen, version="v1beta1"):
    return {"apiVersion":f"expansion.gatekeeper.sh/{version}","kind":"ExpansionTemplate","metadata":{"name":name},
            "spec":{"applyTo":[{"groups":[g],"versions":[v],"kinds":[k]} for (g,v,k) in kinds],"templateSource":source,"generatedGVK":gen}}
POD_GVK = {"group":"","version":"v1","kind":"Pod"}
EXPAND_DEPLOYMENTS = template("expand-deployments",[("apps","v1","Deployment"),("apps","v1","ReplicaSet")],"spec.template",POD_GVK)
EXPAND_CRONJOBS = template("expand-cronjobs",[("batch","v1","CronJob")],"spec.jobTemplate",{"group":"batch","version":"v1","kind":"Job"},version="v1alpha1")
EXPAND_JOBS = template("expand-jobs",[("batch","v1","Job")],"spec.template",POD_GVK)
DEPLOY = {"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"prod","labels":{"app":"web"}},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"nginx"}]}}}}
CRONJOB = {"apiVersion":"batch/v1","kind":"CronJob","metadata":{"name":"nightly","namespace":"prod"},"spec":{"schedule":"0 0 * * *","jobTemplate":{"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"app","image":"busybox"}]}}}}}}
def with_source(m, source):
    m = json.loads(json.dumps(m)); m["spec"].setdefault("match",{})["source"] = source; return m
def expand(i, muts, obj, ns, templates, op="CREATE"):
    r = req(i, muts, obj, ns, op=op); r["templates"] = templates; return r
PULL = assign("pull",'spec.containers[name: *].imagePullPolicy',"Always")
reqs.append(expand("xa-deployment-pod",[with_source(PULL,"Generated"),with_source(assign("orig","spec.priority",1),"Original"),
  {"apiVersion":"mutations.gatekeeper.sh/v1","kind":"AssignMetadata","metadata":{"name":"team"},"spec":{"location":"metadata.labels.team","parameters":{"assign":{"value":"blue"}}}}],DEPLOY,NS("prod"),[EXPAND_DEPLOYMENTS]))
reqs.append(expand("xb-cronjob-job-pod",[PULL],CRONJOB,NS("prod"),[EXPAND_CRONJOBS,EXPAND_JOBS]))
reqs.append(expand("xc-refused-templates",[],DEPLOY,NS("prod"),[
  template("no-source",[("apps","v1","Deployment")],"",POD_GVK),
  template("self",[("","v1","Pod")],"spec",POD_GVK),
  template("cycle-a",[("apps","v1","Deployment")],"spec.template",POD_GVK),
  template("cycle-b",[("","v1","Pod")],"spec",{"group":"apps","version":"v1","kind":"Deployment"}),
  {"apiVersion":"expansion.gatekeeper.sh/v1beta1","kind":"ExpansionTemplate","metadata":{"name":"bad-type"},"spec":{"applyTo":"Deployment"}}]))
reqs.append(expand("xd-no-source-field",[PULL],{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"empty","namespace":"prod"},"spec":{"replicas":1}},NS("prod"),[EXPAND_DEPLOYMENTS]))
reqs.append(expand("xe-operation-create-only",[assign("create-only",'spec.containers[name: *].imagePullPolicy',"Always",apply=[{"groups":[""],"kinds":["Pod"],"versions":["v1"],"operations":["CREATE"]}])],DEPLOY,NS("prod"),[EXPAND_DEPLOYMENTS]))
reqs.append(expand("xf-unchanged",[with_source(PULL,"Original")],DEPLOY,NS("prod"),[EXPAND_DEPLOYMENTS]))
with open("requests.jsonl","w") as f:
    for r in reqs: f.write(json.dumps(r, separators=(",",":"))+"\n")
    f.write('{"id":"x-malformed","mutators":"nope","object":{}}\n')
