package validate

import (
	"reflect"
	"testing"
)

// The readers the checks stand on: if one of them silently read less than
// is there, a check could pass on nothing.

func TestParseDockerfile(t *testing.T) {
	d, err := parseDockerfile(`# syntax=docker/dockerfile:1
ARG BASE=debian
from golang AS build
RUN CGO_ENABLED=0 \
	# a comment inside a continuation
	go build -trimpath \

	-o /bin/x ./cmd/x
FROM ${BASE}
COPY --from=build /bin/x /x
user 10:20
EXPOSE 8080/tcp 9090
ENTRYPOINT ["/x"]
`)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Stages) != 2 || d.Stages[0].Name != "build" || d.Stages[1].Name != "" {
		t.Fatalf("stages: %+v", d.Stages)
	}
	run := d.Stage("build").Last("RUN")
	if run == nil || run.Line != 4 {
		t.Fatalf("RUN: %+v", run)
	}
	gb, err := findGoBuild(run.Args)
	if err != nil || gb == nil {
		t.Fatalf("findGoBuild(%q) = %+v, %v", run.Args, gb, err)
	}
	if gb.Env["CGO_ENABLED"] != "0" || gb.Output != "/bin/x" || gb.Package != "./cmd/x" {
		t.Errorf("go build: %+v", gb)
	}
	final := d.Final()
	if u := final.Last("USER"); u == nil || u.Args != "10:20" || u.Line != 11 {
		t.Errorf("USER: %+v", u)
	}
	if e := final.All("EXPOSE"); len(e) != 1 || e[0].Args != "8080/tcp 9090" {
		t.Errorf("EXPOSE: %+v", e)
	}
	from, srcs, dest, err := copyArgs(final.Last("COPY").Args)
	if err != nil || from != "build" || !reflect.DeepEqual(srcs, []string{"/bin/x"}) || dest != "/x" {
		t.Errorf("COPY: %q %q %q %v", from, srcs, dest, err)
	}
	if argv, ok := execForm(final.Last("ENTRYPOINT").Args); !ok || !reflect.DeepEqual(argv, []string{"/x"}) {
		t.Errorf("ENTRYPOINT: %q %v", argv, ok)
	}
	if _, ok := execForm("/x -a"); ok {
		t.Error("the shell form was taken for the exec form")
	}

	for _, bad := range []string{"", "RUN x\n", "FROM a\nRUN x \\\n"} {
		if _, err := parseDockerfile(bad); err == nil {
			t.Errorf("parseDockerfile(%q): no error", bad)
		}
	}
}

func TestFindGoBuild(t *testing.T) {
	cases := []struct {
		run       string
		out, pkg  string
		cgo       string
		wantBuild bool
	}{
		{`go mod download && CGO_ENABLED=0 go build -ldflags "-s -w" -o=/t ./examples/t`, "/t", "./examples/t", "0", true},
		{`GOOS=linux CGO_ENABLED=1 go build -tags netgo -o /t ./x; echo done`, "/t", "./x", "1", true},
		{`go vet ./... && go test ./...`, "", "", "", false},
	}
	for _, tc := range cases {
		gb, err := findGoBuild(tc.run)
		if err != nil {
			t.Errorf("%q: %v", tc.run, err)
			continue
		}
		if (gb != nil) != tc.wantBuild {
			t.Errorf("%q: found %+v", tc.run, gb)
			continue
		}
		if gb != nil && (gb.Output != tc.out || gb.Package != tc.pkg || gb.Env["CGO_ENABLED"] != tc.cgo) {
			t.Errorf("%q: %+v", tc.run, gb)
		}
	}
	if _, err := findGoBuild(`go build -o /a ./x ./y`); err == nil {
		t.Error("two packages: no error")
	}
	if _, err := findGoBuild(`echo "unterminated`); err == nil {
		t.Error("unterminated quote: no error")
	}
}

func TestParseServerArgs(t *testing.T) {
	sa, probs := parseServerArgs([]string{"--addr=:9000", "-max-queue", "3", "-best-effort", "-max-memory=1GiB", "-shutdown-timeout=2s"})
	if len(probs) > 0 {
		t.Fatalf("problems: %v", probs)
	}
	if sa.port() != 9000 || sa.int("max-queue") != 3 || sa.value("best-effort") != "true" ||
		sa.size("max-memory") != 1<<30 || sa.duration("shutdown-timeout").String() != "2s" {
		t.Errorf("read %v", sa.set)
	}
	if sa.value("max-timeout") != "60s" {
		t.Errorf("defaults: max-timeout %q", sa.value("max-timeout"))
	}
	for _, bad := range [][]string{
		{"-nope=1"}, {"-addr=8080"}, {"-max-queue=-1"}, {"-max-cpus=0"}, {"-max-memory=12X"},
		{"-default-timeout=0s"}, {"-max-queue"}, {"serve"}, {"-pool=1", "-pool=2"}, {"-best-effort=maybe"},
	} {
		if _, probs := parseServerArgs(bad); len(probs) == 0 {
			t.Errorf("parseServerArgs(%q): no problem", bad)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "4096": 4096, "1K": 1 << 10, "512M": 512 << 20, "1GiB": 1 << 30, "2g": 2 << 30, "3MB": 3 << 20} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "M", "-1", "1T", "1.5G", "99999999999G"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q): no error", in)
		}
	}
}

func TestSplitDocuments(t *testing.T) {
	docs := splitDocuments([]byte("# only a comment\n---\na: 1\n--- # second\nb: 2\n---\n\n"))
	if len(docs) != 2 || string(docs[0]) != "a: 1\n" || string(docs[1]) != "b: 2\n" {
		t.Errorf("documents: %q", docs)
	}
}

func TestImageName(t *testing.T) {
	for in, want := range map[string]string{
		"toolserver":                   "toolserver",
		"toolserver:dev":               "toolserver",
		"registry:5000/team/ts:v1":     "registry:5000/team/ts",
		"registry:5000/ts@sha256:abcd": "registry:5000/ts",
	} {
		if got := imageName(in); got != want {
			t.Errorf("imageName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseServeArgs(t *testing.T) {
	sa, probs := parseServeArgs([]string{"serve", "-addr=:9000", "-api-keys", "/k", "-insecure-no-auth"})
	if len(probs) > 0 {
		t.Fatalf("problems: %v", probs)
	}
	if sa.port() != 9000 || sa.value("api-keys") != "/k" || sa.value("insecure-no-auth") != "true" || sa.at["addr"] != 1 || sa.at["api-keys"] != 2 {
		t.Errorf("read %v at %v", sa.set, sa.at)
	}
	if _, probs := parseServeArgs([]string{"serve", "-addr=:9000", "-nope"}); len(probs) != 1 || probs[0].i != 2 {
		t.Errorf("an unknown flag after serve: %v, want one problem at argument 2", probs)
	}
	for _, bad := range [][]string{{}, {"-addr=:9000"}, {"mcp", "-addr=:9000"}, {"-addr=:9000", "serve"}} {
		if _, probs := parseServeArgs(bad); len(probs) == 0 || probs[0].i != 0 {
			t.Errorf("parseServeArgs(%q): %v, want a problem at argument 0", bad, probs)
		}
	}
	if sa, _ := parseServeArgs([]string{"serve"}); sa.value("addr") != "127.0.0.1:8080" {
		t.Errorf("-addr's default: %q, want serve's 127.0.0.1:8080", sa.value("addr"))
	}
}
