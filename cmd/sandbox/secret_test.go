package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/fumehood/sandbox"
)

// TestParseSecret: --secret NAME=HOSTS takes the value from the tool's
// environment variable NAME, never from the command line, and an error
// about it names the flag, never the value.
func TestParseSecret(t *testing.T) {
	const value = "sk-from-the-environment"
	t.Setenv("API_KEY", value)
	cfg, err := parseRun([]string{"--net", "allow:api.example.com,*.example.org", "--secret", "API_KEY=api.example.com,x.example.org", "--", "true"})
	if err != nil {
		t.Fatal(err)
	}
	want := sandbox.Secret{Name: "API_KEY", Value: value, Hosts: []string{"api.example.com", "x.example.org"}}
	e, ok := cfg.opts.Network.(*sandbox.Egress)
	if !ok {
		t.Fatalf("Network = %#v, want an *Egress", cfg.opts.Network)
	}
	if got := e.Secrets; len(got) != 1 || got[0].Name != want.Name || got[0].Value != want.Value || strings.Join(got[0].Hosts, " ") != strings.Join(want.Hosts, " ") {
		t.Errorf("Secrets = %+v, want %+v", got, want)
	}
	if err := sandbox.New(cfg.opts).Err(); err != nil {
		t.Errorf("New: %v", err)
	}
	for _, args := range [][]string{
		{"--secret", "UNSET_SECRET_FOR_TEST=api.example.com"},
		{"--secret", "API_KEY"},
		{"--secret", "=api.example.com"},
	} {
		if _, err := parseRun(append(args, "--", "true")); err == nil || !strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: %v, want an error about --secret", args, err)
		}
	}
	// A host --net does not allow: the library refuses it, and the tool
	// names the flag.
	cfg, err = parseRun([]string{"--net", "allow:api.example.com", "--secret", "API_KEY=other.example.com", "--", "true"})
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.explain(sandbox.New(cfg.opts).Err())
	if fe, ok := errors.AsType[*flagError](err); !ok || fe.flag != "--secret" || !errors.Is(err, sandbox.ErrInvalidOption) || strings.Contains(err.Error(), value) {
		t.Errorf("explain: %v, want a --secret error without the value", err)
	} else {
		t.Log(err)
	}
}
