package shapes

// The system benchmarks that Gatekeeper's unreleased performance branch
// (agent/perf-bottleneck-followups at f04df1581a37, pkg/mutation/
// system_benchmark_test.go) adds, copied here so that they also run against
// the library go.mod pins (v3.23.1), where they do not exist: the same names,
// mutators built the same way (unversioned.Assign structs through
// mutators.MutatorForAssign), the same objects and the same timed loops. Only
// the building of each system is put in a function, shared with
// TestDumpResults. compare.sh times these for v3.23.1 and the branch's own
// for the branch; sartor's twins are in benches/gatekeeper.rs.

import (
	"context"
	"strconv"
	"testing"

	"github.com/open-policy-agent/gatekeeper/v3/apis/mutations/unversioned"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/match"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/mutators"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/types"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// makeValue and assign: as in the branch's system_benchmark_test.go.
func makeValue(v interface{}) unversioned.AssignField {
	return unversioned.AssignField{Value: &types.Anything{Value: v}}
}

func assign(value interface{}, location string) *unversioned.Assign {
	result := &unversioned.Assign{
		Spec: unversioned.AssignSpec{
			ApplyTo: []match.MutationApplyTo{{
				ApplyTo: match.ApplyTo{
					Groups:   []string{"*"},
					Versions: []string{"*"},
					Kinds:    []string{"*"},
				},
			}},
			Location: location,
			Parameters: unversioned.Parameters{
				Assign: makeValue(value),
			},
		},
	}

	return result
}

func upsertAssign(tb testing.TB, s *mutation.System, a *unversioned.Assign) {
	tb.Helper()
	m, err := mutators.MutatorForAssign(a)
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.Upsert(m); err != nil {
		tb.Fatal(err)
	}
}

var (
	deployments = match.ApplyTo{Groups: []string{"apps"}, Versions: []string{"v1"}, Kinds: []string{"Deployment"}}
	configMaps  = match.ApplyTo{Groups: []string{""}, Versions: []string{"v1"}, Kinds: []string{"ConfigMap"}}
)

// deploymentAssigns: n Assigns of "" for Deployments, name<i> at
// spec.<field><i> (the branch's non-matching mutators).
func deploymentAssigns(tb testing.TB, s *mutation.System, name, field string, n int) {
	for i := 0; i < n; i++ {
		a := assign("", "spec."+field+strconv.Itoa(i))
		a.Name = name + strconv.Itoa(i)
		a.Spec.ApplyTo = []match.MutationApplyTo{{ApplyTo: deployments}}
		upsertAssign(tb, s, a)
	}
}

// configMapAssigns: n Assigns for ConfigMaps, name<i> setting spec.field<i>
// to matched<i>; with selectors, the branch's label and namespace selectors.
func configMapAssigns(tb testing.TB, s *mutation.System, name string, n int, selectors bool) {
	for i := 0; i < n; i++ {
		a := assign("matched"+strconv.Itoa(i), "spec.field"+strconv.Itoa(i))
		a.Name = name + strconv.Itoa(i)
		a.Spec.ApplyTo = []match.MutationApplyTo{{ApplyTo: configMaps}}
		if selectors {
			a.Spec.Match.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "gatekeeper"}}
			a.Spec.Match.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
		}
		upsertAssign(tb, s, a)
	}
}

// assignMatching: the one ConfigMap Assign of the placeholder-scan and
// candidate-index benchmarks, spec.matched = "matched".
func assignMatching(tb testing.TB, s *mutation.System) {
	a := assign("matched", "spec.matched")
	a.Name = "assign-matching"
	a.Spec.ApplyTo = []match.MutationApplyTo{{ApplyTo: configMaps}}
	upsertAssign(tb, s, a)
}

func nonMatchingSystem(tb testing.TB, n int) *mutation.System {
	s := mutation.NewSystem(mutation.SystemOpts{})
	deploymentAssigns(tb, s, "assign-", "field", n)
	return s
}

func matchingSystem(tb testing.TB, n int) *mutation.System {
	s := mutation.NewSystem(mutation.SystemOpts{})
	configMapAssigns(tb, s, "assign-matching-", n, false)
	return s
}

func placeholderSystem(tb testing.TB) *mutation.System {
	s := mutation.NewSystem(mutation.SystemOpts{})
	assignMatching(tb, s)
	return s
}

func selectorSystem(tb testing.TB, n int) *mutation.System {
	s := mutation.NewSystem(mutation.SystemOpts{})
	configMapAssigns(tb, s, "assign-selector-", n, true)
	return s
}

func candidateSystem(tb testing.TB, nonmatching int) *mutation.System {
	s := mutation.NewSystem(mutation.SystemOpts{})
	assignMatching(tb, s)
	deploymentAssigns(tb, s, "assign-nonmatching-", "nonmatching", nonmatching)
	return s
}

// bareConfigMap: the ConfigMap without data of the scale benchmarks.
func bareConfigMap() *unstructured.Unstructured {
	base := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]interface{}{
			"name":      "cm",
			"namespace": "default",
		},
	}}
	base.SetGroupVersionKind(schema.GroupVersionKind{Group: "", Version: "v1", Kind: "ConfigMap"})
	return base
}

// selectorObject: the selector benchmark's object and its Namespace.
func selectorObject(n int) (*unstructured.Unstructured, *corev1.Namespace) {
	base := benchmarkMutationObject(10, true, n)
	base.SetLabels(map[string]string{"app": "gatekeeper"})
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", Labels: map[string]string{"env": "prod"}}}
	return base, ns
}

func BenchmarkSystem_MutateNonMatchingMutatorsLargeObject(b *testing.B) {
	s := nonMatchingSystem(b, 100)
	// The branch builds this object inline; it is the same.
	base := benchmarkMutationObject(500, false, 0)

	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, _ = s.Mutate(context.Background(), &types.Mutable{Object: base, Operation: admissionv1.Create})
	}
}

func BenchmarkSystem_MutateNonMatchingMutatorScale(b *testing.B) {
	for _, mutatorCount := range []int{100, 1000} {
		b.Run(strconv.Itoa(mutatorCount), func(b *testing.B) {
			s := nonMatchingSystem(b, mutatorCount)
			base := bareConfigMap()

			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_, _ = s.Mutate(context.Background(), &types.Mutable{Object: base, Operation: admissionv1.Create})
			}
		})
	}
}

func BenchmarkSystem_MutateMatchingMutatorsLargeObject(b *testing.B) {
	for _, tc := range []struct {
		name         string
		mutatorCount int
		dataEntries  int
		preMutated   bool
	}{
		{name: "matching-1/data-500/fresh", mutatorCount: 1, dataEntries: 500},
		{name: "matching-10/data-500/fresh", mutatorCount: 10, dataEntries: 500},
		{name: "matching-100/data-500/fresh", mutatorCount: 100, dataEntries: 500},
		{name: "matching-1000/data-500/fresh", mutatorCount: 1000, dataEntries: 500},
		{name: "matching-1/data-500/already-mutated", mutatorCount: 1, dataEntries: 500, preMutated: true},
		{name: "matching-10/data-500/already-mutated", mutatorCount: 10, dataEntries: 500, preMutated: true},
		{name: "matching-100/data-500/already-mutated", mutatorCount: 100, dataEntries: 500, preMutated: true},
		{name: "matching-1000/data-500/already-mutated", mutatorCount: 1000, dataEntries: 500, preMutated: true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := matchingSystem(b, tc.mutatorCount)
			base := benchmarkMutationObject(tc.dataEntries, tc.preMutated, tc.mutatorCount)

			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				u := base
				if !tc.preMutated {
					b.StopTimer()
					u = base.DeepCopy()
					b.StartTimer()
				}
				if _, err := s.Mutate(context.Background(), &types.Mutable{Object: u, Operation: admissionv1.Create}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkSystem_MutateSkipsPlaceholderScanWithoutTerminatingMutators(b *testing.B) {
	for _, dataEntries := range []int{500, 5000} {
		b.Run("data-"+strconv.Itoa(dataEntries), func(b *testing.B) {
			s := placeholderSystem(b)
			base := benchmarkMutationObject(dataEntries, false, 1)

			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				u := base.DeepCopy()
				b.StartTimer()
				if _, err := s.Mutate(context.Background(), &types.Mutable{Object: u, Operation: admissionv1.Create}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchmarkMutationObject(dataEntries int, preMutated bool, mutatorCount int) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]interface{}{
			"name":      "cm",
			"namespace": "default",
		},
		"data": benchmarkLargeObjectData(dataEntries),
	}}
	obj.SetGroupVersionKind(schema.GroupVersionKind{Group: "", Version: "v1", Kind: "ConfigMap"})

	if preMutated {
		spec := make(map[string]interface{}, mutatorCount)
		for i := 0; i < mutatorCount; i++ {
			spec["field"+strconv.Itoa(i)] = "matched" + strconv.Itoa(i)
		}
		obj.Object["spec"] = spec
	}

	return obj
}

func benchmarkLargeObjectData(entries int) map[string]interface{} {
	data := make(map[string]interface{}, entries)
	for i := 0; i < entries; i++ {
		data["key"+strconv.Itoa(i)] = "value" + strconv.Itoa(i)
	}
	return data
}

func BenchmarkSystem_MutateSelectorMatchingScale(b *testing.B) {
	for _, mutatorCount := range []int{1, 100, 1000} {
		b.Run("matching-"+strconv.Itoa(mutatorCount), func(b *testing.B) {
			s := selectorSystem(b, mutatorCount)
			base, ns := selectorObject(mutatorCount)

			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				u := base.DeepCopy()
				if _, err := s.Mutate(context.Background(), &types.Mutable{Object: u, Namespace: ns, Operation: admissionv1.Create}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkSystem_MutateCandidateIndexScale(b *testing.B) {
	for _, tc := range []struct {
		name        string
		nonmatching int
	}{
		{name: "matching-1/nonmatching-0", nonmatching: 0},
		{name: "matching-1/nonmatching-100", nonmatching: 100},
		{name: "matching-1/nonmatching-1000", nonmatching: 1000},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := candidateSystem(b, tc.nonmatching)
			base := bareConfigMap()

			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := s.Mutate(context.Background(), &types.Mutable{Object: base, Operation: admissionv1.Create}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// dumpSystemShapes writes what Gatekeeper makes of each of these shapes
// (TestDumpResults; sartor's benches/gatekeeper.rs writes the same names).
func dumpSystemShapes(t *testing.T, write func(string, *unstructured.Unstructured)) {
	run := func(name string, s *mutation.System, u *unstructured.Unstructured, ns *corev1.Namespace) {
		if _, err := s.Mutate(context.Background(), &types.Mutable{Object: u, Namespace: ns, Operation: admissionv1.Create}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		write(name, u)
	}
	run("system-nonmatching-large", nonMatchingSystem(t, 100), benchmarkMutationObject(500, false, 0), nil)
	for _, n := range []int{100, 1000} {
		run("system-nonmatching-"+strconv.Itoa(n), nonMatchingSystem(t, n), bareConfigMap(), nil)
	}
	for _, n := range []int{1, 10, 100, 1000} {
		run("system-matching-"+strconv.Itoa(n)+"-fresh", matchingSystem(t, n), benchmarkMutationObject(500, false, n), nil)
		run("system-matching-"+strconv.Itoa(n)+"-already-mutated", matchingSystem(t, n), benchmarkMutationObject(500, true, n), nil)
	}
	for _, n := range []int{500, 5000} {
		run("system-placeholder-"+strconv.Itoa(n), placeholderSystem(t), benchmarkMutationObject(n, false, 1), nil)
	}
	for _, n := range []int{1, 100, 1000} {
		u, ns := selectorObject(n)
		run("system-selector-"+strconv.Itoa(n), selectorSystem(t, n), u, ns)
	}
	for _, n := range []int{0, 100, 1000} {
		run("system-candidate-"+strconv.Itoa(n), candidateSystem(t, n), bareConfigMap(), nil)
	}
}
