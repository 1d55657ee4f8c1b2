package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/google/uuid"
	"github.com/open-policy-agent/gatekeeper/v3/apis"
	mutationsunversioned "github.com/open-policy-agent/gatekeeper/v3/apis/mutations/unversioned"
	mutationsv1 "github.com/open-policy-agent/gatekeeper/v3/apis/mutations/v1"
	mutationsv1alpha1 "github.com/open-policy-agent/gatekeeper/v3/apis/mutations/v1alpha1"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/match"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/mutators"
	mutationschema "github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/schema"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/types"
	"github.com/pkg/errors"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// scheme is what Gatekeeper's manager scheme holds for our purposes: its own
// API groups incl. the conversion functions v1/v1beta1/v1alpha1 <-> unversioned.
// The same scheme backs the webhook's package-level deserializer
// (pkg/webhook/common.go: runtimeScheme, codecs, deserializer).
var (
	scheme       = runtime.NewScheme()
	codecs       serializer.CodecFactory
	deserializer runtime.Decoder
)

func init() {
	if err := apis.AddToScheme(scheme); err != nil {
		panic(err)
	}
	codecs = serializer.NewCodecFactory(scheme)
	deserializer = codecs.UniversalDeserializer()
}

// kindHandler is what pkg/controller/mutators/instances/mutator_controllers.go
// registers per mutator kind: the typed object the controller reads (at the
// version the controller watches), and MutatorFor (scheme.Convert to
// unversioned + mutators.MutatorFor*).
type kindHandler struct {
	version    string
	newObj     func() client.Object
	mutatorFor func(client.Object) (types.Mutator, error)
}

var kindHandlers = map[string]kindHandler{
	"Assign": {"v1", func() client.Object { return &mutationsv1.Assign{} }, func(obj client.Object) (types.Mutator, error) {
		u := &mutationsunversioned.Assign{}
		if err := scheme.Convert(obj.(*mutationsv1.Assign), u, nil); err != nil {
			return nil, err
		}
		return mutators.MutatorForAssign(u)
	}},
	"ModifySet": {"v1", func() client.Object { return &mutationsv1.ModifySet{} }, func(obj client.Object) (types.Mutator, error) {
		u := &mutationsunversioned.ModifySet{}
		if err := scheme.Convert(obj.(*mutationsv1.ModifySet), u, nil); err != nil {
			return nil, err
		}
		return mutators.MutatorForModifySet(u)
	}},
	"AssignImage": {"v1alpha1", func() client.Object { return &mutationsv1alpha1.AssignImage{} }, func(obj client.Object) (types.Mutator, error) {
		u := &mutationsunversioned.AssignImage{}
		if err := scheme.Convert(obj.(*mutationsv1alpha1.AssignImage), u, nil); err != nil {
			return nil, err
		}
		return mutators.MutatorForAssignImage(u)
	}},
	// pkg/controller/mutators/instances registers AssignMetadata the same way
	// (typed mutationsv1.AssignMetadata, converted to unversioned).
	"AssignMetadata": {"v1", func() client.Object { return &mutationsv1.AssignMetadata{} }, func(obj client.Object) (types.Mutator, error) {
		u := &mutationsunversioned.AssignMetadata{}
		if err := scheme.Convert(obj.(*mutationsv1.AssignMetadata), u, nil); err != nil {
			return nil, err
		}
		return mutators.MutatorForAssignMetadata(u)
	}},
}

// Request is one input line.
type Request struct {
	ID        json.RawMessage   `json:"id"`
	Mutators  []json.RawMessage `json:"mutators"`
	Object    json.RawMessage   `json:"object"`
	Namespace json.RawMessage   `json:"namespace"`
	Operation string            `json:"operation"`
	Username  string            `json:"username"`
	// Templates: ExpansionTemplate objects; when present, the admitted
	// object is expanded after admission (expansion.go).
	Templates []json.RawMessage `json:"templates"`
}

// MutatorAnswer is the fate of one input mutator.
type MutatorAnswer struct {
	Name     string                 `json:"name"`
	Kind     string                 `json:"kind"`
	Accepted bool                   `json:"accepted"`
	Stage    string                 `json:"stage,omitempty"`
	Error    string                 `json:"error,omitempty"`
	Pruned   []string               `json:"pruned,omitempty"`
	Stored   map[string]interface{} `json:"stored,omitempty"`
}

// Answer is one output line.
type Answer struct {
	ID        json.RawMessage        `json:"id"`
	Fatal     string                 `json:"fatal,omitempty"`
	Mutators  []MutatorAnswer        `json:"mutators"`
	Conflicts []string               `json:"conflicts"`
	Outcome   string                 `json:"outcome,omitempty"`
	Object    map[string]interface{} `json:"object,omitempty"`
	Error     string                 `json:"error,omitempty"`
	Skipped   string                 `json:"skipped,omitempty"`
	// Only when the request has templates (expansion.go).
	Templates   []TemplateAnswer   `json:"templates,omitempty"`
	Generated   *[]GeneratedAnswer `json:"generated,omitempty"`
	ExpandError string             `json:"expandError,omitempty"`
}

// FatalAnswer is the answer to a malformed request.
type FatalAnswer struct {
	ID    json.RawMessage `json:"id"`
	Fatal string          `json:"fatal"`
}

// Oracle holds what is shared between requests (the parsed CRDs).
type Oracle struct {
	crds *crdSet

	// compiled caches the CRD step + decode + compile per distinct mutator
	// JSON (all three are pure functions of those bytes). Cached values are
	// only read afterwards: System.Upsert stores a DeepCopy of the mutator,
	// and "stored" objects are only marshalled.
	mu       sync.Mutex
	compiled map[string]*compiled
}

type compiled struct {
	m      types.Mutator
	stored *unstructured.Unstructured
	pruned []string
	err    *stepError
}

// maxCompiled bounds the cache; it is emptied when full.
const maxCompiled = 20000

func (o *Oracle) compileCached(raw json.RawMessage) *compiled {
	key := string(raw)
	o.mu.Lock()
	c, ok := o.compiled[key]
	o.mu.Unlock()
	if ok {
		return c
	}
	m, stored, pruned, serr := o.compile(raw)
	c = &compiled{m: m, stored: stored, pruned: pruned, err: serr}
	o.mu.Lock()
	if len(o.compiled) >= maxCompiled {
		o.compiled = map[string]*compiled{}
	}
	o.compiled[key] = c
	o.mu.Unlock()
	return c
}

func NewOracle(crdDir string) (*Oracle, error) {
	crds, err := loadCRDs(crdDir)
	if err != nil {
		return nil, err
	}
	return &Oracle{crds: crds, compiled: map[string]*compiled{}}, nil
}

// fixedUUID replaces uuid.New as the System's NewUUID so the mutation id that
// appears in "mutation <uuid> for mutator ... failed" errors is deterministic.
func fixedUUID() uuid.UUID { return uuid.Nil }

// gkServiceAccount is pkg/webhook/common.go's serviceaccount with
// util.GetNamespace()'s default namespace (POD_NAMESPACE unset).
const gkServiceAccount = "system:serviceaccount:gatekeeper-system:gatekeeper-admin"

// Answer runs one request.
func (o *Oracle) Answer(req *Request) *Answer {
	ans := &Answer{ID: req.ID, Mutators: []MutatorAnswer{}, Conflicts: []string{}}

	// Mutation system as main.go builds it (mutation.SystemOpts{Reporter: mutation.NewStatsReporter()};
	// external data disabled: no ProviderCache).
	sys := mutation.NewSystem(mutation.SystemOpts{Reporter: mutation.NewStatsReporter(), NewUUID: fixedUUID})
	skipped := mutationschema.New()

	type accepted struct {
		idx int
		id  types.ID
	}
	var acc []accepted
	for i, raw := range req.Mutators {
		ma := MutatorAnswer{}
		var head struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		_ = json.Unmarshal(raw, &head)
		ma.Name, ma.Kind = head.Metadata.Name, head.Kind
		c := o.compileCached(raw)
		m, stored, pruned, serr := c.m, c.stored, c.pruned, c.err
		if stored != nil {
			ma.Stored = stored.Object
		}
		ma.Pruned = pruned
		if serr != nil {
			ma.Stage, ma.Error = serr.stage, serr.msg
			ans.Mutators = append(ans.Mutators, ma)
			continue
		}
		// Controller: system.Upsert. A schema conflict keeps the mutator
		// registered (System.Upsert stores it before returning
		// ErrConflictingSchema); Mutate skips it while it has conflicts.
		if err := sys.Upsert(m); err != nil && !errors.As(err, &mutationschema.ErrConflictingSchema{}) {
			ma.Stage, ma.Error = "upsert", err.Error()
			ans.Mutators = append(ans.Mutators, ma)
			continue
		}
		// The same mutator in a schema DB of our own: System keeps its DB
		// private and its GetConflicts names whoever conflicts along a
		// mutator's path, not whether Mutate skips it (DB.HasConflicts).
		if ws, ok := m.DeepCopy().(mutationschema.MutatorWithSchema); ok {
			_ = skipped.Upsert(ws)
		}
		ma.Accepted = true
		acc = append(acc, accepted{i, m.ID()})
		ans.Mutators = append(ans.Mutators, ma)
	}
	seen := map[string]bool{}
	for _, a := range acc {
		if skipped.HasConflicts(a.id) && !seen[ans.Mutators[a.idx].Name+"\x00"+ans.Mutators[a.idx].Kind] {
			seen[ans.Mutators[a.idx].Name+"\x00"+ans.Mutators[a.idx].Kind] = true
			ans.Conflicts = append(ans.Conflicts, ans.Mutators[a.idx].Name)
		}
	}

	base, ns := o.webhook(sys, req, ans)
	if len(req.Templates) > 0 && ans.Fatal == "" && base != nil {
		o.expand(sys, req, ans, base, ns)
	}
	return ans
}

// compile: CRD step, then the controller's read + MutatorFor.
func (o *Oracle) compile(raw json.RawMessage) (types.Mutator, *unstructured.Unstructured, []string, *stepError) {
	var kindOnly struct {
		Kind string `json:"kind"`
	}
	_ = json.Unmarshal(raw, &kindOnly)
	h, known := kindHandlers[kindOnly.Kind]
	stored, read, pruned, serr := o.crds.admitMutator(raw, func(k *crdKind) string {
		if known {
			return h.version
		}
		return k.storage
	})
	if serr != nil {
		return nil, stored, pruned, serr
	}
	// The controller's client decodes the API server's JSON into the typed object.
	data, err := read.MarshalJSON()
	if err != nil {
		return nil, stored, pruned, refuse("decode", "%s", err.Error())
	}
	obj := h.newObj()
	if _, _, err := deserializer.Decode(data, nil, obj); err != nil {
		return nil, stored, pruned, refuse("decode", "%s", err.Error())
	}
	m, err := h.mutatorFor(obj)
	if err != nil {
		return nil, stored, pruned, refuse("compile", "%s", err.Error())
	}
	return m, stored, pruned, nil
}

// webhook reproduces pkg/webhook/mutation.go (mutationHandler.Handle and
// mutateRequest) for the request. It returns what expansion starts from:
// the object as admitted (mutated, else as given; nil after an error) with
// the request namespace set, as pkg/webhook/policy.go sets it, and its
// Namespace.
func (o *Oracle) webhook(sys *mutation.System, req *Request, ans *Answer) (*unstructured.Unstructured, *corev1.Namespace) {
	raw := []byte(req.Object)
	// AdmissionRequest.Kind as the API server sets it: the object's group/version/kind.
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(raw, &tm)
	gv, _ := schema.ParseGroupVersion(tm.APIVersion)
	op := admissionv1.Operation(req.Operation)

	// Handle: isGkServiceAccount, IsSupportedMutationOperation,
	// isGatekeeperResource; skipExcludedNamespace — nothing excluded here.
	skipped := ""
	switch {
	case req.Username == gkServiceAccount:
		skipped = "Gatekeeper does not self-manage"
	case !match.IsSupportedMutationOperation(op):
		skipped = "Mutating only on create or update"
	case isGatekeeperResource(gv.Group):
		skipped = "Not mutating gatekeeper resources"
	}

	reqNamespace, ns, nsErr, fatal := admissionNamespace(raw, req, tm.Kind, gv.Group, tm.Metadata.Namespace)
	if fatal != "" {
		ans.Fatal = fatal
		return nil, nil
	}
	obj := unstructured.Unstructured{}
	if skipped != "" {
		ans.Outcome, ans.Skipped = "skipped", skipped
		// Expansion starts from the object as given (policy.go expands
		// whatever the validating webhook is sent).
		if nsErr != "" || obj.UnmarshalJSON(raw) != nil {
			return nil, nil
		}
		obj.SetNamespace(reqNamespace)
		return &obj, ns
	}
	if nsErr != "" {
		ans.Outcome, ans.Error = "error", nsErr
		return nil, nil
	}

	ctx := context.Background()
	if err := obj.UnmarshalJSON(raw); err != nil {
		ans.Outcome, ans.Error = "error", err.Error()
		return nil, nil
	}
	oldNS := obj.GetNamespace()
	obj.SetNamespace(reqNamespace)

	mutable := &types.Mutable{
		Object:    &obj,
		Namespace: ns,
		Username:  req.Username,
		Source:    types.SourceTypeOriginal,
		Operation: op,
	}
	mutated, err := sys.Mutate(ctx, mutable)
	if err != nil {
		ans.Outcome, ans.Error = "error", err.Error()
		return nil, nil
	}
	if !mutated {
		ans.Outcome = "unchanged"
		return unchangedBase(raw, reqNamespace), ns
	}
	mutable.Object.SetNamespace(oldNS)
	newJSON, err := mutable.Object.MarshalJSON()
	if err != nil {
		ans.Outcome, ans.Error = "error", err.Error()
		return nil, nil
	}
	resp := admission.PatchResponseFromRaw(raw, newJSON)
	if resp.Result != nil && resp.Result.Code == http.StatusInternalServerError {
		ans.Outcome, ans.Error = "error", resp.Result.Message
		return nil, nil
	}
	if len(resp.Patches) == 0 {
		ans.Outcome = "unchanged"
		return unchangedBase(raw, reqNamespace), ns
	}
	// The API server applies the JSON patch to the object it sent
	// (k8s.io/apiserver .../webhook/mutating/dispatcher.go uses
	// gopkg.in/evanphx/json-patch.v4).
	patchJSON, err := json.Marshal(resp.Patches)
	if err != nil {
		ans.Outcome, ans.Error = "error", err.Error()
		return nil, nil
	}
	patch, err := jsonpatch.DecodePatch(patchJSON)
	if err != nil {
		ans.Outcome, ans.Error = "error", err.Error()
		return nil, nil
	}
	patched, err := patch.Apply(raw)
	if err != nil {
		ans.Outcome, ans.Error = "error", fmt.Sprintf("apply patch: %v", err)
		return nil, nil
	}
	out := unstructured.Unstructured{}
	if err := out.UnmarshalJSON(patched); err != nil {
		ans.Outcome, ans.Error = "error", err.Error()
		return nil, nil
	}
	ans.Outcome, ans.Object = "mutated", out.Object
	base := out.DeepCopy()
	base.SetNamespace(reqNamespace)
	return base, ns
}

// unchangedBase is the object as given, in the request namespace.
func unchangedBase(raw []byte, reqNamespace string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw); err != nil {
		return nil
	}
	obj.SetNamespace(reqNamespace)
	return obj
}

// admissionNamespace is AdmissionRequest.Namespace and the Namespace
// mutateRequest gets for it: the object's namespace (the API server fills
// an empty metadata.namespace from the URL before admission), or, if the
// object has none but a Namespace object was given, its name. nsErr is an
// admission error (the Namespace is not found or does not decode); fatal a
// malformed request.
func admissionNamespace(raw []byte, req *Request, kind, group, objectNamespace string) (reqNamespace string, ns *corev1.Namespace, nsErr, fatal string) {
	reqNamespace = objectNamespace
	var given *corev1.Namespace
	if len(req.Namespace) > 0 && string(req.Namespace) != "null" {
		// Stands for the cluster's Namespace (client.Get), so plain JSON
		// decoding; apiVersion/kind are not required.
		given = &corev1.Namespace{}
		if err := json.Unmarshal(req.Namespace, given); err != nil {
			return "", nil, "", fmt.Sprintf("malformed request: namespace: %v", err)
		}
		if reqNamespace == "" {
			reqNamespace = given.Name
		}
	}
	switch {
	case kind == "Namespace" && group == "":
		obj, _, err := deserializer.Decode(raw, nil, &corev1.Namespace{})
		if err != nil {
			return "", nil, err.Error(), ""
		}
		ns, ok := obj.(*corev1.Namespace)
		if !ok {
			return "", nil, "failed to cast namespace object", ""
		}
		return "", ns, "", ""
	case reqNamespace != "":
		// h.client.Get / h.reader.Get of the Namespace: the given object, or NotFound.
		if given == nil {
			return reqNamespace, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, reqNamespace).Error(), ""
		}
		return reqNamespace, given, "", ""
	default:
		return reqNamespace, nil, "", ""
	}
}

// isGatekeeperResource is pkg/webhook/common.go's webhookHandler.isGatekeeperResource.
func isGatekeeperResource(group string) bool {
	switch group {
	case "templates.gatekeeper.sh",
		"constraints.gatekeeper.sh",
		"mutations.gatekeeper.sh",
		"config.gatekeeper.sh",
		"externaldata.gatekeeper.sh",
		"expansion.gatekeeper.sh",
		"status.gatekeeper.sh":
		return true
	}
	return false
}
