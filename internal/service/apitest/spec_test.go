package apitest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// specFile is the document the server is held to.
var specFile = filepath.Join("..", "openapi.yaml")

// docBase is where the document's servers say the API is; requests are
// matched to the document's routes with it, and sent to the test's server.
const docBase = "http://localhost:8080"

// spec is the loaded document and a router over its paths.
type spec struct {
	doc    *openapi3.T
	router routers.Router

	mu        sync.Mutex
	exercised map[string]bool // operationIds whose answers were checked
}

var loadSpec = sync.OnceValues(func() (*spec, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(specFile)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", specFile, err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("%s is not a valid OpenAPI 3 document: %w", specFile, err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route %s: %w", specFile, err)
	}
	return &spec{doc: doc, router: router, exercised: map[string]bool{}}, nil
})

func mustSpec(t *testing.T) *spec {
	t.Helper()
	sp, err := loadSpec()
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

func init() {
	// A streaming answer is JSON lines, each of which the document's
	// schema describes: each line is checked here, and the last one is
	// handed back for the validator to check again.
	openapi3filter.RegisterBodyDecoder("application/x-ndjson",
		func(r io.Reader, _ http.Header, schema *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
			sc := bufio.NewScanner(r)
			sc.Buffer(nil, 4<<20)
			var last any
			n := 0
			for sc.Scan() {
				n++
				var v any
				if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
					return nil, fmt.Errorf("line %d: not JSON: %w", n, err)
				}
				if err := schema.Value.VisitJSON(v, openapi3.VisitAsResponse()); err != nil {
					return nil, fmt.Errorf("line %d %s: %w", n, sc.Text(), err)
				}
				last = v
			}
			if err := sc.Err(); err != nil {
				return nil, err
			}
			if n == 0 {
				return nil, fmt.Errorf("no lines")
			}
			return last, nil
		})
}

// call is one request of a test and how it is checked.
type call struct {
	method, path string // path with its query, as sent
	header       http.Header
	body         []byte
	// invalid marks a request the test makes to break the document (a
	// bad field, a body too large): it is not checked, the answer is.
	invalid bool
	// noKey sends no Authorization header of the suite's own; host, if
	// set, is the request's Host.
	noKey bool
	host  string
}

// exchange is a request sent and its answer, with what the validator
// needs to check the answer.
type exchange struct {
	resp *http.Response
	in   *openapi3filter.RequestValidationInput
}

// send checks c against the document (unless c.invalid) and sends it to
// the server at base. The caller reads the answer's body, then checks it.
func (sp *spec) send(t *testing.T, ctx context.Context, base string, c call) *exchange {
	t.Helper()
	vreq, err := http.NewRequestWithContext(ctx, c.method, docBase+c.path, bytes.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	vreq.Header = c.header.Clone()
	if vreq.Header == nil {
		vreq.Header = http.Header{}
	}
	if !c.noKey && vreq.Header.Get("Authorization") == "" {
		vreq.Header.Set("Authorization", "Bearer "+apiKey)
	}
	route, params, err := sp.router.FindRoute(vreq)
	if err != nil {
		t.Fatalf("%s %s: not in the document: %v", c.method, c.path, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if !c.invalid {
		if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
			t.Fatalf("%s %s: the request breaks the document: %v\nbody: %s", c.method, c.path, err, clip(c.body))
		}
	}
	req, err := http.NewRequestWithContext(ctx, c.method, base+c.path, bytes.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = vreq.Header.Clone()
	if c.host != "" {
		req.Host = c.host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	return &exchange{resp: resp, in: in}
}

// check validates an answer whose body the caller read, status and
// headers included: a status the document does not list for the
// operation fails.
func (sp *spec) check(t *testing.T, ex *exchange, body []byte) {
	t.Helper()
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: ex.in,
		Status:                 ex.resp.StatusCode,
		Header:                 ex.resp.Header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true},
	}
	out.SetBodyBytes(body)
	sp.mu.Lock()
	sp.exercised[ex.in.Route.Operation.OperationID] = true
	sp.mu.Unlock()
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("%s %s: the answer breaks the document: %v\n%s %s\n%s", ex.in.Request.Method, ex.in.Request.URL.Path,
			err, ex.resp.Status, ex.resp.Header.Get("Content-Type"), clip(body))
	}
}

// do sends c, reads the answer, checks it, and returns it.
func (sp *spec) do(t *testing.T, base string, c call) (*http.Response, []byte) {
	t.Helper()
	ex := sp.send(t, context.Background(), base, c)
	body, err := io.ReadAll(ex.resp.Body)
	ex.resp.Body.Close()
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", c.method, c.path, err)
	}
	sp.check(t, ex, body)
	return ex.resp, body
}

func jsonCall(method, path, body string) call {
	return call{method: method, path: path, header: http.Header{"Content-Type": {"application/json"}}, body: []byte(body)}
}

func clip(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "..."
	}
	return string(b)
}

// lines splits an NDJSON body.
func lines(body []byte) []string {
	return strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
}

// checkComponent validates an answer against one of the document's
// components/responses, for answers no operation can list (a method the
// route does not take).
func (sp *spec) checkComponent(t *testing.T, name string, resp *http.Response, body []byte) {
	t.Helper()
	ref := sp.doc.Components.Responses[name]
	if ref == nil || ref.Value == nil {
		t.Fatalf("the document has no components/responses/%s", name)
	}
	mt := ref.Value.Content.Get(resp.Header.Get("Content-Type"))
	if mt == nil {
		t.Errorf("%s answer: Content-Type %q is not one of the document's", name, resp.Header.Get("Content-Type"))
		return
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Errorf("%s answer: not JSON: %v\n%s", name, err, clip(body))
		return
	}
	if err := mt.Schema.Value.VisitJSON(v, openapi3.VisitAsResponse()); err != nil {
		t.Errorf("%s answer breaks the document: %v\n%s", name, err, clip(body))
	}
}

// examples returns an operation's request examples as JSON, by name, in
// the order of their names.
func (sp *spec) examples(t *testing.T, path, method string) []string {
	t.Helper()
	op := sp.doc.Paths.Value(path).GetOperation(strings.ToUpper(method))
	if op == nil || op.RequestBody == nil {
		t.Fatalf("%s %s: no such operation with a body in the document", method, path)
	}
	mt := op.RequestBody.Value.Content.Get("application/json")
	if mt == nil || len(mt.Examples) == 0 {
		t.Fatalf("%s %s: no application/json example: a client's author has nothing to start from", method, path)
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(mt.Examples)) {
		b, err := json.Marshal(mt.Examples[name].Value.Value)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}
