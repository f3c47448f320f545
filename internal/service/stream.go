package service

import (
	"encoding/json"
	"net/http"
	"sync"
)

// eventStream writes a run's output as JSON lines (NDJSON) while it runs,
// each line flushed at once, and the answer last:
//
//	{"stream":"stdout","data":"hello\n"}
//	{"stream":"stderr","data":"warning: ...\n"}
//	{"result":{"id":"...","cause":"exited","exit_code":0,...}}
//
// The data are what the program wrote, in the pieces the server read them
// in, as JSON strings: bytes that are not UTF-8 arrive as U+FFFD, as in
// JSON mode, and so does a character split between two pieces.
type eventStream struct {
	mu  sync.Mutex
	enc *json.Encoder
	rc  *http.ResponseController
	err error // the first failed write: the client is gone or too slow
}

type event struct {
	Stream string       `json:"stream,omitempty"` // "stdout" or "stderr"
	Data   string       `json:"data,omitempty"`
	Result *runResponse `json:"result,omitempty"` // the last line
}

// startStream sends the response's header.
func startStream(w http.ResponseWriter, rc *http.ResponseController) *eventStream {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	e := &eventStream{enc: json.NewEncoder(w), rc: rc}
	e.enc.SetEscapeHTML(false)
	e.err = rc.Flush()
	return e
}

// send writes one line; after a failed write it drops the rest, so that
// the program's output is drained while the run is being canceled.
func (e *eventStream) send(ev event) {
	if e.err == nil {
		e.err = e.enc.Encode(ev)
	}
	if e.err == nil {
		e.err = e.rc.Flush()
	}
}

// finish sends the answer.
func (e *eventStream) finish(resp *runResponse) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.send(event{Result: resp})
}

// writer returns the Cmd.Stdout or Cmd.Stderr that sends the stream's
// first limit bytes as events. The library does not cap the writers it is
// given, so it is capped here; beyond the limit the output is counted only.
func (e *eventStream) writer(name string, limit int64) *streamWriter {
	return &streamWriter{e: e, name: name, limit: limit}
}

type streamWriter struct {
	e           *eventStream
	name        string
	limit       int64
	sent, total int64 // guarded by e.mu
}

func (w *streamWriter) Write(p []byte) (int, error) {
	w.e.mu.Lock()
	defer w.e.mu.Unlock()
	w.total += int64(len(p))
	if room := w.limit - w.sent; room > 0 {
		chunk := p[:min(room, int64(len(p)))]
		w.sent += int64(len(chunk))
		w.e.send(event{Stream: w.name, Data: string(chunk)})
	}
	return len(p), nil
}

// truncated reports whether output was dropped at the limit.
func (w *streamWriter) truncated() bool {
	w.e.mu.Lock()
	defer w.e.mu.Unlock()
	return w.total > w.limit
}
