package deploy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kvselect/kvselect/http/aibrix"
)

// checker runs every deployment check against one repository tree (the real one, or a copy broken
// on purpose by the mutation tests). Findings accumulate; none stops the others, so one run
// reports everything that is wrong.
//
// Not safe for concurrent use; setenv mutates the process environment (nats-server's config
// parser resolves $VARIABLES from it), so checks must not run in parallel with each other.
type checker struct {
	root   string // repository root; deployment files are under root/deploy
	src    *sources
	setenv func(key, value string)

	dockerUID int64                // USER of the Dockerfile's final stage, -1 when unknown
	policies  []*aibrix.Policy     // policies mounted into kvselect containers
	natsPorts map[*workload]int    // client port of each NATS server workload
	kvHTTP    map[*workload]int    // --port of each kvselect workload
	kvAIBrix  map[*workload]string // --aibrix-path of each kvselect workload
	errs      []error
}

// checkTree runs all checks on the tree at root and returns every finding joined (nil when the
// tree is consistent).
func checkTree(root string, setenv func(key, value string)) error {
	src, err := readSources(root)
	if err != nil {
		return err
	}
	c := &checker{root: root, src: src, setenv: setenv, dockerUID: -1,
		natsPorts: map[*workload]int{}, kvHTTP: map[*workload]int{}, kvAIBrix: map[*workload]string{}}
	// Order matters: the Dockerfile's USER feeds the pod security check, NATS client ports feed
	// the --nats-url check, and the kvselect ports and policies feed the examples check.
	c.checkDockerfile()
	dirs, err := variantDirs(filepath.Join(root, "deploy"))
	if err != nil {
		return err
	}
	var main *variant
	for _, dir := range dirs {
		v, errs := loadVariant(filepath.Join(root, "deploy"), dir)
		c.add(errs...)
		if v == nil {
			continue
		}
		c.add(v.checkNamespaces()...)
		c.add(v.checkServices()...)
		c.checkPods(v)
		c.checkNATS(v)
		c.checkKVSelect(v)
		if dir == "kubernetes" {
			main = v
		}
	}
	if main == nil {
		c.add(fmt.Errorf("deploy/kubernetes: %w: no kustomization", ErrKustomization))
	} else {
		c.checkExamples(main)
	}
	return errors.Join(c.errs...)
}

// add records findings, skipping nils so call sites can pass results straight through.
func (c *checker) add(errs ...error) {
	for _, err := range errs {
		if err != nil {
			c.errs = append(c.errs, err)
		}
	}
}

// variantDirs returns, relative to deployRoot, every directory under kubernetes/ that holds a
// kustomization.yaml.
func variantDirs(deployRoot string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(filepath.Join(deployRoot, "kubernetes"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() == "kustomization.yaml" {
			rel, err := filepath.Rel(deployRoot, filepath.Dir(p))
			if err != nil {
				return err
			}
			dirs = append(dirs, filepath.ToSlash(rel))
		}
		return nil
	})
	slices.Sort(dirs)
	return dirs, err
}

// imageRepo returns the last path element of an image reference without tag or digest:
// "gcr.io/x/kvselect:latest" → "kvselect".
func imageRepo(image string) string {
	image, _, _ = strings.Cut(image, "@")
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return image[strings.LastIndex(image, "/")+1:]
}

// imageTag returns the tag of an image reference ("" when it has none).
func imageTag(image string) string {
	image, _, _ = strings.Cut(image, "@")
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[i+1:]
	}
	return ""
}

// fileContent finds the file at path inside container c of pod spec ps: it must lie under a
// volume mount whose volume exists. For a ConfigMap volume the ConfigMap must exist in v with the
// key, and its content is returned with known=true; a Secret is assumed to be provided out of band
// (known=false). Any other volume kind cannot hold a shipped file.
func (v *variant) fileContent(ps *podSpec, c *container, path string) (content string, known bool, err error) {
	// Mount semantics: with subPath, the mount path is the file itself and subPath the key; without,
	// the mount path is a directory holding one file per key (or per items[].path).
	for _, m := range c.VolumeMounts {
		var rel string
		switch {
		case m.SubPath != "" && path == m.MountPath:
			rel = m.SubPath
		case m.SubPath == "" && strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/"):
			rel = strings.TrimPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/")
		default:
			continue
		}
		i := slices.IndexFunc(ps.Volumes, func(vol volume) bool { return vol.Name == m.Name })
		if i < 0 {
			return "", false, fmt.Errorf("%w: %s: mount %s names no volume", ErrMount, path, m.Name)
		}
		vol := ps.Volumes[i]
		switch {
		case vol.ConfigMap != nil:
			data, ok := v.configMaps[vol.ConfigMap.Name]
			if !ok {
				return "", false, fmt.Errorf("%w: %s: ConfigMap %s is not in %s", ErrMount, path, vol.ConfigMap.Name, v.dir)
			}
			key := rel
			if len(vol.ConfigMap.Items) > 0 {
				key = ""
				for _, it := range vol.ConfigMap.Items {
					if it.Path == rel {
						key = it.Key
					}
				}
			}
			content, ok := data[key]
			if !ok || key == "" {
				return "", false, fmt.Errorf("%w: %s: ConfigMap %s has no key for %q", ErrMount, path, vol.ConfigMap.Name, rel)
			}
			return content, true, nil
		case vol.Secret != nil:
			return "", false, nil
		default:
			return "", false, fmt.Errorf("%w: %s: volume %s holds no shipped file", ErrMount, path, vol.Name)
		}
	}
	return "", false, fmt.Errorf("%w: %s is under no volume mount of container %s", ErrMount, path, c.Name)
}

// readDeployFile reads a file under root/deploy.
func (c *checker) readDeployFile(rel string) ([]byte, error) {
	return os.ReadFile(filepath.Join(c.root, "deploy", rel))
}
