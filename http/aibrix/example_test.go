package aibrix_test

import (
	"bytes"
	"fmt"
	"net/http/httptest"

	"github.com/kvselect/kvselect/http/aibrix"
)

// loadTable is what a service adapter looks like: it answers from
// kvselect's own active-load accounting, keyed by stable routing id.
type loadTable map[string][]aibrix.RankLoad

func (t loadTable) CandidateLoad(model, candidateID string) ([]aibrix.RankLoad, bool) {
	ranks, ok := t[model+"|"+candidateID]
	return ranks, ok
}

func ExampleNewHandler() {
	policy, err := aibrix.ParsePolicy([]byte(`
requirements:
- {models: [premium-model], attribute: gpu, values: [h100]}
`))
	if err != nil {
		panic(err)
	}
	// ml/b is registered with kvselect: rank 0 is busy, rank 1 is idle.
	backend := loadTable{"premium-model|ml/b": {{Rank: 0, ActiveRequests: 3}, {Rank: 1}}}
	h, err := aibrix.NewHandler(aibrix.Config{Policy: policy}, backend, nil)
	if err != nil {
		panic(err)
	}
	body := `{"apiVersion":"routing.aibrix.ai/v1alpha1","kind":"ReplicaSelectionRequest",
	 "metadata":{"requestId":"req-1"},
	 "spec":{"model":"premium-model","policyMode":"Authoritative","candidates":[
	   {"id":"ml/a","ports":[8000],"attributes":{"gpu":"a100"}},
	   {"id":"ml/b","ports":[8000,8001],"attributes":{"gpu":"h100"}}]}}`
	r := httptest.NewRequest("POST", aibrix.DefaultPath, bytes.NewBufferString(body))
	r.Header.Set("Content-Type", aibrix.MediaType)
	r.Header.Set("X-Request-Id", "req-1")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)

	req, _ := aibrix.DecodeRequest([]byte(body))
	d := aibrix.Evaluate(req, policy, backend, nil)
	fmt.Println(w.Code, w.Header().Get("Content-Type"))
	fmt.Println(d.Decision, d.Target.ID, d.Target.Port)
	// Output:
	// 200 application/vnd.aibrix.external-routing+json;version=v1alpha1
	// Selected ml/b 8001
}
