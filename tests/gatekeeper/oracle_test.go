package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/answers.jsonl from the oracle's answers")

var testOracle *Oracle

// TestMain finds Gatekeeper's CRDs in the module directory (or
// $SARTOR_GATEKEEPER_CRDS) — the same files the build script copies.
func TestMain(m *testing.M) {
	flag.Parse()
	dir := os.Getenv("SARTOR_GATEKEEPER_CRDS")
	if dir == "" {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/open-policy-agent/gatekeeper/v3").Output()
		if err != nil {
			panic("go list -m gatekeeper: " + err.Error())
		}
		dir = filepath.Join(strings.TrimSpace(string(out)), "charts", "gatekeeper", "crds")
	}
	var err error
	testOracle, err = NewOracle(dir)
	if err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

// requests reads testdata/requests.jsonl keyed by id.
func requests(t *testing.T) (ids []string, lines map[string][]byte) {
	t.Helper()
	f, err := os.Open("testdata/requests.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines = map[string][]byte{}
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<24)
	for s.Scan() {
		var r struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(s.Bytes(), &r)
		ids = append(ids, r.ID)
		lines[r.ID] = append([]byte(nil), s.Bytes()...)
	}
	return ids, lines
}

func answer(t *testing.T, id string) map[string]any {
	t.Helper()
	_, lines := requests(t)
	line, ok := lines[id]
	if !ok {
		t.Fatalf("no request %q in testdata/requests.jsonl", id)
	}
	var a map[string]any
	if err := json.Unmarshal(testOracle.AnswerLine(line), &a); err != nil {
		t.Fatal(err)
	}
	return a
}

func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func eq(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		t.Errorf("%s: got %s, want %s", what, gj, wj)
	}
}

// (a) Assign containers[name: *].securityContext = {} (runs first: mutators
// run in ID order, a-sc < b-priv) then containers[name: app].securityContext.privileged
// = false: the {} value is shared between containers, so both get privileged: false.
func TestAliasing(t *testing.T) {
	a := answer(t, "a-aliasing")
	eq(t, "outcome", a["outcome"], "mutated")
	eq(t, "app", get(a, "object", "spec", "containers", 0, "securityContext"), map[string]any{"privileged": false})
	eq(t, "side", get(a, "object", "spec", "containers", 1, "securityContext"), map[string]any{"privileged": false})
}

// (b) parameters.assignIf is not in the CRD schema: pruned, mutator accepted.
func TestUnknownFieldPruned(t *testing.T) {
	a := answer(t, "b-assignif-pruned")
	eq(t, "accepted", get(a, "mutators", 0, "accepted"), true)
	eq(t, "pruned", get(a, "mutators", 0, "pruned"), []any{"spec.parameters.assignIf"})
	eq(t, "stored has no assignIf", get(a, "mutators", 0, "stored", "spec", "parameters", "assignIf"), nil)
	eq(t, "outcome", a["outcome"], "mutated")
}

// (c) a pathTest without condition is accepted (no CRD default, no compile
// check) — and then never lets the mutator apply: condition "" is neither
// MustExist nor MustNotExist, so tester.ExistsOkay and MissingOkay are both false.
func TestPathTestWithoutCondition(t *testing.T) {
	a := answer(t, "c-pathtest-no-condition")
	eq(t, "accepted", get(a, "mutators", 0, "accepted"), true)
	eq(t, "stored pathTests", get(a, "mutators", 0, "stored", "spec", "parameters", "pathTests"), []any{map[string]any{"subPath": "spec.containers[name: app]"}})
	eq(t, "outcome", a["outcome"], "unchanged")
}

// (d) matchExpressions In without values: accepted; matching a Pod fails.
func TestInWithoutValues(t *testing.T) {
	a := answer(t, "d-in-without-values")
	eq(t, "accepted", get(a, "mutators", 0, "accepted"), true)
	eq(t, "outcome", a["outcome"], "error")
	eq(t, "error", a["error"], "matching for mutator Assign.mutations.gatekeeper.sh /d failed for  Pod default p: failed to run Match criteria: values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty")
}

// (e) group "" is mutated; constraints.gatekeeper.sh is never mutated.
func TestGatekeeperGroupSkipped(t *testing.T) {
	a := answer(t, "e-core-pod")
	eq(t, "pod outcome", a["outcome"], "mutated")
	eq(t, "pod label", get(a, "object", "metadata", "labels", "team"), "blue")
	a = answer(t, "e-constraint-skipped")
	eq(t, "constraint outcome", a["outcome"], "skipped")
	eq(t, "constraint skipped", a["skipped"], "Not mutating gatekeeper resources")
}

// (f) types.Anything decodes the value with encoding/json into float64:
// 9007199254740993 becomes 9007199254740992.
func TestBigInteger(t *testing.T) {
	_, lines := requests(t)
	out := string(testOracle.AnswerLine(lines["f-big-int"]))
	if !strings.Contains(out, `"activeDeadlineSeconds":9007199254740992`) {
		t.Errorf("want activeDeadlineSeconds 9007199254740992 in the mutated object, got %s", out)
	}
	if !strings.Contains(out, `"assign":{"value":9007199254740993}`) {
		t.Errorf("want the stored mutator to keep 9007199254740993 (the API server keeps int64), got %s", out)
	}
}

// The oracle's answers to testdata/requests.jsonl, through the same loop
// the binary runs, equal testdata/answers.jsonl byte for byte.
func TestGolden(t *testing.T) {
	in, err := os.ReadFile("testdata/requests.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := testOracle.Serve(bytes.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("testdata/answers.jsonl", out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile("testdata/answers.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	gotLines := strings.Split(out.String(), "\n")
	wantLines := strings.Split(string(want), "\n")
	if len(gotLines) != len(wantLines) {
		t.Fatalf("got %d answer lines, want %d", len(gotLines), len(wantLines))
	}
	for i := range gotLines {
		if gotLines[i] != wantLines[i] {
			t.Errorf("answer line %d differs:\n got  %s\n want %s", i+1, gotLines[i], wantLines[i])
		}
	}
}

// (x) Expansion as gator expand does it: the Deployment mutated first, its
// Pod generated from spec.template (name PARENT-KIND, owner reference with
// an empty uid) and mutated with Source Generated; resultants of resultants
// come first; the generated Pod is mutated without an operation, so a
// mutator applying to CREATE only leaves it alone.
func TestExpansion(t *testing.T) {
	a := answer(t, "xa-deployment-pod")
	eq(t, "pod", get(a, "generated", 0, "object", "metadata", "name"), "web-pod")
	eq(t, "owner", get(a, "generated", 0, "object", "metadata", "ownerReferences", 0), map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": ""})
	eq(t, "generated-only mutator", get(a, "generated", 0, "object", "spec", "containers", 0, "imagePullPolicy"), "Always")
	eq(t, "parent label", get(a, "generated", 0, "object", "metadata", "labels", "team"), "blue")
	a = answer(t, "xb-cronjob-job-pod")
	eq(t, "grandchild first", get(a, "generated", 0, "object", "metadata", "name"), "nightly-job-pod")
	eq(t, "then the job", get(a, "generated", 1, "template"), "expand-cronjobs")
	a = answer(t, "xc-refused-templates")
	eq(t, "cycle closed", get(a, "templates", 3, "error"), "template forms expansion cycle")
	eq(t, "cycle kept, unused", get(a, "templates", 2, "conflict"), true)
	eq(t, "nothing generated", get(a, "generated"), []any{})
	a = answer(t, "xd-no-source-field")
	eq(t, "no source", a["expandError"], `could not find source field "spec.template" in resource empty`)
	a = answer(t, "xe-operation-create-only")
	eq(t, "create-only", get(a, "generated", 0, "outcome"), "unchanged")
}
