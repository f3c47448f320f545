package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The longest message "sandbox mcp" reads, the SDK's own bounds: a line
// on stdio, a request body over HTTP. A longer one is answered with an
// error and skipped, not buffered whole.
const (
	maxMCPLine = mcp.DefaultMaxLineLength
	maxMCPBody = mcp.DefaultMaxRequestBodyBytes
)

// mcpBodyTimeout is how long an HTTP request's body may take to arrive.
const mcpBodyTimeout = 30 * time.Second

// firstNoBatchVersion is the protocol revision that removed JSON-RPC
// batches; the revisions before it (2025-03-26 requires them) take them.
const firstNoBatchVersion = "2025-06-18"

// badMessage is the JSON-RPC error that answers input which is not a
// message the server can take. The SDK would drop the connection on it;
// JSON-RPC wants an answer and the stream to go on.
type badMessage struct {
	id   json.RawMessage // the id the input carried, or nil for null
	code int64           // jsonrpc.CodeParseError or CodeInvalidRequest
	msg  string
}

func (b *badMessage) Error() string { return b.msg }

// response is the JSON-RPC error response, one line without its newline.
// It is encoded here rather than through jsonrpc.EncodeMessage, which
// leaves out a null id where JSON-RPC wants "id": null.
func (b *badMessage) response() []byte {
	type wire struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc.Error   `json:"error"`
	}
	data, err := json.Marshal(wire{"2.0", b.id, jsonrpc.Error{Code: b.code, Message: b.msg}})
	if err != nil { // an id that does not encode: answer to null
		data, _ = json.Marshal(wire{"2.0", nil, jsonrpc.Error{Code: b.code, Message: b.msg}})
	}
	return data
}

// maxBatchDepth is how deeply the SDK lets a batch nest arrays and
// objects; it drops the connection on a deeper one. A single message it
// checks the same way, and says so.
const maxBatchDepth = 1000

// batchesAllowed reports whether a session that negotiated version takes
// JSON-RPC batches; "" is a session that has not initialized yet, which
// the SDK takes at 2025-03-26.
func batchesAllowed(version string) bool { return version < firstNoBatchVersion }

// checkMessage checks that data is one JSON-RPC message the SDK can take,
// or, if batches are allowed, a batch of them. It returns the messages a
// batch holds, or the one message, each with the bytes it came in; a
// *badMessage otherwise.
func checkMessage(data []byte, batches bool, version string) ([]jsonrpc.Message, []json.RawMessage, *badMessage) {
	data = bytes.TrimSpace(data)
	if !json.Valid(data) {
		return nil, nil, &badMessage{code: jsonrpc.CodeParseError,
			msg: "parse error: the message is not valid JSON; send one JSON-RPC message per line, encoded as UTF-8 JSON"}
	}
	if data[0] != '[' {
		msg, bad := checkOne(data)
		if bad != nil {
			return nil, nil, bad
		}
		return []jsonrpc.Message{msg}, []json.RawMessage{data}, nil
	}
	if !batches {
		return nil, nil, &badMessage{code: jsonrpc.CodeInvalidRequest,
			msg: fmt.Sprintf("invalid request: JSON-RPC batches are not part of MCP since %s, and this session speaks %s: send each message on its own",
				firstNoBatchVersion, version)}
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil || len(raws) == 0 {
		return nil, nil, &badMessage{code: jsonrpc.CodeInvalidRequest, msg: "invalid request: an empty batch"}
	}
	if nesting(data) > maxBatchDepth {
		return nil, nil, &badMessage{code: jsonrpc.CodeInvalidRequest,
			msg: fmt.Sprintf("invalid request: the batch nests arrays and objects more than %d deep", maxBatchDepth)}
	}
	msgs := make([]jsonrpc.Message, 0, len(raws))
	ids := map[jsonrpc.ID]bool{}
	for i, raw := range raws {
		msg, bad := checkOne(raw)
		if bad != nil {
			// The batch is refused whole: the SDK takes all of it or
			// none, and the error cannot say which of its calls ran.
			return nil, nil, &badMessage{code: jsonrpc.CodeInvalidRequest,
				msg: fmt.Sprintf("invalid request: message %d of the batch: %s; none of the batch was run", i+1, bad.msg)}
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			if ids[req.ID] {
				return nil, nil, &badMessage{code: jsonrpc.CodeInvalidRequest,
					msg: fmt.Sprintf("invalid request: the batch has id %v twice; none of the batch was run", req.ID.Raw())}
			}
			ids[req.ID] = true
		}
		msgs = append(msgs, msg)
	}
	return msgs, raws, nil
}

// nesting returns how deeply data, valid JSON, nests arrays and objects.
func nesting(data []byte) int {
	dec := json.NewDecoder(bytes.NewReader(data))
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return deepest
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			depth++
			deepest = max(deepest, depth)
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
	}
}

// checkOne checks that data, valid JSON, is one JSON-RPC message.
func checkOne(data []byte) (jsonrpc.Message, *badMessage) {
	msg, err := jsonrpc.DecodeMessage(data)
	if err == nil {
		return msg, nil
	}
	bad := &badMessage{code: jsonrpc.CodeInvalidRequest,
		msg: fmt.Sprintf("invalid request: not a JSON-RPC 2.0 message (%v): want an object with \"jsonrpc\": \"2.0\", a string \"method\" and a string or number \"id\" for a call", err)}
	var withID struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(data, &withID) == nil && len(withID.ID) > 0 && (withID.ID[0] == '"' || withID.ID[0] == '-' || withID.ID[0] >= '0' && withID.ID[0] <= '9') {
		bad.id = withID.ID
	}
	return nil, bad
}

// checkHTTPMessage answers a POST whose body is not a JSON-RPC message
// the session can take with 400 and the JSON-RPC error, and one longer
// than maxMCPBody with 413, before the SDK, which answers them in
// plain text, reads it.
func checkHTTPMessage(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); r.Method != http.MethodPost || mt != "application/json" {
			next.ServeHTTP(w, r) // the SDK refuses what is no JSON-RPC POST
			return
		}
		// The body must arrive within mcpBodyTimeout; the deadline then
		// goes, as a response may stream for as long as its call runs.
		rc := http.NewResponseController(w)
		rc.SetReadDeadline(time.Now().Add(mcpBodyTimeout))
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxMCPBody))
		rc.SetReadDeadline(time.Time{})
		r.Body.Close()
		status := http.StatusBadRequest
		var bad *badMessage
		var tooLong *http.MaxBytesError
		switch {
		case errors.As(err, &tooLong):
			status = http.StatusRequestEntityTooLarge
			bad = &badMessage{code: jsonrpc.CodeInvalidRequest,
				msg: fmt.Sprintf("invalid request: a body of more than %d bytes, the most this server reads: write a large file in parts", maxMCPBody)}
		case errors.Is(err, os.ErrDeadlineExceeded):
			http.Error(w, fmt.Sprintf("reading the request body: it did not arrive whole within %s", mcpBodyTimeout), http.StatusRequestTimeout)
			return
		case err != nil:
			http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
			return
		default:
			// The header gives the session's version; the SDK takes a
			// request without one at 2025-03-26.
			version := r.Header.Get("Mcp-Protocol-Version")
			_, _, bad = checkMessage(body, batchesAllowed(version), version)
		}
		if bad != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			w.Write(bad.response())
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}
