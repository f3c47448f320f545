# Targets for people and CI. Only Go is needed; staticcheck is installed on
# first use, libseccomp-dev (for the -tags libseccomp build), docker.io (for
# the Docker test in deploy/validate), nodejs and npm (for the MCP server's
# test with the TypeScript SDK's client) and CPython's testsuite package too,
# as root. Run "make help" for the list.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.ONESHELL:

# Go may be installed without being on PATH (the official tarball), and a
# minimal PATH may lack useradd and runuser.
export PATH := $(PATH):/usr/local/go/bin:/usr/sbin:/sbin
GO ?= go
GOBIN = $(shell $(GO) env GOPATH)/bin
STATICCHECK = $(GOBIN)/staticcheck
# The unprivileged user test-rootless runs the tests as.
ROOTLESS_USER ?= sbxtest
# How many inputs make test gives each fuzz target, about 15 s here;
# FuzzDifferential, which runs two compilers per input, gets a 25th. A count,
# not a duration: go1.26's fuzzer can fail a duration-bounded run with a bare
# "context deadline exceeded" as its time runs out (go.dev/issue/75804, fixed
# in go1.27), and a count sets no deadline.
FUZZEXECS ?= 150000
# CPython's regression tests in a sandbox take minutes: make test runs them
# once, on their own, and every other pass skips them.
CPYTHON_TEST = ^TestCPythonRegressionTests$$

.PHONY: help demo test test-rootless test-vm test-k8s test-busy bench bench-cgroups soak mutants

help:
	@echo 'make demo           run examples/quickstart (snippets), examples/agent-session (a multi-turn session),'
	echo '                     then in live sandboxes examples/code-interpreter (a Python kernel kept across'
	echo '                     calls) and examples/dev-server (a web server reached from the host),'
	echo '                     then examples/mcp-client (a Go agent calling sandbox mcp'"'"'s tools over stdio)'
	echo 'make test           go vet, staticcheck, go test -race (installs nodejs and npm as root, for the MCP'
	echo '                     server'"'"'s test with the TypeScript client), go test with CGO_ENABLED=0,'
	echo '                     then the same with -tags libseccomp (installs libseccomp-dev as root);'
	echo '                     CPython'"'"'s regression tests once (installs libpython3.X-testsuite as root)'
	echo 'make test-rootless  (as root) run the tests as the unprivileged user $(ROOTLESS_USER)'
	echo 'make test-vm        the tests in a Debian kernel under qemu (no KVM needed) on pure cgroup v2,'
	echo '                     as root and as a user with a delegated cgroup; VM_TESTS=regex narrows them'
	echo 'make test-k8s       (as root) deploy/kubernetes on a real cluster it builds (cached), starts and stops:'
	echo '                     control plane, CoreDNS, three kubelet+containerd nodes; sessions, a drain, a'
	echo '                     scale; then its manifest mutants (deploy/k8stest; about 25 min cold, 2 warm)'
	echo 'make test-busy      make test twice at once in two fresh clones of HEAD, while sandbox serve'
	echo '                     serves a stream of runs and (as root) scripts/mount-loop.sh mounts and unmounts'
	echo '                     a tmpfs in a loop (about an hour on 2 cores); prints each exit status'
	echo 'make bench          go test -bench at the root (BENCHTIME=5x), then bench/table: floor, bubblewrap, cold, warm and image Run, the CLI on /usr and in a stored image, interleaved; ends with the ratios line'
	echo 'make bench-cgroups  our cgroup driver against opencontainers/cgroups and containerd/cgroups/v3:'
	echo '                     size, package inits, one run'"'"'s cgroup lifecycle (bench/cgroupdrivers; --vm for v2)'
	echo 'make mutants        remove a protection (mutants/*.patch) in a copy of the tree and check that'
	echo '                     the escape test guarding it fails (make test runs this too)'
	echo 'make soak           the long soak: 10,000 runs then 64 at a time, leak-checked, with p50/p99'
	echo '                     at the start and the end; callers killed at random points 200 times'
	echo 'make help           this text'

demo:
	@echo "+ $(GO) run ./examples/quickstart"
	$(GO) run ./examples/quickstart
	@echo "+ $(GO) run ./examples/agent-session"
	$(GO) run ./examples/agent-session
	@echo "+ $(GO) run ./examples/code-interpreter"
	$(GO) run ./examples/code-interpreter
	@echo "+ $(GO) run ./examples/dev-server"
	$(GO) run ./examples/dev-server
	@echo "+ $(GO) run ./examples/mcp-client"
	$(GO) run ./examples/mcp-client

# -p 1: packages' tests run one after another, so that on 2 cores the root
# package's suite, which starts thousands of sandboxes, does not share them
# with the CLI's and sandbox serve's, which start their own (see -timeout).
test:
	@if [ ! -x "$(STATICCHECK)" ]; then
		echo "+ GOBIN=$(GOBIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@latest"
		GOBIN="$(GOBIN)" $(GO) install honnef.co/go/tools/cmd/staticcheck@latest
	fi
	echo "+ $(GO) vet ./..."
	$(GO) vet ./...
	echo "+ $(STATICCHECK) ./..."
	"$(STATICCHECK)" ./...
	# The MCP server's tests drive it with the TypeScript SDK's client,
	# which npm installs from the registry and Node runs (apt-get as
	# root; without them those tests skip, unless CI=true).
	if ! { command -v node && command -v npm; } >/dev/null && [ "$$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
		echo "+ apt-get install -y -q --no-install-recommends nodejs npm"
		apt-get install -y -q --no-install-recommends nodejs npm </dev/null || { apt-get update -q && apt-get install -y -q --no-install-recommends nodejs npm </dev/null; }
	fi
	# -timeout 30m: the root package's suite takes about 8 minutes under
	# -race on 2 cores, too close to go test's default bound of 10 when
	# the machine is shared.
	echo "+ $(GO) test -race -count=1 -p 1 -timeout 30m -skip '$(CPYTHON_TEST)' ./..."
	$(GO) test -race -count=1 -p 1 -timeout 30m -skip '$(CPYTHON_TEST)' ./...
	echo "+ CGO_ENABLED=0 $(GO) test -count=1 -p 1 -timeout 30m -skip '$(CPYTHON_TEST)' ./..."
	CGO_ENABLED=0 $(GO) test -count=1 -p 1 -timeout 30m -skip '$(CPYTHON_TEST)' ./...
	# CPython's own regression tests, on the host and in a sandbox: they
	# need the testsuite package of the python3 the machine has (apt-get
	# as root; the package follows the python3 version found here). Built
	# with CGO_ENABLED=0 as the pass above, whose compiled packages it
	# reuses.
	py=$$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true)
	if [ -n "$$py" ] && [ ! -e "/usr/lib/python$$py/test/test_os.py" ]; then
		if [ "$$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
			echo "+ apt-get install -y -q libpython$$py-testsuite"
			apt-get install -y -q "libpython$$py-testsuite" </dev/null || { apt-get update -q && apt-get install -y -q "libpython$$py-testsuite" </dev/null; }
		else
			echo "libpython$$py-testsuite is not installed and this is not root: TestCPythonRegressionTests will skip" >&2
		fi
	fi
	echo "+ CGO_ENABLED=0 $(GO) test -count=1 -run '$(CPYTHON_TEST)' -v ."
	CGO_ENABLED=0 $(GO) test -count=1 -run '$(CPYTHON_TEST)' -v .
	# Every test that builds its Sandbox through newTest again, with each
	# such Sandbox pooled: a pooled run must be as isolated as a cold one,
	# and each such Sandbox must really serve from its pool. poolpass finds
	# those tests in their sources and ends with how many ran and how many
	# got a filled pool.
	echo "+ SANDBOX_TEST_POOL=2 $(GO) run ./scripts/poolpass -skip '$(CPYTHON_TEST)'"
	SANDBOX_TEST_POOL=2 GO="$(GO)" $(GO) run ./scripts/poolpass -skip '$(CPYTHON_TEST)'
	# The fallback for a toolchain that refuses forkplan's one link into
	# the runtime: copying clones, and the recipe's sandboxes built with them.
	echo "+ $(GO) test -count=1 -tags forkplan_copy ./internal/forkplan && $(GO) test -count=1 -tags forkplan_copy -run '^TestRecipe' ."
	$(GO) test -count=1 -tags forkplan_copy ./internal/forkplan && $(GO) test -count=1 -tags forkplan_copy -run '^TestRecipe' .
	# The container image and Kubernetes manifests, checked offline
	# against the Kubernetes API types and sandbox serve's flags; a
	# module of its own, so the library's go.mod stays free of k8s.io.
	# Its TestDockerContainer runs the CLI in containers of a dockerd of
	# its own, which needs Debian's docker.io (apt-get as root; it skips
	# without it).
	if ! command -v dockerd >/dev/null && [ "$$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
		echo "+ apt-get install -y -q --no-install-recommends docker.io"
		apt-get install -y -q --no-install-recommends docker.io </dev/null || { apt-get update -q && apt-get install -y -q --no-install-recommends docker.io </dev/null; }
	fi
	echo "+ (cd deploy/validate && $(GO) vet ./... && staticcheck ./... && $(GO) test -count=1 ./...)"
	(cd deploy/validate && $(GO) vet ./... && "$(STATICCHECK)" ./... && $(GO) test -count=1 ./...)
	# The toolserver held to its OpenAPI description (openapi.yaml) by
	# kin-openapi's validator: a module of its own, so that the library's
	# go.mod stays free of it.
	echo "+ (cd internal/service/apitest && $(GO) vet ./... && staticcheck ./... && $(GO) test -count=1 ./...)"
	(cd internal/service/apitest && $(GO) vet ./... && "$(STATICCHECK)" ./... && $(GO) test -count=1 ./...)
	# The libseccomp build: the same policy compiled through libseccomp,
	# which needs its C library and headers (apt-get as root).
	if ! pkg-config --exists libseccomp 2>/dev/null; then
		if [ "$$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
			echo "+ apt-get install -y -q libseccomp-dev pkg-config"
			apt-get install -y -q libseccomp-dev pkg-config </dev/null || { apt-get update -q && apt-get install -y -q libseccomp-dev pkg-config </dev/null; }
		else
			echo "libseccomp-dev and pkg-config are not installed and this is not root: skipping the -tags libseccomp tests" >&2
			exit 0
		fi
	fi
	echo "+ $(GO) vet -tags libseccomp ./... && $(STATICCHECK) -tags libseccomp ./..."
	$(GO) vet -tags libseccomp ./...
	"$(STATICCHECK)" -tags libseccomp ./...
	echo "+ $(GO) test -tags libseccomp -count=1 -p 1 -skip '$(CPYTHON_TEST)' ./..."
	$(GO) test -tags libseccomp -count=1 -p 1 -skip '$(CPYTHON_TEST)' ./...
	# Short fuzz runs: the two compilers against each other, the pure-Go
	# compiler against its reference, the profile reader for panics,
	# every parser of caller input (Options, workspace paths, egress
	# entries, the CLI's sizes, binds and whole command lines), the secrets
	# scrubber on streams cut anywhere, and the MCP server's stdio reader
	# on any input (a tenth: each input runs a server).
	for target in "FuzzDifferential ./internal/seccomp $$(( $(FUZZEXECS) / 25 )) libseccomp" \
		"FuzzCompile ./internal/seccomp" "FuzzFromDocker ./seccompprofile" "FuzzOptions ." "FuzzWorkspacePath ." \
		"FuzzParseRules ./internal/egress" "FuzzScrubber ./internal/egress" \
		"FuzzParseSize ./cmd/sandbox" "FuzzParseBind ./cmd/sandbox" "FuzzParseRun ./cmd/sandbox" \
		"FuzzStdioTransport ./cmd/sandbox $$(( $(FUZZEXECS) / 10 ))"; do
		set -- $$target $(FUZZEXECS)
		tags=""; if [ $$# -gt 4 ]; then tags="-tags $$4"; fi
		echo "+ $(GO) test $$tags -run '^$$' -fuzz '^$$1$$' -fuzztime $${3}x -fuzzminimizetime 5s $$2"
		$(GO) test $$tags -run '^$$' -fuzz "^$$1$$" -fuzztime $${3}x -fuzzminimizetime 5s $$2
	done
	$(MAKE) --no-print-directory mutants

# Each mutant removes one protection; its escape test must then fail.
mutants:
	@echo "+ mutants/run.sh"
	GO="$(GO)" mutants/run.sh

# As root: build the test binaries, then run them as $(ROOTLESS_USER), each
# from a directory of its own that the user can read (with a copy of the
# package's testdata, if any) and with a TMPDIR the user owns. The go
# command is not run as that user: the CLI's integration test gets the
# built tool through SANDBOX_CLI. Not as root: the caller already is
# unprivileged, so the tests simply run.
test-rootless:
	@if [ "$$(id -u)" -ne 0 ]; then
		echo "+ $(GO) test -count=1 -p 1 ./...  (not root: running as $$(id -un))"
		$(GO) test -count=1 -p 1 ./...
		exit 0
	fi
	dir=$$(mktemp -d /tmp/sandbox-rootless.XXXXXX)
	trap 'rm -rf "$$dir"' EXIT
	chmod 755 "$$dir"
	echo "+ $(GO) test -c -o $$dir/root/sandbox.test ."
	$(GO) test -c -o "$$dir/root/sandbox.test" .
	echo "+ $(GO) test -c -o $$dir/cli/cli.test ./cmd/sandbox"
	$(GO) test -c -o "$$dir/cli/cli.test" ./cmd/sandbox
	echo "+ $(GO) build -o $$dir/sandbox ./cmd/sandbox"
	$(GO) build -o "$$dir/sandbox" ./cmd/sandbox
	echo "+ $(GO) test -c -o $$dir/sandboxtest/sandboxtest.test ./sandboxtest"
	$(GO) test -c -o "$$dir/sandboxtest/sandboxtest.test" ./sandboxtest
	echo "+ $(GO) test -c -o $$dir/image/image.test ./internal/image"
	$(GO) test -c -o "$$dir/image/image.test" ./internal/image
	echo "+ $(GO) test -c -o $$dir/service/service.test ./internal/service"
	$(GO) test -c -o "$$dir/service/service.test" ./internal/service
	if [ -d testdata ]; then cp -r testdata "$$dir/root/"; fi
	if [ -d cmd/sandbox/testdata ]; then cp -r cmd/sandbox/testdata "$$dir/cli/"; fi
	if [ -d sandboxtest/testdata ]; then cp -r sandboxtest/testdata "$$dir/sandboxtest/"; fi
	if ! id -u $(ROOTLESS_USER) >/dev/null 2>&1; then
		echo "+ useradd -m $(ROOTLESS_USER)"
		useradd -m $(ROOTLESS_USER)
	fi
	mkdir -m 700 "$$dir/tmp"
	chown $(ROOTLESS_USER): "$$dir/tmp"
	chmod -R a+rX "$$dir/root" "$$dir/cli" "$$dir/sandbox" "$$dir/sandboxtest" "$$dir/service" "$$dir/image"
	home=$$(getent passwd $(ROOTLESS_USER) | cut -d: -f6)
	as_user() {
		runuser -u $(ROOTLESS_USER) -- env HOME="$$home" USER=$(ROOTLESS_USER) TMPDIR="$$dir/tmp" \
			SANDBOX_CLI="$$dir/sandbox" "$$@"
	}
	echo "+ (cd $$dir/root && runuser -u $(ROOTLESS_USER) -- ./sandbox.test -test.count=1 -test.skip '$(CPYTHON_TEST)')"
	(cd "$$dir/root" && as_user ./sandbox.test -test.count=1 -test.timeout=10m -test.skip '$(CPYTHON_TEST)')
	echo "ok   root package as $(ROOTLESS_USER)"
	echo "+ (cd $$dir/cli && runuser -u $(ROOTLESS_USER) -- ./cli.test -test.count=1)"
	(cd "$$dir/cli" && as_user ./cli.test -test.count=1 -test.timeout=10m)
	echo "ok   cmd/sandbox as $(ROOTLESS_USER)"
	# sandboxtest builds its Go snippets with the go command, as the user.
	echo "+ (cd $$dir/sandboxtest && runuser -u $(ROOTLESS_USER) -- ./sandboxtest.test -test.count=1)"
	(cd "$$dir/sandboxtest" && as_user ./sandboxtest.test -test.count=1 -test.timeout=10m)
	echo "ok   sandboxtest as $(ROOTLESS_USER)"
	echo "+ (cd $$dir/service && SANDBOX_BIN=$$dir/sandbox runuser -u $(ROOTLESS_USER) -- ./service.test -test.count=1)"
	(cd "$$dir/service" && as_user env SANDBOX_BIN="$$dir/sandbox" ./service.test -test.count=1 -test.timeout=10m)
	echo "ok   internal/service (sandbox serve) as $(ROOTLESS_USER)"
	# The image store as a user who cannot make device nodes or chown.
	echo "+ (cd $$dir/image && runuser -u $(ROOTLESS_USER) -- ./image.test -test.count=1)"
	(cd "$$dir/image" && as_user ./image.test -test.count=1 -test.timeout=10m)
	echo "ok   internal/image as $(ROOTLESS_USER)"

# A Debian kernel booted by qemu under software emulation, so the tests also
# run on a pure cgroup v2 host (the CI machines are cgroup-hybrid): once as
# root, once as an unprivileged user with a delegated cgroup subtree.
# Installs qemu-system-x86 as root; the kernel and busybox are downloaded
# into a cache. VM_TESTS (a -test.run regex, "all" for every test) and
# VM_TIMEOUT (default 45m) tune it; vm/README.md has the rest.
test-vm:
	@echo "+ vm/run.sh"
	GO="$(GO)" vm/run.sh

# The manifests on a real Kubernetes; deploy/k8stest/README.md says what
# it builds and starts. Not part of make test: its first build alone takes
# longer than CI's time left.
test-k8s:
	@echo "+ deploy/k8stest/run.sh"
	GO="$(GO)" deploy/k8stest/run.sh

# The suite on a busy host: it counts only what it made, so it passes
# with other sandboxes running and other mounts coming and going. SUITE
# replaces make test in the clones; MOUNT_LOOP=0 leaves out the mounts.
test-busy:
	@echo "+ scripts/busy-host.sh"
	GO="$(GO)" scripts/busy-host.sh

# make test runs the short forms of these (1,000 runs, 12 kills).
SOAK_RUNS ?= 10000
FAULT_ROUNDS ?= 200
soak:
	@echo "+ SANDBOX_SOAK_RUNS=$(SOAK_RUNS) SANDBOX_FAULT_ROUNDS=$(FAULT_ROUNDS) $(GO) test -count=1 -v -timeout 60m -run '^(TestSoak|TestCallerKilledAtRandom)$$' ."
	SANDBOX_SOAK_RUNS=$(SOAK_RUNS) SANDBOX_FAULT_ROUNDS=$(FAULT_ROUNDS) $(GO) test -count=1 -v -timeout 60m \
		-run '^(TestSoak|TestCallerKilledAtRandom)$$' . | grep -v -E ': round [0-9]+ \((spawner|inprocess)\): killed'

# The root package's go benchmarks, briefly (BENCHTIME each), then the
# table of bench/table: fork+exec, bubblewrap and our cold and warm Runs,
# measured interleaved in one run; its last line is the ratios line.
# TABLE_FLAGS sizes the table (e.g. -n 50 -rounds 3; see -h).
BENCHTIME ?= 5x
TABLE_FLAGS ?=
bench:
	@echo "+ $(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) ."
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) .
	echo "+ $(GO) run ./bench/table $(TABLE_FLAGS)"
	$(GO) run ./bench/table $(TABLE_FLAGS)

# The cgroup drivers compared (bench/cgroupdrivers/README.md); CGROUPS_FLAGS=--vm for v2.
bench-cgroups:
	@echo "+ bench/cgroupdrivers/run.sh $(CGROUPS_FLAGS)"
	GO="$(GO)" bench/cgroupdrivers/run.sh $(CGROUPS_FLAGS)
