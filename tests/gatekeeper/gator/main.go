// Command gator prints what Gatekeeper v3.23.1's `gator expand` code
// (pkg/gator/expand) does with manifests: each object that is not a
// mutator, ExpansionTemplate or Namespace, mutated as gator mutates it (a
// namespace-less object gets an empty Namespace: NamespaceForResource), then
// what it expands into; one JSON object per line. It is how
// docs/gatekeeper-differences.md checks what gator does offline:
//
//	cd tests/gatekeeper && go run ./gator FILE...
//
// Files are YAML, documents separated by a line `---`; mutators and
// templates need Gatekeeper's apiVersions.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/open-policy-agent/gatekeeper/v3/pkg/gator/expand"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func main() {
	var resources []*unstructured.Unstructured
	for _, f := range os.Args[1:] {
		text, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		for _, doc := range strings.Split(string(text), "\n---\n") {
			var m map[string]interface{}
			if err := yaml.Unmarshal([]byte(doc), &m); err != nil || m == nil {
				continue
			}
			resources = append(resources, &unstructured.Unstructured{Object: m})
		}
	}
	er, err := expand.NewExpander(resources)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for _, r := range resources {
		g := r.GroupVersionKind().Group
		if strings.HasPrefix(g, "mutations.") || strings.HasPrefix(g, "expansion.") || r.GetKind() == "Namespace" {
			continue
		}
		results, err := er.Expand(r)
		if err != nil {
			fmt.Println("error:", err)
			continue
		}
		out, _ := json.Marshal(r.Object)
		fmt.Println(string(out))
		for _, res := range results {
			out, _ := json.Marshal(res.Obj.Object)
			fmt.Println(string(out))
		}
	}
}
