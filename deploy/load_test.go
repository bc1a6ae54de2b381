package deploy

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// object is one Kubernetes document of a manifest file. The root mapping node is kept so that
// each check decodes just the view it needs.
type object struct {
	src        string // file relative to deploy/ and document index, e.g. kubernetes/nats.yaml#3
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   meta   `yaml:"metadata"`
	root       *yaml.Node
}

func (o *object) String() string { return fmt.Sprintf("%s (%s %s)", o.src, o.Kind, o.Metadata.Name) }

// field decodes the value of a top-level key (spec, data, resources...) into out; a missing key
// leaves out untouched.
func (o *object) field(key string, out any) error {
	for i := 0; i+1 < len(o.root.Content); i += 2 {
		if o.root.Content[i].Value == key {
			if err := o.root.Content[i+1].Decode(out); err != nil {
				return fmt.Errorf("%s: %s: %w: %w", o, key, ErrSyntax, err)
			}
			return nil
		}
	}
	return nil
}

// decodeDocs splits data into YAML documents and returns the non-empty ones as objects. Every
// document must be a mapping with apiVersion, kind and metadata.name. src names the file in
// messages. It never panics and stops at the first syntax error.
//
// Ownership: the returned objects keep references into the decoded node tree; callers must not
// mutate it. Objects are read-only after decoding.
func decodeDocs(data []byte, src string) ([]*object, error) {
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	var out []*object
	for i := 0; ; i++ {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s#%d: %w: %w", src, i, ErrSyntax, err)
		}
		if len(doc.Content) == 0 || doc.Content[0].Tag == "!!null" {
			continue // an empty document (comments only, or a bare ---)
		}
		root := doc.Content[0]
		name := fmt.Sprintf("%s#%d", src, i)
		if root.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%s: %w: document is not a mapping", name, ErrSyntax)
		}
		o := &object{src: name, root: root}
		if err := root.Decode(o); err != nil {
			return nil, fmt.Errorf("%s: %w: %w", name, ErrSyntax, err)
		}
		// kubectl rejects a document without these three; so would kustomize.
		for f, v := range map[string]string{"apiVersion": o.APIVersion, "kind": o.Kind, "metadata.name": o.Metadata.Name} {
			if strings.TrimSpace(v) == "" {
				return nil, fmt.Errorf("%s: %w: %s", name, ErrMissingField, f)
			}
		}
		out = append(out, o)
	}
}

// workload is a StatefulSet or Deployment with its spec decoded.
type workload struct {
	*object
	spec workloadSpec
}

// replicas is spec.replicas, defaulting to 1 as Kubernetes does.
func (w *workload) replicas() int {
	if w.spec.Replicas == nil {
		return 1
	}
	return *w.spec.Replicas
}

// podNames returns the names of the pods the workload creates: <name>-<ordinal> for a
// StatefulSet, and distinct stand-ins for a Deployment's generated names.
func (w *workload) podNames() []string {
	names := make([]string, w.replicas())
	for i := range names {
		if w.Kind == "StatefulSet" {
			names[i] = w.Metadata.Name + "-" + strconv.Itoa(i)
		} else {
			names[i] = fmt.Sprintf("%s-5d8f7b9c4-%05d", w.Metadata.Name, i)
		}
	}
	return names
}

// service is a Service with its spec decoded.
type service struct {
	*object
	spec serviceSpec
}

// variant is one deployable directory (one kustomization) with its objects indexed.
//
// Invariant: every object appears once in objects and, by kind, in at most one index; names are
// unique per kind and namespace (duplicates are reported and the later one wins in the maps).
// Cross-variant references are never resolved: each variant must be deployable on its own.
type variant struct {
	dir        string // relative to deploy/
	objects    []*object
	namespace  string
	workloads  []*workload
	services   []*service
	configMaps map[string]map[string]string // name → data
	pdbs       map[string]pdbSpec           // name → spec
}

// loadVariant reads every manifest of dir (relative to deployRoot): the kustomization must list
// exactly the other *.yaml files of the directory, each of which is decoded and indexed.
func loadVariant(deployRoot, dir string) (*variant, []error) {
	v := &variant{dir: dir, configMaps: map[string]map[string]string{}, pdbs: map[string]pdbSpec{}}
	var errs []error
	kdata, err := os.ReadFile(filepath.Join(deployRoot, dir, "kustomization.yaml"))
	if err != nil {
		return nil, []error{fmt.Errorf("%s: %w: %w", dir, ErrKustomization, err)}
	}
	kdocs, err := decodeDocs(kdata, dir+"/kustomization.yaml")
	if err != nil {
		return nil, []error{err}
	}
	if len(kdocs) != 1 || kdocs[0].Kind != "Kustomization" {
		return nil, []error{fmt.Errorf("%s: %w: want one Kustomization document", dir, ErrKustomization)}
	}
	var k kustomization
	if err := kdocs[0].root.Decode(&k); err != nil {
		return nil, []error{fmt.Errorf("%s: %w: %w", dir, ErrSyntax, err)}
	}
	// `kubectl apply -k` applies only what the kustomization lists: a manifest beside it that is
	// not listed would be silently skipped, and a listed file that is missing fails the apply.
	files, err := filepath.Glob(filepath.Join(deployRoot, dir, "*.yaml"))
	if err != nil {
		return nil, []error{err}
	}
	var present []string
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" {
			present = append(present, b)
		}
	}
	listed := slices.Clone(k.Resources)
	sort.Strings(listed)
	if !slices.Equal(listed, present) {
		errs = append(errs, fmt.Errorf("%s: %w: resources %v, files %v", dir, ErrKustomization, listed, present))
	}
	seen := map[string]string{}
	for _, name := range present {
		data, err := os.ReadFile(filepath.Join(deployRoot, dir, name))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		docs, err := decodeDocs(data, dir+"/"+name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, o := range docs {
			key := o.Kind + "/" + o.Metadata.Namespace + "/" + o.Metadata.Name
			if prev, dup := seen[key]; dup {
				errs = append(errs, fmt.Errorf("%s: %w: also %s", o, ErrDuplicateObject, prev))
			}
			seen[key] = o.src
			errs = append(errs, v.index(o)...)
		}
	}
	return v, errs
}

// index files o under its kind, decoding the typed view the checks need. Kinds the checks do not
// inspect (Namespace aside) are kept in objects only, for the namespace and duplicate checks.
func (v *variant) index(o *object) []error {
	v.objects = append(v.objects, o)
	switch o.Kind {
	case "Namespace":
		if v.namespace != "" {
			return []error{fmt.Errorf("%s: %w: second Namespace in %s", o, ErrNamespace, v.dir)}
		}
		v.namespace = o.Metadata.Name
	case "StatefulSet", "Deployment":
		w := &workload{object: o}
		if err := o.field("spec", &w.spec); err != nil {
			return []error{err}
		}
		v.workloads = append(v.workloads, w)
	case "Service":
		s := &service{object: o}
		if err := o.field("spec", &s.spec); err != nil {
			return []error{err}
		}
		v.services = append(v.services, s)
	case "ConfigMap":
		data := map[string]string{}
		if err := o.field("data", &data); err != nil {
			return []error{err}
		}
		v.configMaps[o.Metadata.Name] = data
	case "PodDisruptionBudget":
		var spec pdbSpec
		if err := o.field("spec", &spec); err != nil {
			return []error{err}
		}
		v.pdbs[o.Metadata.Name] = spec
	}
	return nil
}

// checkNamespaces requires one Namespace per variant and every other object inside it. Short DNS
// names (nats, kvselect-0.kvselect-peers) resolve only within the same namespace, so an object
// placed elsewhere would break every reference to it.
func (v *variant) checkNamespaces() []error {
	if v.namespace == "" {
		return []error{fmt.Errorf("%s: %w: no Namespace object", v.dir, ErrNamespace)}
	}
	var errs []error
	for _, o := range v.objects {
		if o.Kind != "Namespace" && o.Metadata.Namespace != v.namespace {
			errs = append(errs, fmt.Errorf("%s: %w: namespace %q, want %q", o, ErrNamespace, o.Metadata.Namespace, v.namespace))
		}
	}
	return errs
}
