package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestCappedBufferKeepsPrefixAndSuffix(t *testing.T) {
	for _, limit := range []int64{1, 2, 10, 11, 64} {
		for _, chunk := range []int{1, 3, 7, 100} {
			var all []byte
			b := newCappedBuffer(limit)
			for i := 0; i < 300; i += chunk {
				p := make([]byte, min(chunk, 300-i))
				for j := range p {
					p[j] = byte('a' + (i+j)%26)
				}
				all = append(all, p...)
				b.Write(p)
			}
			got := b.bytes()
			half := int(limit / 2)
			head := all[:int(limit)-half]
			tail := all[len(all)-half:]
			marker := fmt.Sprintf("\n... omitting %d bytes ...\n", len(all)-len(head)-len(tail))
			want := slices.Concat(head, []byte(marker), tail)
			if !b.truncated() || b.total != 300 || !bytes.Equal(got, want) {
				t.Errorf("limit %d chunk %d: got %q (total %d), want %q", limit, chunk, got, b.total, want)
			}
		}
	}
}

func TestCappedBufferUnderLimitIsExact(t *testing.T) {
	b := newCappedBuffer(100)
	b.Write([]byte("hello "))
	b.Write([]byte("world"))
	if b.truncated() || string(b.bytes()) != "hello world" {
		t.Errorf("got %q truncated=%v", b.bytes(), b.truncated())
	}
	b = newCappedBuffer(11)
	b.Write([]byte("hello world"))
	if b.truncated() || string(b.bytes()) != "hello world" {
		t.Errorf("exactly at the limit: got %q truncated=%v", b.bytes(), b.truncated())
	}
}

func TestMergeEnv(t *testing.T) {
	got := mergeEnv([]string{"A=1", "PATH=/x", "B=2"}, []string{"B=3", "LANG=C"}, defaultEnv)
	want := []string{"A=1", "PATH=/x", "B=3", "LANG=C", "HOME=/workspace"}
	if !slices.Equal(got, want) {
		t.Errorf("mergeEnv = %v, want %v", got, want)
	}
	if got := mergeEnv(nil, nil, defaultEnv); !slices.Equal(got, defaultEnv) {
		t.Errorf("mergeEnv(nil, nil, defaultEnv) = %v, want the defaults", got)
	}
}

func TestOutcomeNames(t *testing.T) {
	for o, want := range map[Outcome]string{Exited: "exited", Signaled: "signaled", Timeout: "timeout", Canceled: "canceled", 99: "unknown"} {
		if o.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(o), o, want)
		}
	}
	if (&Result{Outcome: Exited}).Err() != nil {
		t.Error("exit 0 gives an error")
	}
	for _, tc := range []struct {
		outcome      Outcome
		want, notIs  error
		wantContains string
	}{
		{Timeout, context.DeadlineExceeded, context.Canceled, "timeout"},
		{Canceled, context.Canceled, context.DeadlineExceeded, "canceled"},
	} {
		err := (&Result{Outcome: tc.outcome, ExitCode: -1}).Err()
		if err == nil || !strings.HasPrefix(err.Error(), tc.wantContains) || !errors.Is(err, tc.want) || errors.Is(err, tc.notIs) {
			t.Errorf("%v Err() = %v, want %q... matching %v only", tc.outcome, err, tc.wantContains, tc.want)
		}
	}
	if err := (&Result{Outcome: Exited, ExitCode: 1}).Err(); errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Errorf("exit 1 Err() = %v matches a context error", err)
	}
}
