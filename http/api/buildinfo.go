package api

import "github.com/prometheus/client_golang/prometheus"

// RegisterBuildInfo adds the constant gauge kvselect_build_info{version,goversion,revision} = 1,
// the Prometheus convention for exposing what binary a replica runs (join it onto other series
// by instance). Call it once, before serving.
func (m *Metrics) RegisterBuildInfo(version, goVersion, revision string) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kvselect_build_info", Help: "A constant 1 labelled with the running binary's version, Go version and VCS revision.",
	}, []string{"version", "goversion", "revision"})
	g.WithLabelValues(version, goVersion, revision).Set(1)
	m.reg.MustRegister(g)
}
