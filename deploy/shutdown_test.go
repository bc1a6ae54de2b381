package deploy

import (
	"strings"
	"testing"
	"time"
)

// shutdownSpec is the part of a kvselect workload's pod template that governs termination.
type shutdownSpec struct {
	Template struct {
		Spec struct {
			TerminationGracePeriodSeconds *int `yaml:"terminationGracePeriodSeconds"`
			Containers                    []struct {
				Name      string   `yaml:"name"`
				Args      []string `yaml:"args"`
				Lifecycle *struct {
					PreStop *struct {
						Sleep *struct {
							Seconds int `yaml:"seconds"`
						} `yaml:"sleep"`
					} `yaml:"preStop"`
				} `yaml:"lifecycle"`
			} `yaml:"containers"`
		} `yaml:"spec"`
	} `yaml:"template"`
}

// Every shipped kvselect workload drains on termination: a preStop sleep, explicit
// --shutdown-grace and --shutdown-timeout, and a terminationGracePeriodSeconds that covers all
// three (otherwise the kubelet's SIGKILL cuts the drain short).
func TestShippedManifestsDrain(t *testing.T) {
	for _, dir := range []string{"kubernetes", "kubernetes/embedded-cluster"} {
		v, errs := loadVariant(".", dir)
		for _, err := range errs {
			t.Fatalf("%s: %v", dir, err)
		}
		found := 0
		for _, w := range v.workloads {
			var s shutdownSpec
			if err := w.field("spec", &s); err != nil {
				t.Fatal(err)
			}
			for _, ct := range s.Template.Spec.Containers {
				if ct.Name != "kvselect" {
					continue
				}
				found++
				where := dir + ": " + w.Metadata.Name
				if ct.Lifecycle == nil || ct.Lifecycle.PreStop == nil || ct.Lifecycle.PreStop.Sleep == nil || ct.Lifecycle.PreStop.Sleep.Seconds <= 0 {
					t.Errorf("%s: no preStop sleep", where)
					continue
				}
				grace, timeout := flagDuration(t, where, ct.Args, "--shutdown-grace"), flagDuration(t, where, ct.Args, "--shutdown-timeout")
				tg := s.Template.Spec.TerminationGracePeriodSeconds
				if tg == nil {
					t.Errorf("%s: no terminationGracePeriodSeconds", where)
					continue
				}
				need := time.Duration(ct.Lifecycle.PreStop.Sleep.Seconds)*time.Second + grace + timeout
				if time.Duration(*tg)*time.Second <= need {
					t.Errorf("%s: terminationGracePeriodSeconds %d does not cover preStop + --shutdown-grace + --shutdown-timeout = %v", where, *tg, need)
				}
			}
		}
		if found == 0 {
			t.Errorf("%s: no kvselect container", dir)
		}
	}
}

// flagDuration returns the duration value of --name=value in args (failing the test if absent).
func flagDuration(t *testing.T, where string, args []string, name string) time.Duration {
	t.Helper()
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				t.Errorf("%s: %s: %v", where, name, err)
			}
			return d
		}
	}
	t.Errorf("%s: no %s argument", where, name)
	return 0
}
