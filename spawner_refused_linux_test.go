//go:build linux

package sandbox

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/fumehood/sandbox/internal/launch"
	"github.com/fumehood/sandbox/internal/wire"
)

// TestSpawnerRefusesMalformedRequest: a request the spawner does not
// serve (of no kind it knows, with a field its kind does not carry) fails
// the call or the start that sent it with the spawner's reason, at once
// and without a retry, and the spawner goes on serving.
func TestSpawnerRefusesMalformedRequest(t *testing.T) {
	c, err := theSpawner(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const owner = "TestSpawnerRefusesMalformedRequest"
	for _, tc := range []struct {
		req   wire.Request
		words []string
	}{
		{wire.Request{Kind: "restart", Owner: owner}, []string{`"restart"`}},
		{wire.Request{Kind: wire.Sync, Owner: owner, Live: 1}, []string{"sync", "Live"}},
		{wire.Request{Kind: wire.Fill, Owner: owner, Spec: &wire.Spec{}}, []string{"fill", "Pool"}},
	} {
		se, f, err := c.callFile(ctx, tc.req)
		if err != nil || f != nil || se == nil {
			t.Errorf("%+v: %+v, %v, %v; want the spawner's refusal", tc.req, se, f, err)
			continue
		}
		for _, w := range tc.words {
			if !strings.Contains(se.Text, w) {
				t.Errorf("%+v: refused with %q, which does not name %s", tc.req, se.Text, w)
			}
		}
	}

	// A start the spawner refuses is not accepted, and start says why.
	stdio := [3]*os.File{}
	for i := range stdio {
		if stdio[i], err = os.Open(os.DevNull); err != nil {
			t.Fatal(err)
		}
		defer stdio[i].Close()
	}
	cfg := &wire.Config{Program: wire.Program{Path: "/bin/true", Args: []string{"true"}}}
	h, err := c.start(ctx, cfg, stdio, launch.Files{}, owner, -1, 0, nil)
	if h != nil || !errors.Is(err, ErrSpawner) || errors.Is(err, errSpawnerGone) || !strings.Contains(err.Error(), "Pool") {
		t.Errorf("a start with a negative Pool: %v, %v; want the spawner's refusal naming Pool", h, err)
	}

	// The same spawner serves what comes next.
	if se, _, err := c.callFile(ctx, wire.Request{Kind: wire.Sync, Owner: owner}); se != nil || err != nil {
		t.Errorf("a Sync after the refused requests: %+v, %v", se, err)
	}
	if now := currentSpawner(); now != c {
		t.Error("the spawner that refused the requests is not serving any more")
	}
}
