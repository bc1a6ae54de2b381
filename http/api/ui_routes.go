package api

import (
	stdembed "embed"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/core/engine"
)

// uiFiles are the status page's static assets: plain HTML, JavaScript and CSS with no build step
// and no external references (the page loads nothing but these files and the JSON API).
//
//go:embed ui/index.html ui/app.js ui/app.css
var uiFiles stdembed.FS

// opsRoutes registers kvselect's operator routes: the OpenAPI document, the status page and its
// data. They are extensions, documented as such in openapi.yaml.
func (h *handlers) opsRoutes(r *routeRecorder, opts Options) {
	get := func(path string, handle httprouter.Handle) {
		handle = opts.Metrics.instrument(path, handle)
		r.GET(path, handle)
		r.HEAD(path, handle)
	}
	get("/openapi.json", serveOpenAPI)
	get("/status", func(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
		writeJSON(w, http.StatusOK, buildStatus(h.svc, opts.ReplicaID))
	})
	get("/ui", uiAsset("ui/index.html", "text/html; charset=utf-8"))
	get("/ui/app.js", uiAsset("ui/app.js", "text/javascript; charset=utf-8"))
	get("/ui/app.css", uiAsset("ui/app.css", "text/css; charset=utf-8"))
}

// uiAsset serves one embedded file. The page must never be framed or load anything foreign; the
// Content-Security-Policy says so to the browser.
func uiAsset(name, contentType string) httprouter.Handle {
	b, err := uiFiles.ReadFile(name)
	if err != nil {
		panic("api: missing embedded " + name) // a build defect, caught by the package tests
	}
	return func(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
		hd := w.Header()
		hd.Set("Content-Type", contentType)
		hd.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(b)
	}
}

// StatusDoc is the body of GET /status: everything the status page shows, in one read.
type StatusDoc struct {
	ReplicaID         string                  `json:"replica_id"`
	PendingSelections int                     `json:"pending_selections"`
	Partitions        []PartitionStatus       `json:"partitions"`
	Workers           []core.WorkerRecord     `json:"workers"`
	Loads             []core.PartitionLoads   `json:"loads"`
	Peers             []string                `json:"peers"`
	Members           []core.MemberInfo       `json:"members"`
	WorkersFile       *core.WorkersFileStatus `json:"workers_file,omitempty"`
}

// PartitionStatus is one partition's sizes and routing quality.
type PartitionStatus struct {
	ModelName    string                `json:"model_name"`
	RoutingGroup string                `json:"routing_group"`
	Ranks        int                   `json:"ranks"`
	Bookings     int                   `json:"bookings"`
	Sessions     int                   `json:"sessions"`
	IndexEntries int                   `json:"index_entries"`
	IndexNodes   int                   `json:"index_nodes"`
	IndexBytes   int                   `json:"index_bytes"`
	Quality      engine.RoutingQuality `json:"quality"`
}

func buildStatus(svc *core.Service, replicaID string) StatusDoc {
	st := svc.Stats()
	d := StatusDoc{
		ReplicaID: replicaID, PendingSelections: st.PendingSelections,
		Partitions: make([]PartitionStatus, 0, len(st.Partitions)),
		Workers:    svc.Workers("", ""), Loads: svc.Loads("", ""),
		Peers: svc.Peers(), Members: svc.Members(), WorkersFile: svc.WorkersFileStatus(),
	}
	for _, p := range st.Partitions {
		d.Partitions = append(d.Partitions, PartitionStatus{
			ModelName: p.Key.Model, RoutingGroup: p.Key.Group, Ranks: p.Ranks, Bookings: p.Bookings,
			Sessions: p.Sessions, IndexEntries: p.IndexEntries, IndexNodes: p.IndexNodes, IndexBytes: p.IndexBytes,
			Quality: p.Quality,
		})
	}
	if d.Peers == nil {
		d.Peers = []string{}
	}
	return d
}

// aibrixPath is the AIBrix decision endpoint's path.
func aibrixPath(opts Options) string {
	if opts.AIBrixPath == "" {
		return "/v1alpha1/select"
	}
	return opts.AIBrixPath
}
