package shapes

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/open-policy-agent/gatekeeper/v3/apis/mutations/unversioned"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/mutators"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/types"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// mutator decodes a mutator of kind from its spec, as the controller does
// from the API server's JSON, and compiles it as Gatekeeper's controller does.
func mutator(tb testing.TB, kind, name, spec string) types.Mutator {
	tb.Helper()
	doc := fmt.Sprintf(`{"apiVersion": "mutations.gatekeeper.sh/v1", "kind": %q, "metadata": {"name": %q}, "spec": %s}`, kind, name, spec)
	return compile(tb, kind, name, doc)
}

// compile decodes doc, a whole mutator of kind, and compiles it.
func compile(tb testing.TB, kind, name, doc string) types.Mutator {
	tb.Helper()
	var (
		m   types.Mutator
		err error
	)
	switch kind {
	case "Assign":
		var a unversioned.Assign
		if err = json.Unmarshal([]byte(doc), &a); err == nil {
			m, err = mutators.MutatorForAssign(&a)
		}
	case "AssignImage":
		var a unversioned.AssignImage
		if err = json.Unmarshal([]byte(doc), &a); err == nil {
			m, err = mutators.MutatorForAssignImage(&a)
		}
	case "AssignMetadata":
		var a unversioned.AssignMetadata
		if err = json.Unmarshal([]byte(doc), &a); err == nil {
			m, err = mutators.MutatorForAssignMetadata(&a)
		}
	case "ModifySet":
		var a unversioned.ModifySet
		if err = json.Unmarshal([]byte(doc), &a); err == nil {
			m, err = mutators.MutatorForModifySet(&a)
		}
	default:
		err = fmt.Errorf("unknown kind %q", kind)
	}
	if err != nil {
		tb.Fatalf("%s %s: %v", kind, name, err)
	}
	return m
}

func applyTo(group, version, kind string) string {
	return fmt.Sprintf(`[{"groups": [%q], "versions": [%q], "kinds": [%q]}]`, group, version, kind)
}

func object(tb testing.TB, doc string) *unstructured.Unstructured {
	tb.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(doc)); err != nil {
		tb.Fatal(err)
	}
	return u
}

func upsert(tb testing.TB, s *mutation.System, m types.Mutator) {
	tb.Helper()
	if err := s.Upsert(m); err != nil {
		tb.Fatal(err)
	}
}

// shop is the Namespace the webhook would fetch for a request in "shop".
var shop = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}

// mutate is the webhook's call (pkg/webhook/mutation.go, mutateRequest).
func mutate(s *mutation.System, obj *unstructured.Unstructured, ns *corev1.Namespace) (bool, error) {
	return s.Mutate(context.Background(), &types.Mutable{
		Object:    obj,
		Namespace: ns,
		Source:    types.SourceTypeOriginal,
		Operation: admissionv1.Create,
	})
}

// batched times f on fresh deep copies of proto, made outside the timer in
// batches, as criterion's iter_batched_ref does for sartor's benches.
func batched(b *testing.B, proto *unstructured.Unstructured, f func(*unstructured.Unstructured)) {
	const batch = 100
	b.ResetTimer()
	b.StopTimer()
	for done := 0; done < b.N; {
		n := min(batch, b.N-done)
		copies := make([]*unstructured.Unstructured, n)
		for i := range copies {
			copies[i] = proto.DeepCopy()
		}
		b.StartTimer()
		for _, c := range copies {
			f(c)
		}
		b.StopTimer()
		done += n
	}
}

// BenchmarkSystemMutateEmptyPod: one Assign at spec that applies to an empty
// Pod (sartor's "System_Mutate/empty Pod, Assign applies").
func BenchmarkSystemMutateEmptyPod(b *testing.B) {
	s := mutation.NewSystem(mutation.SystemOpts{})
	upsert(b, s, mutator(b, "Assign", "bench",
		`{"applyTo": `+applyTo("", "v1", "Pod")+`, "location": "spec", "parameters": {"assign": {"value": ""}}}`))
	pod := object(b, `{"apiVersion": "v1", "kind": "Pod"}`)
	batched(b, pod, func(u *unstructured.Unstructured) {
		if _, err := mutate(s, u, nil); err != nil {
			b.Fatal(err)
		}
	})
}

const threeContainerPod = `{
  "apiVersion": "v1",
  "kind": "Pod",
  "metadata": {"name": "web-7d9f", "namespace": "shop", "labels": {"app": "web", "tier": "front"}},
  "spec": {
    "containers": [
      {"name": "app", "image": "registry.example.com/shop/web:1.4.2", "ports": [{"containerPort": 8080}],
       "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}},
      {"name": "proxy", "image": "envoyproxy/envoy:v1.30", "ports": [{"containerPort": 8080}],
       "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}},
      {"name": "log", "image": "fluent/fluent-bit:3.0", "ports": [{"containerPort": 8080}],
       "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}
    ],
    "serviceAccountName": "web"
  }
}`

// matchingTen: the ten mutators of scale.rs's matching_ten, same specs.
func matchingTen(tb testing.TB, s *mutation.System) {
	pod := applyTo("", "v1", "Pod")
	specs := [][3]string{
		{"Assign", "pull-always", `{"applyTo": ` + pod + `, "location": "spec.containers[name: *].imagePullPolicy", "parameters": {"assign": {"value": "Always"}}}`},
		{"Assign", "seccomp", `{"applyTo": ` + pod + `, "location": "spec.securityContext.seccompProfile.type", "parameters": {"assign": {"value": "RuntimeDefault"}}}`},
		{"Assign", "non-root", `{"applyTo": ` + pod + `, "location": "spec.containers[name: *].securityContext.runAsNonRoot", "parameters": {"assign": {"value": true}}}`},
		{"Assign", "no-priv-esc", `{"applyTo": ` + pod + `, "location": "spec.containers[name: *].securityContext.allowPrivilegeEscalation", "parameters": {"assign": {"value": false}}}`},
		{"Assign", "host-from-name", `{"applyTo": ` + pod + `, "location": "spec.hostname", "parameters": {"assign": {"fromMetadata": {"field": "name"}}}}`},
		{"Assign", "sidecar", `{"applyTo": ` + pod + `, "location": "spec.containers[name: metrics]", "parameters": {"assign": {"value": {"name": "metrics", "image": "prom/exporter:1"}}, "pathTests": [{"subPath": "spec.containers[name: metrics]", "condition": "MustNotExist"}]}}`},
		{"AssignImage", "mirror", `{"applyTo": ` + pod + `, "location": "spec.containers[name: *].image", "parameters": {"assignDomain": "mirror.example.com"}}`},
		{"ModifySet", "drop-debug", `{"applyTo": ` + pod + `, "location": "spec.containers[name: *].args", "parameters": {"operation": "prune", "values": {"fromList": ["--debug"]}}}`},
		{"AssignMetadata", "owner", `{"match": {"namespaces": ["shop"]}, "location": "metadata.labels.owner", "parameters": {"assign": {"fromMetadata": {"field": "namespace"}}}}`},
		{"AssignMetadata", "policy", `{"location": "metadata.annotations.\"example.com/policy\"", "parameters": {"assign": {"value": "strict"}}}`},
	}
	for _, spec := range specs {
		upsert(tb, s, mutator(tb, spec[0], spec[1], spec[2]))
	}
}

// podSystem: the ten matching mutators plus total-10 Assigns that apply to
// 100 other kinds (scale.rs's pod_through_many). Built once per total:
// Gatekeeper's Upsert of 10,000 mutators is slow and not what is timed.
var podSystems sync.Map

func podSystem(tb testing.TB, total int) *mutation.System {
	if s, ok := podSystems.Load(total); ok {
		return s.(*mutation.System)
	}
	s := mutation.NewSystem(mutation.SystemOpts{})
	matchingTen(tb, s)
	for i := 0; i < total-10; i++ {
		upsert(tb, s, mutator(tb, "Assign", fmt.Sprintf("other-%05d", i),
			fmt.Sprintf(`{"applyTo": %s, "location": "spec.field%d", "parameters": {"assign": {"value": %d}}}`,
				applyTo("example.com", "v1", fmt.Sprintf("Widget%d", i%100)), i, i)))
	}
	podSystems.Store(total, s)
	return s
}

func BenchmarkPodThroughN(b *testing.B) {
	for _, total := range []int{10, 100, 1000, 10000} {
		b.Run(fmt.Sprint(total), func(b *testing.B) {
			s := podSystem(b, total)
			pod := object(b, threeContainerPod)
			batched(b, pod, func(u *unstructured.Unstructured) {
				if _, err := mutate(s, u, shop); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

func configMap() string {
	data := map[string]string{}
	for i := 0; i < 500; i++ {
		data[fmt.Sprintf("key-%03d", i)] = fmt.Sprintf("value-%d", i)
	}
	raw, _ := json.Marshal(data)
	return `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "shop"}, "data": ` + string(raw) + `}`
}

// configMapSystem: n Assigns on data.key-000, key-002, ... (half overwrite
// entries, half add new ones), as scale.rs's configmap_through_many.
func configMapSystem(tb testing.TB, n int) *mutation.System {
	s := mutation.NewSystem(mutation.SystemOpts{})
	for i := 0; i < n; i++ {
		upsert(tb, s, mutator(tb, "Assign", fmt.Sprintf("set-%04d", i),
			fmt.Sprintf(`{"applyTo": %s, "location": "data.key-%03d", "parameters": {"assign": {"value": "mutated"}}}`,
				applyTo("", "v1", "ConfigMap"), i*2)))
	}
	return s
}

func BenchmarkConfigMapThroughN(b *testing.B) {
	for _, n := range []int{1, 10, 100, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s := configMapSystem(b, n)
			cm := object(b, configMap())
			batched(b, cm, func(u *unstructured.Unstructured) {
				if _, err := mutate(s, u, shop); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// loadSet is one of the webhook load test's sets (crates/webhook/load/
// make-load.py, written to SARTOR_LOAD_DIR): its 100 mutators, each the same
// spec under Gatekeeper's apiVersion, and its Pod (review.json's object).
// Skips when SARTOR_LOAD_DIR is not set.
func loadSet(tb testing.TB, set string) (*mutation.System, *unstructured.Unstructured) {
	tb.Helper()
	dir := os.Getenv("SARTOR_LOAD_DIR")
	if dir == "" {
		tb.Skip("SARTOR_LOAD_DIR not set")
	}
	raw, err := os.ReadFile(dir + "/" + set + "/100.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	s := mutation.NewSystem(mutation.SystemOpts{})
	loaded := 0
	// make-load.py writes one JSON document per line, between "---" lines.
	for _, line := range strings.Split(string(raw), "\n") {
		if line == "" || line == "---" {
			continue
		}
		var doc map[string]any
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			tb.Fatalf("%s: %v", set, err)
		}
		doc["apiVersion"] = "mutations.gatekeeper.sh/v1"
		gatekeeper, err := json.Marshal(doc)
		if err != nil {
			tb.Fatal(err)
		}
		kind, _ := doc["kind"].(string)
		metadata, _ := doc["metadata"].(map[string]any)
		name, _ := metadata["name"].(string)
		upsert(tb, s, compile(tb, kind, name, string(gatekeeper)))
		loaded++
	}
	if loaded != 100 {
		tb.Fatalf("%s: %d mutators, not 100", set, loaded)
	}
	review, err := os.ReadFile(dir + "/review.json")
	if err != nil {
		tb.Fatal(err)
	}
	var parsed struct {
		Request struct {
			Object json.RawMessage `json:"object"`
		} `json:"request"`
	}
	if err := json.Unmarshal(review, &parsed); err != nil {
		tb.Fatal(err)
	}
	if len(parsed.Request.Object) == 0 {
		tb.Fatal("review.json has no request.object")
	}
	return s, object(tb, string(parsed.Request.Object))
}

// loadSets: the load test's sets, as sartor's scale bench names them.
var loadSets = []string{"typical", "heavy"}

// BenchmarkLoadSets: the load test's Pod through each of its sets of 100
// mutators (sartor's "load test's Pod through a set of 100").
func BenchmarkLoadSets(b *testing.B) {
	for _, set := range loadSets {
		b.Run(set, func(b *testing.B) {
			s, pod := loadSet(b, set)
			batched(b, pod, func(u *unstructured.Unstructured) {
				if _, err := mutate(s, u, shop); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// TestDumpResults writes what Gatekeeper makes of the realistic shapes, so
// they can be compared with sartor's result (SARTOR_GK_DUMP=dir).
func TestDumpResults(t *testing.T) {
	dir := os.Getenv("SARTOR_GK_DUMP")
	if dir == "" {
		t.Skip("SARTOR_GK_DUMP not set")
	}
	write := func(name string, u *unstructured.Unstructured) {
		raw, err := u.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dir+"/"+name+".json", raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, total := range []int{10, 100, 1000, 10000} {
		pod := object(t, threeContainerPod)
		if _, err := mutate(podSystem(t, total), pod, shop); err != nil {
			t.Fatal(err)
		}
		write(fmt.Sprintf("pod-%d", total), pod)
	}
	for _, n := range []int{1, 10, 100, 1000} {
		cm := object(t, configMap())
		if _, err := mutate(configMapSystem(t, n), cm, shop); err != nil {
			t.Fatal(err)
		}
		write(fmt.Sprintf("configmap-%d", n), cm)
	}
	if os.Getenv("SARTOR_LOAD_DIR") != "" {
		for _, set := range loadSets {
			s, pod := loadSet(t, set)
			if _, err := mutate(s, pod, shop); err != nil {
				t.Fatal(err)
			}
			write("load-"+set, pod)
		}
	}
	dumpSystemShapes(t, write)
}
