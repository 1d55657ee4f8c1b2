package main

// The CRD step: what the Kubernetes API server does to a mutator object
// written to it (POST, i.e. CREATE), using Gatekeeper's own CRDs and the
// k8s.io/apiextensions-apiserver packages at the version Gatekeeper v3.23.1
// pins (v0.36.2). Mirrors, in this order:
//
//   - the request decoder: schemaCoercingDecoder + unstructuredSchemaCoercer.apply
//     (apiextensions-apiserver pkg/apiserver/customresource_handler.go):
//     ObjectMeta extraction/coercion, pruning of unknown fields,
//     PruneNonNullableNullsWithoutDefaults, embedded-ObjectMeta coercion;
//   - the versioning codec's defaulter (unstructuredDefaulter → structuraldefaulting.Default);
//   - rest.BeforeCreate: namespace cleared (the CRDs are cluster scoped),
//     customResourceStrategy.PrepareForCreate (status dropped: every version has
//     the status subresource; generation = 1), generateName;
//   - customResourceStrategy.Validate (type meta, ObjectMeta with
//     NameIsDNSSubdomain, OpenAPI schema, embedded ObjectMeta, list types,
//     CEL x-kubernetes-validations when a schema has them — Gatekeeper's do not)
//     and then the generic ValidateObjectMetaAccessor with ValidatePathSegmentName.
//
// Validation errors are reported with apierrors.NewInvalid(...).Error(), i.e.
// exactly the message the API server returns for a 422:
//   Assign.mutations.gatekeeper.sh "name" is invalid: <field errors>
// (one error: bare; several: "[e1, e2]").
//
// Left out: uid, creationTimestamp, resourceVersion, managedFields (not
// deterministic / not schema driven), the request's fieldValidation mode (we
// behave like fieldValidation=Warn/Ignore: unknown fields are pruned and
// reported in "pruned"; kubectl's default Strict would refuse them instead),
// and update semantics (every mutator is created).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// crdFiles are the Gatekeeper CRDs the oracle needs, as shipped in the Helm
// chart (charts/gatekeeper/crds, which is the kustomize output of config/crd
// incl. the metadata.name maxLength 63 patch).
var crdFiles = []string{
	"assign-customresourcedefinition.yaml",
	"assignmetadata-customresourcedefinition.yaml",
	"modifyset-customresourcedefinition.yaml",
	"assignimage-customresourcedefinition.yaml",
}

type crdVersion struct {
	name       string
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
	cel        *cel.Validator
	hasStatus  bool
}

type crdKind struct {
	group, kind string
	namespaced  bool
	storage     string
	versions    map[string]*crdVersion // served versions only
	order       []string               // served versions in CRD order
}

type crdSet struct {
	byGK map[schema.GroupKind]*crdKind
}

func loadCRDs(dir string) (*crdSet, error) {
	set := &crdSet{byGK: map[schema.GroupKind]*crdKind{}}
	for _, f := range crdFiles {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
		k := &crdKind{
			group:      crd.Spec.Group,
			kind:       crd.Spec.Names.Kind,
			namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
			versions:   map[string]*crdVersion{},
		}
		for i := range crd.Spec.Versions {
			v := &crd.Spec.Versions[i]
			if v.Storage {
				k.storage = v.Name
			}
			if !v.Served {
				continue
			}
			internal := &apiextensionsinternal.CustomResourceValidation{}
			if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v.Schema, internal, nil); err != nil {
				return nil, fmt.Errorf("%s %s: %w", f, v.Name, err)
			}
			ss, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
			if err != nil {
				return nil, fmt.Errorf("%s %s: structural: %w", f, v.Name, err)
			}
			ss = ss.DeepCopy()
			if err := structuraldefaulting.PruneDefaults(ss); err != nil {
				return nil, fmt.Errorf("%s %s: prune defaults: %w", f, v.Name, err)
			}
			validator, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
			if err != nil {
				return nil, fmt.Errorf("%s %s: validator: %w", f, v.Name, err)
			}
			// nil when the schema has no x-kubernetes-validations (Gatekeeper's have none).
			celValidator := cel.NewValidator(ss, true, celconfig.PerCallLimit)
			k.versions[v.Name] = &crdVersion{
				name:       v.Name,
				structural: ss,
				validator:  validator,
				cel:        celValidator,
				hasStatus:  v.Subresources != nil && v.Subresources.Status != nil,
			}
			k.order = append(k.order, v.Name)
		}
		set.byGK[schema.GroupKind{Group: k.group, Kind: k.kind}] = k
	}
	return set, nil
}

// stepError is a refusal with the stage it happened at.
type stepError struct {
	stage string
	msg   string
}

func (e *stepError) Error() string { return e.msg }

func refuse(stage string, format string, args ...any) *stepError {
	return &stepError{stage: stage, msg: fmt.Sprintf(format, args...)}
}

// coerce is unstructuredSchemaCoercer.apply for a known group/kind.
func coerce(u *unstructured.Unstructured, v *crdVersion, dropInvalidMetadata bool) ([]string, error) {
	var unknown []string
	kind, foundKind, err := unstructured.NestedString(u.Object, "kind")
	if err != nil {
		return nil, err
	}
	apiVersion, foundAPIVersion, err := unstructured.NestedString(u.Object, "apiVersion")
	if err != nil {
		return nil, err
	}
	objectMeta, foundObjectMeta, metaUnknown, err := schemaobjectmeta.GetObjectMetaWithOptions(u.Object, schemaobjectmeta.ObjectMetaOptions{
		DropMalformedFields:     dropInvalidMetadata,
		ReturnUnknownFieldPaths: true,
	})
	if err != nil {
		return nil, err
	}
	unknown = append(unknown, metaUnknown...)
	unknown = append(unknown, structuralpruning.PruneWithOptions(u.Object, v.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u.Object, v.structural)
	ferr, paths := schemaobjectmeta.CoerceWithOptions(nil, u.Object, v.structural, false, schemaobjectmeta.CoerceOptions{
		DropInvalidFields:       dropInvalidMetadata,
		ReturnUnknownFieldPaths: true,
	})
	if ferr != nil {
		return nil, ferr
	}
	unknown = append(unknown, paths...)
	if foundKind {
		u.SetKind(kind)
	}
	if foundAPIVersion {
		u.SetAPIVersion(apiVersion)
	}
	if foundObjectMeta {
		if err := schemaobjectmeta.SetObjectMeta(u.Object, objectMeta); err != nil {
			return nil, err
		}
	}
	return unknown, nil
}

// admitMutator runs the API server's create path for one mutator object.
// It returns the object as stored (in the request's version), the pruned
// field paths, the CRD kind and the object converted to version toVersion
// as a client reading it at that version gets it.
func (c *crdSet) admitMutator(raw json.RawMessage, toVersion func(*crdKind) string) (stored, read *unstructured.Unstructured, pruned []string, err *stepError) {
	u := &unstructured.Unstructured{}
	if e := u.UnmarshalJSON(raw); e != nil {
		return nil, nil, nil, refuse("crd", "%s", e.Error())
	}
	gvk := u.GroupVersionKind()
	k := c.byGK[gvk.GroupKind()]
	var v *crdVersion
	if k != nil {
		v = k.versions[gvk.Version]
	}
	if v == nil {
		// What kubectl's RESTMapper reports (meta.NoKindMatchError).
		return nil, nil, nil, refuse("crd", "%s", (&meta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}).Error())
	}
	gk := schema.GroupKind{Group: k.group, Kind: k.kind}

	// request decoding: coercion + pruning, then defaulting
	unknown, e := coerce(u, v, false)
	if e != nil {
		return nil, nil, nil, refuse("crd", "%s", apierrors.NewBadRequest(e.Error()).Error())
	}
	structuraldefaulting.Default(u.Object, v.structural)

	// rest.BeforeCreate
	if !k.namespaced && u.GetNamespace() != "" {
		u.SetNamespace("")
	}
	if v.hasStatus {
		delete(u.Object, "status")
	}
	u.SetGeneration(1)
	if u.GetGenerateName() != "" && u.GetName() == "" {
		// The API server appends 5 random characters; we use a fixed suffix
		// from its alphabet so answers are deterministic.
		u.SetName(u.GetGenerateName() + "bbbbb")
	}

	// customResourceStrategy.Validate
	var errs field.ErrorList
	errs = append(errs, validateTypeMeta(u, gk, gvk.Version)...)
	if len(errs) == 0 {
		errs = append(errs, validation.ValidateObjectMetaAccessor(u, k.namespaced, validation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
		errs = append(errs, apiservervalidation.ValidateCustomResource(nil, u.UnstructuredContent(), v.validator)...)
	}
	errs = append(errs, schemaobjectmeta.Validate(nil, u.Object, v.structural, false)...)
	errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, v.structural, u.Object)...)
	if v.cel != nil {
		// hasBlockingErr (apiextensions-apiserver pkg/registry/customresource/strategy.go)
		blocking := false
		for _, fe := range errs {
			switch fe.Type {
			case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
				blocking = true
			}
		}
		if blocking {
			errs = append(errs, field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"))
		} else {
			celErrs, _ := v.cel.Validate(context.Background(), nil, v.structural, u.Object, nil, celconfig.RuntimeCELCostBudget)
			errs = append(errs, celErrs...)
		}
	}
	if len(errs) > 0 {
		return nil, nil, nil, refuse("crd", "%s", apierrors.NewInvalid(gk, u.GetName(), errs).Error())
	}
	if errs := validation.ValidateObjectMetaAccessor(u, k.namespaced, path.ValidatePathSegmentName, field.NewPath("metadata")); len(errs) > 0 {
		return nil, nil, nil, refuse("crd", "%s", apierrors.NewInvalid(gk, u.GetName(), errs).Error())
	}
	stored = u.DeepCopy()

	// Storage round trip and read at the client's version. The CRDs have no
	// conversion webhook (strategy None): conversion only rewrites apiVersion;
	// each decode re-applies coercion/pruning and defaulting of that version's schema.
	read = u.DeepCopy()
	for _, ver := range []string{k.storage, toVersion(k)} {
		if ver == read.GroupVersionKind().Version {
			// Same schema as the object already went through: coercion,
			// pruning and defaulting are idempotent, skip the work.
			continue
		}
		tv := k.versions[ver]
		if tv == nil {
			return nil, nil, nil, refuse("crd", "version %q of %s is not served", ver, gk)
		}
		read.SetAPIVersion(schema.GroupVersion{Group: k.group, Version: ver}.String())
		if _, e := coerce(read, tv, true); e != nil {
			return nil, nil, nil, refuse("crd", "%s", e.Error())
		}
		structuraldefaulting.Default(read.Object, tv.structural)
	}

	sort.Strings(unknown)
	return stored, read, unknown, nil
}

// validateTypeMeta is customResourceValidator.ValidateTypeMeta.
func validateTypeMeta(u *unstructured.Unstructured, gk schema.GroupKind, version string) field.ErrorList {
	var errs field.ErrorList
	if u.GetKind() != gk.Kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), u.GetKind(), fmt.Sprintf("must be %v", gk.Kind)))
	}
	if want := gk.Group + "/" + version; u.GetAPIVersion() != want {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), u.GetAPIVersion(), fmt.Sprintf("must be %v", want)))
	}
	return errs
}

// crdDirFor finds the directory holding crdFiles: explicit, else next to the
// executable in crds/.
func crdDirFor(explicit string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	if env := os.Getenv("SARTOR_GATEKEEPER_CRDS"); env != "" {
		return env, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	exe, _ = filepath.EvalSymlinks(exe)
	dir := filepath.Join(filepath.Dir(exe), "crds")
	if _, err := os.Stat(filepath.Join(dir, crdFiles[0])); err != nil {
		return "", fmt.Errorf("Gatekeeper CRDs not found in %s (pass -crds DIR or set SARTOR_GATEKEEPER_CRDS): %w", dir, err)
	}
	return dir, nil
}
