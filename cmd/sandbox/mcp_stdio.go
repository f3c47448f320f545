package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioTransport is the stdio transport of "sandbox mcp": the SDK's
// newline-delimited JSON over in and out, with two changes the protocol
// asks for. A line that is not a JSON-RPC message the session can take
// (not JSON, not JSON-RPC, a batch where batches are gone, too long) is
// answered with a JSON-RPC error and skipped, where the SDK would end the
// connection, and with it the session's sandbox. And a call the client
// cancelled gets no answer: the spec says its receiver should not send one.
type stdioTransport struct {
	in  io.Reader
	out io.Writer
}

// Connect implements mcp.Transport.
func (t *stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c := &stdioConn{out: &lockedWriter{w: t.out}, calls: map[jsonrpc.ID]callState{}}
	lines := &lineFilter{in: bufio.NewReader(t.in), conn: c}
	// The filter bounds the lines itself, and answers a long one.
	inner, err := (&mcp.IOTransport{Reader: io.NopCloser(lines), Writer: nopWriteCloser{c.out}, MaxLineLength: -1}).Connect(ctx)
	if err != nil {
		return nil, err
	}
	c.Connection = inner
	return c, nil
}

// stdioConn is the SDK's connection over the filtered lines. It keeps
// what the filter needs to know of the session: the protocol version it
// negotiated and the calls not answered yet.
type stdioConn struct {
	mcp.Connection
	out *lockedWriter // stdout, shared with the SDK's connection

	mu      sync.Mutex
	version string     // negotiated at initialize; "" before
	initID  jsonrpc.ID // the id of the initialize call, once read
	calls   map[jsonrpc.ID]callState
}

// callState is what the connection knows of a call read and not answered.
type callState struct {
	cancelled bool // the client sent notifications/cancelled for it
	// batched: it came in a batch, whose one answer, an array, the SDK
	// sends once every call of the batch has answered.
	batched bool
}

// Write implements mcp.Connection: it drops the answer to a cancelled
// call, and learns the protocol version from the answer to initialize.
func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if resp, ok := msg.(*jsonrpc.Response); ok && c.answered(resp) {
		return nil
	}
	return c.Connection.Write(ctx, msg)
}

// answered forgets the call resp answers and reports whether the client
// cancelled it, and it did not come in a batch.
func (c *stdioConn) answered(resp *jsonrpc.Response) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.version == "" && c.initID.IsValid() && resp.ID == c.initID && resp.Error == nil {
		var res struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		if json.Unmarshal(resp.Result, &res) == nil {
			c.version = res.ProtocolVersion
		}
	}
	st, ok := c.calls[resp.ID]
	delete(c.calls, resp.ID)
	return ok && st.cancelled && !st.batched
}

// take checks a line the client sent, not blank, and keeps what it tells
// of the session. It returns the lines the SDK is to read, or the error
// that answers the line.
func (c *stdioConn) take(line []byte) ([]byte, *badMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	msgs, raws, bad := checkMessage(line, batchesAllowed(c.version), c.version)
	batch := bytes.TrimSpace(line)[0] == '['
	if bad == nil && batch {
		bad = c.inUse(msgs)
	}
	if bad != nil {
		return nil, bad
	}
	var pass, calls []byte
	for i, msg := range msgs {
		req, ok := msg.(*jsonrpc.Request)
		if batch && (!ok || !req.IsCall()) {
			// The SDK holds a batch's answer until each of its requests
			// has answered, a notification too, which never does: the
			// batch's notifications and responses go on their own, its
			// calls in a batch still. A batch has no order to keep.
			pass = append(append(pass, raws[i]...), '\n')
		} else if batch {
			calls = append(append(calls, ','), raws[i]...)
		}
		switch {
		case !ok:
		case req.IsCall():
			if _, dup := c.calls[req.ID]; !dup {
				c.calls[req.ID] = callState{batched: batch}
			}
			if req.Method == "initialize" && c.version == "" {
				c.initID = req.ID
			}
		case req.Method == "notifications/cancelled":
			var params struct {
				RequestID any `json:"requestId"`
			}
			if json.Unmarshal(req.Params, &params) != nil {
				break // the SDK tells of it
			}
			id, err := jsonrpc.MakeID(params.RequestID)
			if st, ok := c.calls[id]; err == nil && ok {
				st.cancelled = true
				c.calls[id] = st
			}
		}
	}
	switch {
	case !batch:
		pass = append(line, '\n')
	case len(calls) > 0:
		calls[0] = '['
		pass = append(append(pass, calls...), ']', '\n')
	}
	return pass, nil
}

// inUse refuses a batch with a call whose id an unanswered call has: the
// SDK would end the connection on it.
func (c *stdioConn) inUse(msgs []jsonrpc.Message) *badMessage {
	for _, msg := range msgs {
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			if _, ok := c.calls[req.ID]; ok {
				return &badMessage{code: jsonrpc.CodeInvalidRequest,
					msg: fmt.Sprintf("invalid request: the batch has id %v, which a call not answered yet has; none of the batch was run", req.ID.Raw())}
			}
		}
	}
	return nil
}

// lineFilter reads the client's lines and passes on to the SDK those its
// connection takes.
type lineFilter struct {
	in      *bufio.Reader
	conn    *stdioConn
	pending []byte // of the lines being passed on
	err     error  // the input's end or failure, after its last line
}

func (f *lineFilter) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		var line []byte
		var tooLong bool
		line, tooLong, f.err = readLine(f.in, maxMCPLine)
		if len(bytes.TrimSpace(line)) == 0 && !tooLong {
			// Blank lines between messages are skipped, as JSON
			// decoders skip white space; there is nothing to answer.
			continue
		}
		bad := &badMessage{code: jsonrpc.CodeInvalidRequest,
			msg: fmt.Sprintf("invalid request: a line of more than %d bytes, the most this server reads; it was skipped: "+
				"write a large file in parts", maxMCPLine)}
		if !tooLong {
			f.pending, bad = f.conn.take(line)
		}
		if bad != nil {
			// A failed write fails the SDK's next one too, which ends
			// the session.
			f.conn.out.Write(append(bad.response(), '\n'))
		}
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

// readLine reads one line and returns it without its end, or, if it is
// longer than max bytes, skips it and says so, holding no more than max.
// err is the input's end or failure after the line.
func readLine(r *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLong && len(line)+len(chunk) > max+len("\r\n") {
			tooLong, line = true, nil
		}
		if !tooLong {
			line = append(line, chunk...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), tooLong, err
	}
}

// lockedWriter serialises the lines of the SDK's connection, one Write
// each, and those the filter answers with.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
