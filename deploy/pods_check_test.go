package deploy

import (
	"fmt"
	"math/big"
	"strconv"
)

// Checks every workload of a variant shares, whatever it runs: resources, security context,
// volumes, probe ports, and a PodDisruptionBudget for replicated workloads.

// goRuntimeEnv are variables the Go runtime of every binary reads.
var goRuntimeEnv = map[string]bool{"GOMEMLIMIT": true, "GOMAXPROCS": true, "GOGC": true, "GODEBUG": true, "GOTRACEBACK": true}

// checkPods runs the workload-independent checks on every container of every workload of v.
func (c *checker) checkPods(v *variant) {
	for _, w := range v.workloads {
		ps := &w.spec.Template.Spec
		for i := range ps.Containers {
			ct := &ps.Containers[i]
			where := fmt.Sprintf("%s container %s", w, ct.Name)
			c.add(checkResources(where, ct)...)
			c.add(checkSecurity(where, ps, ct, imageRepo(ct.Image) == "kvselect", c.dockerUID)...)
			// A mount naming no volume is rejected by the API server at apply time.
			for _, m := range ct.VolumeMounts {
				found := false
				for _, vol := range ps.Volumes {
					found = found || vol.Name == m.Name
				}
				if !found {
					c.add(fmt.Errorf("%s: %w: mount %s names no volume", where, ErrMount, m.Name))
				}
			}
			// A probe on an undeclared port name is rejected; on an undeclared number it silently
			// probes nothing and the pod never becomes ready.
			for _, p := range []*probe{ct.ReadinessProbe, ct.LivenessProbe, ct.StartupProbe} {
				if p != nil && p.HTTPGet != nil && resolvePort(ps.Containers, p.HTTPGet.Port) == 0 {
					c.add(fmt.Errorf("%s: %w: probe port %s is not a container port", where, ErrPort, p.HTTPGet.Port))
				}
			}
		}
		for _, vol := range ps.Volumes {
			if vol.ConfigMap != nil {
				if _, ok := v.configMaps[vol.ConfigMap.Name]; !ok {
					c.add(fmt.Errorf("%s: %w: volume %s names ConfigMap %s, not in %s", w, ErrMount, vol.Name, vol.ConfigMap.Name, v.dir))
				}
			}
		}
		c.add(v.checkPDB(w)...)
	}
}

// checkResources requires CPU and memory requests and a memory limit, requests not above limits,
// and GOMEMLIMIT (when set) below the memory limit so the collector acts before the OOM killer.
func checkResources(where string, ct *container) []error {
	var errs []error
	req, lim := ct.Resources.Requests, ct.Resources.Limits
	// Without requests the scheduler may pack the selector onto a saturated node; without a
	// memory limit a leak takes the node down instead of the pod.
	for _, need := range []struct {
		m       map[string]string
		k, what string
	}{
		{req, "cpu", "requests.cpu"}, {req, "memory", "requests.memory"}, {lim, "memory", "limits.memory"},
	} {
		if need.m[need.k] == "" {
			errs = append(errs, fmt.Errorf("%s: %w: no %s", where, ErrResources, need.what))
		}
	}
	for k, rv := range req {
		r, err := parseQuantity(rv)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: requests.%s: %w", where, k, err))
			continue
		}
		if lv, ok := lim[k]; ok {
			l, err := parseQuantity(lv)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: limits.%s: %w", where, k, err))
			} else if r.Cmp(l) > 0 {
				errs = append(errs, fmt.Errorf("%s: %w: requests.%s %s above limit %s", where, ErrResources, k, rv, lv))
			}
		}
	}
	for _, e := range ct.Env {
		if e.Name != "GOMEMLIMIT" || e.ValueFrom != nil || e.Value == "off" {
			continue
		}
		gml, err := parseGoMemLimit(e.Value)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		l, err := parseQuantity(lim["memory"])
		if err != nil || gml.Cmp(l) >= 0 {
			errs = append(errs, fmt.Errorf("%s: %w: GOMEMLIMIT %s not below limits.memory %q", where, ErrResources, e.Value, lim["memory"]))
		}
	}
	return errs
}

// checkSecurity requires a non-root user (pod or container level) and no privilege escalation.
// For the kvselect image, the effective runAsUser must be the Dockerfile's USER, so the pod runs
// as the user the image was built for.
func checkSecurity(where string, ps *podSpec, ct *container, kvselect bool, dockerUID int64) []error {
	var errs []error
	nonRoot, uid := false, int64(-1)
	if s := ps.SecurityContext; s != nil {
		nonRoot = s.RunAsNonRoot != nil && *s.RunAsNonRoot
		if s.RunAsUser != nil {
			uid = *s.RunAsUser
		}
	}
	if s := ct.SecurityContext; s != nil {
		if s.RunAsNonRoot != nil {
			nonRoot = *s.RunAsNonRoot
		}
		if s.RunAsUser != nil {
			uid = *s.RunAsUser
		}
	}
	if !nonRoot || uid == 0 {
		errs = append(errs, fmt.Errorf("%s: %w: runAsNonRoot must be true with a non-zero user", where, ErrSecurity))
	}
	if s := ct.SecurityContext; s == nil || s.AllowPrivilegeEscalation == nil || *s.AllowPrivilegeEscalation ||
		(s.Privileged != nil && *s.Privileged) {
		errs = append(errs, fmt.Errorf("%s: %w: allowPrivilegeEscalation must be false", where, ErrSecurity))
	}
	if kvselect && dockerUID >= 0 && uid != dockerUID {
		errs = append(errs, fmt.Errorf("%s: %w: runAsUser %d, the image's USER is %d", where, ErrSecurity, uid, dockerUID))
	}
	return errs
}

// checkPDB requires a replicated workload to have a PodDisruptionBudget that selects its pods and
// still allows one voluntary disruption (a budget that allows none blocks every node drain).
func (v *variant) checkPDB(w *workload) []error {
	n := w.replicas()
	if n < 2 {
		return nil
	}
	for name, pdb := range v.pdbs {
		if !pdb.Selector.matches(w.spec.Template.Metadata.Labels) {
			continue
		}
		allowed, err := disruptionsAllowed(pdb, n)
		if err != nil {
			return []error{fmt.Errorf("%s: PodDisruptionBudget %s: %w", w, name, err)}
		}
		if allowed < 1 {
			return []error{fmt.Errorf("%s: %w: PodDisruptionBudget %s allows no disruption of %d replicas", w, ErrPDB, name, n)}
		}
		return nil
	}
	return []error{fmt.Errorf("%s: %w: %d replicas and no PodDisruptionBudget selects them", w, ErrPDB, n)}
}

// disruptionsAllowed is how many of n healthy pods a budget lets go at once. Percentages round as
// Kubernetes rounds them (minAvailable up, maxUnavailable up).
func disruptionsAllowed(pdb pdbSpec, n int) (int, error) {
	value := func(s string) (int, error) {
		if len(s) > 1 && s[len(s)-1] == '%' {
			p, err := strconv.Atoi(s[:len(s)-1])
			if err != nil || p < 0 || p > 100 {
				return 0, fmt.Errorf("%w: bad percentage %q", ErrPDB, s)
			}
			r := new(big.Rat).SetFrac64(int64(p*n), 100)
			q := new(big.Int).Quo(r.Num(), r.Denom())
			if !r.IsInt() {
				q.Add(q, big.NewInt(1))
			}
			return int(q.Int64()), nil
		}
		x, err := strconv.Atoi(s)
		if err != nil || x < 0 {
			return 0, fmt.Errorf("%w: bad value %q", ErrPDB, s)
		}
		return x, nil
	}
	switch {
	case pdb.MaxUnavailable != nil && pdb.MinAvailable == nil:
		return value(*pdb.MaxUnavailable)
	case pdb.MinAvailable != nil && pdb.MaxUnavailable == nil:
		m, err := value(*pdb.MinAvailable)
		return n - m, err
	}
	return 0, fmt.Errorf("%w: exactly one of minAvailable and maxUnavailable must be set", ErrPDB)
}
