package api

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/julienschmidt/httprouter"
	"go.yaml.in/yaml/v3"
)

// openAPIYAML is the OpenAPI 3.1 description of every route this package serves. It is
// authored in YAML for review and served as JSON at GET /openapi.json. Tests hold it to the
// router (every registered route documented, every documented route registered) and validate
// the README walk-through against it.
//
//go:embed openapi.yaml
var openAPIYAML []byte

// openAPIJSON is openAPIYAML converted once at start-up.
var openAPIJSON = mustYAMLToJSON(openAPIYAML)

// OpenAPIDocument returns the OpenAPI 3.1 document served at GET /openapi.json (a copy).
func OpenAPIDocument() []byte { return append([]byte(nil), openAPIJSON...) }

// mustYAMLToJSON converts an embedded YAML document; a broken document is a build defect.
func mustYAMLToJSON(y []byte) []byte {
	var v any
	if err := yaml.Unmarshal(y, &v); err != nil {
		panic(fmt.Sprintf("api: embedded openapi.yaml: %v", err))
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("api: embedded openapi.yaml: %v", err))
	}
	return b
}

func serveOpenAPI(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeRaw(w, http.StatusOK, openAPIJSON)
}
