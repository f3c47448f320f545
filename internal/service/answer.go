package service

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"unicode/utf8"
)

// answerChunk is how much of a run's output the answer escapes at a time:
// the JSON of a chunk is at most six times its size (a control byte is
// \u0001), so an answer costs the server the output the run kept
// (OutputLimit a stream, in the Result) and 6*answerChunk bytes more,
// never the escaped text of the whole output.
const answerChunk = 32 << 10

// writeAnswer writes resp as JSON, as writeJSON would with stdout and
// stderr in its result, escaping the output a chunk at a time as it
// writes it.
func writeAnswer(w http.ResponseWriter, status int, resp *runResponse, stdout, stderr []byte) {
	var head bytes.Buffer
	enc := json.NewEncoder(&head)
	enc.SetEscapeHTML(false)
	enc.Encode(resp) // a runResponse always encodes
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	rest := head.Bytes()
	if resp.Result == nil {
		w.Write(rest)
		return
	}
	// The two fields are empty in resp; the output goes where they are.
	// Inside a JSON string a quote is escaped, so these are the keys.
	for _, f := range []struct {
		key  string
		data []byte
	}{{`"stdout":"`, stdout}, {`"stderr":"`, stderr}} {
		i := bytes.Index(rest, []byte(f.key))
		if i < 0 {
			break // cannot happen: result has both fields
		}
		if _, err := w.Write(rest[:i+len(f.key)]); err != nil {
			return // the client is gone
		}
		if writeJSONText(w, f.data) != nil {
			return
		}
		rest = rest[i+len(f.key):]
	}
	w.Write(rest)
}

// writeJSONText writes p as the inside of a JSON string, as
// encoding/json would (bytes that are not UTF-8 as U+FFFD), a chunk at a
// time, never splitting a character between chunks.
func writeJSONText(w io.Writer, p []byte) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for len(p) > 0 {
		n := min(len(p), answerChunk)
		if n < len(p) {
			// Back off to the start of a character the cut would split.
			for i := n - 1; i >= 0 && i >= n-utf8.UTFMax; i-- {
				if utf8.RuneStart(p[i]) {
					if !utf8.FullRune(p[i:n]) {
						n = i
					}
					break
				}
			}
		}
		buf.Reset()
		enc.Encode(string(p[:n]))
		b := buf.Bytes()
		if _, err := w.Write(b[1 : len(b)-2]); err != nil { // without the quotes and newline
			return err
		}
		p = p[n:]
	}
	return nil
}
