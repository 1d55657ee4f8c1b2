package main

import (
	"encoding/json"
	"fmt"
	"reflect"

	expansionunversioned "github.com/open-policy-agent/gatekeeper/v3/apis/expansion/unversioned"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/expansion"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// TemplateAnswer is the fate of one input ExpansionTemplate.
type TemplateAnswer struct {
	Name     string `json:"name"`
	Accepted bool   `json:"accepted"`
	// Conflict: accepted, but in a cycle of templates (expansion.System
	// GetConflicts), so never used.
	Conflict bool   `json:"conflict,omitempty"`
	Stage    string `json:"stage,omitempty"`
	Error    string `json:"error,omitempty"`
}

// GeneratedAnswer is one resultant of expansion.System.Expand.
type GeneratedAnswer struct {
	Template string                 `json:"template"`
	Outcome  string                 `json:"outcome"`
	Object   map[string]interface{} `json:"object,omitempty"`
	Error    string                 `json:"error,omitempty"`
}

// upsertTemplates does what pkg/gator/expand/expand.go NewExpander does with
// each ExpansionTemplate among its resources: isExpansion (group
// expansion.gatekeeper.sh, kind ExpansionTemplate), convertExpansionTemplate
// (runtime.DefaultUnstructuredConverter.FromUnstructured into the
// unversioned type), expansion.System.UpsertTemplate. gator stops at the
// first refusal; here a refused template is reported and the others kept,
// as the expansion controller does in a cluster.
func upsertTemplates(sys *expansion.System, raws []json.RawMessage) []TemplateAnswer {
	answers := make([]TemplateAnswer, 0, len(raws))
	for _, raw := range raws {
		ta := TemplateAnswer{}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			var head struct {
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			_ = json.Unmarshal(raw, &head)
			ta.Name, ta.Stage, ta.Error = head.Metadata.Name, "decode", err.Error()
			answers = append(answers, ta)
			continue
		}
		ta.Name = u.GetName()
		gvk := u.GroupVersionKind()
		if gvk.Group != "expansion.gatekeeper.sh" || gvk.Kind != "ExpansionTemplate" {
			ta.Stage, ta.Error = "decode", fmt.Sprintf("not an ExpansionTemplate: %s %s", u.GetAPIVersion(), u.GetKind())
			answers = append(answers, ta)
			continue
		}
		te := &expansionunversioned.ExpansionTemplate{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), te); err != nil {
			ta.Stage, ta.Error = "decode", err.Error()
			answers = append(answers, ta)
			continue
		}
		if err := sys.UpsertTemplate(te); err != nil {
			ta.Stage, ta.Error = "upsert", err.Error()
			answers = append(answers, ta)
			continue
		}
		ta.Accepted = true
		answers = append(answers, ta)
	}
	conflicts := sys.GetConflicts()
	for i := range answers {
		if answers[i].Accepted && conflicts[expansion.TemplateID(answers[i].Name)] {
			answers[i].Conflict = true
		}
	}
	return answers
}

// expand answers the request's templates: base is the admitted object as
// the webhook left it (mutated, else as given), in namespace ns. It is
// pkg/gator/expand/expand.go Expander.Expand after its base mutation
// (done by the webhook step): expansion.NewSystem(mutationSystem) with the
// templates upserted, then expansion.System.Expand, which mutates each
// resultant with Source Generated through the same mutation.System.
func (o *Oracle) expand(sys *mutation.System, req *Request, ans *Answer, base *unstructured.Unstructured, ns *corev1.Namespace) {
	expSys := expansion.NewSystem(sys)
	ans.Templates = upsertTemplates(expSys, req.Templates)
	mutable := &types.Mutable{
		Object:    base.DeepCopy(),
		Namespace: ns,
		Username:  req.Username,
		Source:    types.SourceTypeOriginal,
	}
	resultants, err := expSys.Expand(mutable)
	if err != nil {
		ans.ExpandError = err.Error()
		return
	}
	// Whether mutation changed a resultant: the same templates in a
	// system without mutation, expanding its (mutated) parent.
	plain := expansion.NewSystem(nil)
	_ = upsertTemplates(plain, req.Templates)
	objects := append([]*unstructured.Unstructured{mutable.Object}, resultantObjects(resultants)...)
	generated := make([]GeneratedAnswer, 0, len(resultants))
	for _, r := range resultants {
		g := GeneratedAnswer{Template: r.TemplateName, Outcome: "mutated", Object: r.Obj.Object}
		if before := unmutated(plain, objects, r, ns, req.Username); before != nil && reflect.DeepEqual(before.Object, r.Obj.Object) {
			g.Outcome = "unchanged"
		}
		generated = append(generated, g)
	}
	ans.Generated = &generated
}

func resultantObjects(rs []*expansion.Resultant) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.Obj)
	}
	return out
}

// unmutated is r as template r.TemplateName generates it from its parent
// (found among objects by r's owner references), before mutation.
func unmutated(plain *expansion.System, objects []*unstructured.Unstructured, r *expansion.Resultant, ns *corev1.Namespace, username string) *unstructured.Unstructured {
	for _, parent := range objects {
		if !ownedBy(r.Obj, parent) {
			continue
		}
		children, err := plain.Expand(&types.Mutable{Object: parent.DeepCopy(), Namespace: ns, Username: username})
		if err != nil {
			continue
		}
		for _, c := range children {
			if c.TemplateName == r.TemplateName && ownedBy(c.Obj, parent) &&
				c.Obj.GroupVersionKind() == r.Obj.GroupVersionKind() && c.Obj.GetName() == r.Obj.GetName() {
				return c.Obj
			}
		}
	}
	return nil
}

func ownedBy(child, parent *unstructured.Unstructured) bool {
	for _, ref := range child.GetOwnerReferences() {
		if ref.APIVersion == parent.GetAPIVersion() && ref.Kind == parent.GetKind() && ref.Name == parent.GetName() {
			return true
		}
	}
	return false
}
