// Package sandbox runs untrusted programs on a Linux host in fresh,
// throw-away sandboxes built from Linux namespaces and a minimal read-only
// root, and hands back what they printed and how they ended.
//
// # Overview
//
// A [Sandbox] is made once from [Options] and is safe for concurrent use;
// each [Sandbox.Run] builds a new sandbox for one [Cmd], runs it, and tears
// everything down before it returns, except the files under /workspace,
// which the Sandbox's Runs share (see Sessions). Close a Sandbox when done. [Command] and [Cmd] mirror os/exec; a
// Cmd cannot be reused. A non-zero exit is data, not an error: the [Result]
// says how the run ended (an [Outcome]), with the exit code or signal, the
// captured output (capped at [Limits.Output] per stream, with the
// middle elided) and the time and memory used; a run that ctx's deadline
// or cancellation ended is a Result too, with Outcome [Timeout] or
// [Canceled] and the output written until then. Run returns an error only
// when the program could not be run as asked: the options were wrong
// ([ErrInvalidOption]), this host cannot provide a protection
// ([ErrNotSupported]), building the sandbox failed ([*SetupError], naming
// the step), the program was not found ([ErrNotFound]), or ctx ended
// before the sandbox was started. [Result.Err] turns every end but exit
// status 0 into an error. The package writes nothing of its own unless
// [Options.Logger] is set.
//
//	sb := sandbox.New(sandbox.Options{})
//	defer sb.Close()
//	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
//	defer cancel()
//	res, err := sb.Run(ctx, sandbox.Command("python3", "-c", "print(6*7)"))
//	if err != nil {
//		return err // could not run it
//	}
//	fmt.Printf("%s: %s", res.Outcome, res.Stdout) // exited: 42
//
// Every program sees: its own user, PID, mount, network (loopback only),
// IPC, UTS (hostname [DefaultHostname]) and cgroup namespaces; a root that
// is a read-only tmpfs holding read-only binds of the host's /usr, /bin,
// /sbin and /lib* (or of [RootDir], or of a container image's files
// with [Image] (as [Options.Root]): see Images), a generated /etc (see The
// sandbox's /etc), a new /proc with the sensitive paths masked as runc masks
// them, a minimal /dev (null, zero, full, random, urandom, tty, and a devpts
// of its own, so programs can open ptys through /dev/ptmx, 64 at most at
// once; the host's ptys are not in it), and
// size-capped tmpfs /tmp and /workspace (the working directory). It runs as
// uid/gid [SandboxUID] ("sandbox" in /etc/passwd) with no capabilities,
// no_new_privs set and RLIMIT_NOFILE of [Limits.OpenFiles]. Nothing of
// the host's environment is passed on.
//
// [Sandbox.Start] starts a program and returns a [Process] to wait for,
// signal or kill while it runs, with [Cmd.StdinPipe] to feed it; Run is
// Start then [Process.Wait]. The program is pid 1 of its sandbox, where
// the kernel drops a signal it has no handler for: [Process.Signal] takes
// the signal's default action then, as it would on the host.
//
// [Probe] reports which layers this host can provide; the cmd/sandbox
// command-line tool wraps the same API ("sandbox run", "sandbox probe").
//
// # Threat model and non-goals
//
// The program inside is assumed hostile and knowledgeable: it may try any
// system call, any file descriptor it can find, any path under /proc, and
// may try to outlive its sandbox. The caller, the Go program importing this
// package, is trusted; its options may be wrong but not malicious, and a
// wrong option is an error, never a silently weaker sandbox. Where a
// protection cannot be put in place, Run fails closed. The caller's own
// process is part of the host too: what it does on a run's behalf is
// bounded by constants (see "What a run can cost the caller").
//
// Non-goals: it is not a virtual machine. Every sandbox shares the host
// kernel, so a kernel bug reachable from an unprivileged user namespace can
// break out; the seccomp filter (below) narrows that surface but does not
// remove it. It does not keep the caller from exposing
// host files through [Options.Binds], [Options.Workspace] or
// [RootDir], nor protect the program from the host.
//
// # How it works
//
// Five processes take part, each with one job: the caller, the spawner,
// the sandbox's init, the program, and for a session's /workspace the
// workspace keeper.
//
// The caller (the program that imports this package) checks the Options,
// opens the run's stdio, and asks the spawner for a sandbox. By default
// the first Run starts the spawner: the caller's binary re-executed once,
// from a sealed in-memory copy, before it holds much of the caller's
// heap, so a start costs the same in a small and a large caller. Every Run
// asks it over a socket pair (passing the program's stdio with
// SCM_RIGHTS) to start one sandbox; it serves concurrent Runs
// concurrently, and one that dies is replaced by the next Run (the Runs
// it was serving fail with [ErrSpawner]; their sandboxes die with it).
// [InProcess] skips the spawner for short-lived callers such as
// the command-line tool.
//
// The spawner (or the InProcess caller) compiles the sandbox's recipe, for
// this configuration, into a plan of raw system calls, and clones the
// init with every namespace. The init is that clone, without a Go runtime
// of its own: it runs the plan (ids, mounts, pivot_root, hostname,
// loopback, rlimits, capabilities, the filter) and execs the program in
// its own place. The caller's binary never executes inside a sandbox: the
// init execs not the program itself but a tiny exec shim that execs it,
// so that a program whose "#!" line names /proc/self/exe or /proc/1/exe
// finds the shim there, which refuses to interpret anything.
//
// Importing this package installs an init function that takes over the
// process when it is one of the package's own re-executions: the
// environment variable _FUMEHOOD_SANDBOX_ROLE says which role (the spawner
// or the workspace keeper), and in those processes the host
// program's main never runs. Package inits of the program's other
// dependencies have already run by then, so keep them cheap. No extra
// wiring is needed: any binary that imports the package, a test binary
// included, can act as its own spawner.
//
// The workspace keeper, this binary re-executed into a mount namespace of
// its own, holds a session's /workspace between its runs (see Sessions
// below).
//
// Warm starts: with [Pool] the spawner keeps sandboxes prepared
// ahead (namespaces, cgroup, root, everything but the program) and a Run
// hands one its program and stdio; each serves one Run and is destroyed
// with it, and the pool refills in the background. Teardown the caller
// need not wait for, such as removing a run's emptied cgroup, happens
// after Run returns and is finished before [Sandbox.Close] returns.
//
// Each sandbox starts as an init process cloned into new user, PID, mount,
// network, IPC, UTS and cgroup namespaces, with one host uid/gid mapped to
// [SandboxUID]/[SandboxGID]. The init runs the plan made for its
// configuration before the clone. It builds the new root with the
// fd-based mount API (fsopen, fsmount, open_tree, move_mount,
// mount_setattr): every host source is opened first, then the tree is
// assembled on a tmpfs and pivot_root'ed into, and the old root is
// detached. It sets the hostname, brings up loopback (and, for
// [Egress], listens on [ProxyAddr]), sets rlimits, drops every
// capability, sets no_new_privs, loads the filter and finally execs the
// program in its own place, through the exec shim, so the program is
// pid 1 of the new PID namespace. When it exits, the kernel
// kills every other process of the sandbox. A failure before the exec comes
// back to the caller with its stage and errno as a [*SetupError], so
// errors.Is(err, unix.EPERM) works across the process boundary.
//
// # Images
//
// [Image] (as [Options.Root]) names a container image whose files take the place of
// the host's /usr, /bin and /lib*, exactly as [RootDir] does:
// read-only, with the sandbox's own /proc, /dev, /tmp, /workspace, the
// generated /etc (whose system files and trust store are the image's) and
// [Options.TrustedCAs] added to the image's bundles. References are a
// registry's ("docker.io/library/python:3.12-slim"; docker's credentials,
// or [Image.Credentials]) or, in skopeo's transport names,
// oci:DIR[:TAG], oci-archive:FILE[:TAG] and docker-archive:FILE. The
// image is pulled at the Sandbox's first Run into a content-addressed
// store on the host ([Image.Store], [ImageStoreDir]): layers fetched once
// and checked against their digests, unpacked once (set-id bits and
// device nodes dropped, names and links that leave the layer refused),
// and each image's root built of hard links to them. Later Sandboxes find
// it stored and start as fast as on the host's /usr. The Sandbox holds a
// lease on the root until Close, so pruning the store (sandbox images
// prune) never removes a root in use.
//
// The image's config gives the defaults: its Env under [Options.Env] and
// [Cmd.Env] (which win per variable; its PATH is where programs are looked
// up), and its WorkingDir when [Cmd.Dir] is empty (/workspace, still the
// writable session workspace, when it sets none). Its User is not applied:
// the program runs as [SandboxUID], unprivileged, whatever the image
// says, and every file of the image belongs to the store's owner and is
// readable by all (a root caller's sandbox maps to nobody). Its Entrypoint
// and Cmd are not run: the Cmd given to Run is. A pull that fails fails
// the Run with an error naming the image that matches one of
// [ErrImageNotFound], [ErrBadImageRef], [ErrBadImage], [ErrImagePlatform],
// [ErrImageTooLarge] and [ErrImageInsecure], and leaves nothing in the
// store; the next Run tries again.
//
// # The sandbox's /etc
//
// /etc is made for each sandbox. It holds files the sandbox writes itself:
// passwd and group (root, sandbox and nobody), hosts (loopback and
// [Options.Hostname]), hostname, nsswitch.conf (files only), and, with
// [HostNetworkUnsafe] alone, the host's resolv.conf. Of the host's /etc (or
// the rootfs's, with [RootDir]) it brings in, read-only and where
// they exist, the files that describe the system and hold nothing of the
// host's identity or secrets:
//
//   - services, protocols, rpc, ethertypes: the name and number tables
//     behind getservbyname, getprotobyname and getrpcbyname.
//   - gai.conf, host.conf: how getaddrinfo orders addresses and how the
//     resolver reads hosts.
//   - mime.types: file types by extension (Python's mimetypes, web servers).
//   - localtime (a link into /usr/share/zoneinfo), timezone: the time zone.
//   - os-release (a link into /usr/lib), debian_version: which distribution
//     this is, as pip, platform and installers read it.
//   - ld.so.cache, alternatives: the dynamic linker's cache, and the links
//     Debian's /usr/bin names point into.
//   - mtab: a link to /proc/mounts, the sandbox's own mounts.
//   - inputrc, fonts: readline's key bindings and fontconfig's setup.
//   - python3, python3.*: the site customisation Debian keeps there.
//   - java-*: the Java runtime's configuration (java.security, with its TLS
//     and crypto providers, logging, jvm.cfg), which Debian keeps there.
//   - the trust store: ssl/certs, ssl/openssl.cnf, ssl/cert.pem,
//     ssl/ca-bundle.pem, ca-certificates, ca-certificates.conf,
//     pki/tls/certs, pki/tls/cert.pem, pki/tls/openssl.cnf, pki/ca-trust,
//     and SUSE's /var/lib/ca-certificates (host only), which covers Debian,
//     Ubuntu, Alpine, RHEL, Fedora and SUSE. Public certificates only:
//     ssl/private, pki/tls/private and a subscription's keys stay out.
//
// Links are recreated as they are, never followed on the host: a link to
// something the sandbox lacks dangles. Everything else stays out, among it
// machine-id (which names the host), shadow and gshadow, ssh's keys, the
// host's own passwd, group, hosts and hostname, and the configuration of
// package managers and tools (apt, pip.conf, npmrc, gitconfig, wgetrc,
// profile, environment), which may hold credentials or point at the host's
// mirrors and proxies. A program that needs one gets it from [Options.Binds]:
// a bind into /etc works, read-only or writable, as anywhere else
// (`sandbox run --ro-bind /etc/apt` for apt), except over /etc itself and
// the files the sandbox generates, which are refused naming the option to
// set instead.
//
// TLS clients verify with that store and no environment of the caller's:
// curl, wget, git, apt, Python (urllib, ssl's default context, pip) and Go
// read the bundle /etc/ssl/certs/ca-certificates.crt (or their system's
// own); Node trusts only the certificates built into it, so the default
// environment sets NODE_EXTRA_CA_CERTS to the store's bundle where there is
// one (Options.Env or Cmd.Env may override it). [Options.TrustedCAs] adds
// the caller's certificates (a corporate or test CA) to every bundle.
//
// # Seccomp
//
// Every run has a seccomp filter, loaded by the init (its only thread)
// after no_new_privs and just before it execs the program, so the program
// and everything it starts are filtered and nothing of the setup is. The
// policy is [Options.Seccomp], by default [DefaultSeccompPolicy]: an
// allowlist of what shells, coreutils, interpreters, compilers and
// package managers use, refusing namespace creation, mounts, ptrace, bpf,
// perf_event_open, keyrings, userfaultfd, io_uring, module loading,
// kexec, reboot, clock setting, open_by_handle_at, unusual personalities,
// TIOCSTI/TIOCLINUX and socket families beyond unix, inet, inet6 and
// netlink-route (seccomp_default.go lists them with reasons). A refused
// syscall fails with EPERM; a number the policy has no name for fails with
// ENOSYS so programs fall back; syscalls of another architecture or the
// x32 ABI kill the process.
//
// Refusals are reported: [Result.Denials] names each refused syscall with a
// count. The policy's [ActNotify] actions make the kernel stop the syscall
// and queue it on the filter's notification fd, which the init hands to
// the process that started it (the spawner, or the caller with
// [InProcess]); a supervisor there answers each with the policy's
// errno. It never lets a syscall run and never reads the program's
// memory: the answer comes from running the filter itself over the number
// and arguments the kernel copied. With [SeccompPolicy.KillOnRefusal] the first
// refusal kills the run instead ([SeccompKilled], [Result.Violation]).
//
// The policy compiles to classic BPF in pure Go (internal/seccomp: the
// architecture check first, then a binary search over syscall numbers), so
// CGO_ENABLED=0 builds are filtered too; built with the tag libseccomp,
// the same policy compiles through libseccomp instead, and a differential
// test holds both to the same decision for every syscall. The default
// policy is compiled when the module is built (on amd64, without
// libseccomp) or once per process, a caller's once per [New].
// [github.com/fumehood/sandbox/seccompprofile] builds a policy from a
// runtime-spec value or a Docker profile, and exports one.
// [Unconfined] runs without a filter.
//
// # Network
//
// [Options.Network] chooses what a run can reach. Nil, the default, gives it a network namespace holding only loopback, up: its
// programs can talk to each other on 127.0.0.1, nothing leaves, and there
// is no DNS (/etc has no resolv.conf and nsswitch.conf names only files).
// Loopback addresses and abstract Unix sockets are the run's own, so a
// service listening on the host's 127.0.0.1 is out of reach.
//
// An [*Egress] adds one way out, an HTTP proxy at [ProxyAddr] that
// reaches only the hosts [Egress.Allow] allows:
//
//	sb := sandbox.New(sandbox.Options{
//		Network: &sandbox.Egress{Allow: []string{"pypi.org", "files.pythonhosted.org"}},
//	})
//	res, err := sb.Run(ctx, sandbox.Command("pip", "download", "requests"))
//	for _, c := range res.Connections { ... } // every attempt, allowed or not
//
// The init listens on ProxyAddr inside the run's namespace and hands the
// listening socket to the process that called Run, which serves the proxy
// on it and dials from its own namespace; no process of ours runs in the
// sandbox for it. HTTP_PROXY, HTTPS_PROXY, their lower-case forms and
// NO_PROXY point the program at it. CONNECT tunnels carry TLS untouched,
// plain http:// requests are forwarded. The run still has no DNS, so data
// cannot leave in the labels of a lookup: the proxy resolves a name only
// once the allowlist allowed it, checks every resolved address against the
// refused ranges (loopback, private, link-local with the metadata service
// at 169.254.169.254, unique-local, multicast, unspecified and the other
// special ranges) unless a range entry of the allowlist opens one, and
// every address of the caller's own interfaces unless an entry names
// exactly that address, and dials exactly the address it checked, so DNS
// rebinding does not get through. [Result.Connections] lists every attempt
// with its decision, reason and bytes each way, and every connection the
// run opened that never sent a request. If the proxy fails, its listener closes: the
// run loses its way out and gains no other.
//
// [HostNetworkUnsafe] shares the host's network namespace, loopback
// services, metadata service and abstract sockets included; it is for
// trusted code only.
//
// # Secrets
//
// [Egress.Secrets] keeps API keys and tokens out of the sandbox: the
// program holds a placeholder, and the egress proxy, in the caller's
// process, puts the real value in its place on the way out, only to the
// hosts the secret names:
//
//	sb := sandbox.New(sandbox.Options{Network: &sandbox.Egress{
//		Allow:   []string{"api.example.com"},
//		Secrets: []sandbox.Secret{{Name: "API_KEY", Value: key, Hosts: []string{"api.example.com"}}},
//	}})
//	// inside: curl -H "Authorization: Bearer $API_KEY" https://api.example.com/v1/...
//
// With the first run each secret gets a placeholder, "sandbox-secret-",
// its Name, "-" and 128 random bits in hex, the same for every run of the
// Sandbox, which the program's environment holds as Name. The proxy
// replaces the placeholder wherever it appears in the value of any
// request header sent to the secret's hosts, over plain HTTP and over
// HTTPS, which it terminates for those hosts only: a CONNECT to one is
// answered with TLS of the proxy's own (HTTP/1.1 by ALPN, one request per
// tunnel, which Result.Connections lists after the CONNECT), signed by a certificate authority made for the Sandbox at its
// first run (ECDSA P-256, in the caller's memory only, valid for 7 days,
// or a live sandbox's Options.Live.MaxLifetime where that is longer; a Sandbox
// that is not live makes a new one a day before it ends), and the proxy
// makes its own TLS connection to the real server, verified against the
// system's roots and [Options.TrustedCAs] as any client would. The
// authority's certificate is added to the sandbox's trust store as
// TrustedCAs are; it is constrained (critical name constraints) to the
// secrets' host names (and, as DNS name constraints work, names beneath
// them) and no IP address, and the proxy signs a leaf only for the host a
// CONNECT names, and only for a TLS handshake that asks for that host.
// CONNECTs to every other host stay untouched tunnels. [Sandbox.Close]
// drops the authority's key; a new Sandbox has a new authority.
//
// A request that carries a placeholder (in a header or its target) to a
// host its secret is not bound to is refused with 403 and listed in
// [Result.Connections] with a reason naming the secret by Name (a live
// sandbox's calls have no Connections: its one proxy serves them all).
// Where the proxy cannot see, inside TLS to a host no secret is bound to, the
// program can send a placeholder anywhere the allowlist lets it go; that
// leaks only the placeholder, which is worth nothing outside the
// sandbox's proxy. Only headers are rewritten: a placeholder in a URL or
// a body goes out as it is.
//
// The value never reaches the sandbox: requests to a secret's hosts ask
// for an unencoded response (Accept-Encoding: identity; a response that
// names any other content coding, on any Content-Encoding line, is
// refused with 502), and every value is replaced by its placeholder in
// the status line, the header names and values and the body of their
// responses (the longer value whole where one holds another; a scrubbed
// body is re-framed chunked). Those requests lose the fields by which a
// front end could route them elsewhere than their Host (Forwarded,
// X-Forwarded-*, X-Original-*, X-Rewrite-URL, X-Host). A host
// that hands the value back transformed (base64, split, inside a
// compressed file) is beyond what the scrubber can recognise; bind a
// secret only to hosts you trust with it. The value is never put in a Result, error or log.
// Terminating TLS costs the caller: each terminated tunnel's handshakes
// are charged to the run's proxy CPU budget, and it holds at most about
// 160 KiB more than a plain connection (egress.MaxInterceptMemory; about
// 19 MiB in all at the proxy's 64 connections).
//
// # Sessions
//
// A Sandbox is a session: successive Runs share its /workspace, and
// nothing else. By default that workspace is a tmpfs capped at
// [SessionWorkspace.Size] for all turns together, held by a small keeper
// process the session starts at its first Run or file operation: the
// binary re-executed into a mount namespace of its own (and, for a caller
// that is not root, a user namespace mapping only the caller's ids). Each
// Run's init receives a detached clone of the workspace mount (open_tree)
// and attaches it at /workspace; the keeper's mounts exist nowhere else, so
// when it exits, at [Sandbox.Close] or when the caller dies, they are gone.
//
// The host reads and writes the workspace without running anything:
// [Sandbox.WriteFile], [Sandbox.ReadFile], [Sandbox.ReadDir],
// [Sandbox.Stat], [Sandbox.MkdirAll], [Sandbox.RemoveAll], and trees as tar
// streams with [Sandbox.ExtractTar] and [Sandbox.WriteTar]. The program may
// have planted symlinks and ".." tricks; every path is resolved beneath
// the workspace as if it were "/" (openat2 with RESOLVE_IN_ROOT, or a
// component-by-component walk with O_NOFOLLOW where openat2 is refused),
// names that climb out are refused with [ErrOutsideWorkspace], writes
// replace the final name rather than follow it, and a FIFO cannot hang a
// read. A name that is the workspace itself or above it ("..",
// "a/../..", "/workspace") is refused with [ErrOutsideWorkspace] by every
// call that would remove or replace it.
//
// What the program left cannot make these calls cost the caller more than
// the tree's own size: at any depth (a chain of 30,000 directories is
// allowed) each holds at most eight descriptors at once, and memory
// for one path, a small frame per level and the listings of the
// directories on it. [Sandbox.WriteTar] writes a file with many hard
// links once (the other names as tar hard links), a sparse file as its
// data (GNU's PAX sparse format, which GNU tar and archive/tar read), no
// entry name longer than [MaxTarPath] bytes (it stops with an error
// matching syscall.ENAMETOOLONG: a chain of n directories would otherwise
// be a tar of n² bytes), and no more file content than
// [SessionWorkspace.Size]. Snapshot layers count against
// [SessionWorkspace.Size]: a full workspace stays full however many
// snapshots are taken.
//
// [Sandbox.Snapshot], [Sandbox.Restore] and [Sandbox.Reset] (back to empty,
// or to a copy of [SessionWorkspace.From]) copy nothing: the workspace is
// an overlay of read-only layers under a layer that takes the changes, each
// a tmpfs; a snapshot freezes the changes as a layer, a restore puts a
// fresh layer on a snapshot's stack. Restoring a 100 MB, 10,000-file
// workspace takes a few milliseconds. Where the kernel cannot mount an
// overlay in a user namespace (tmpfs has user xattrs from Linux 6.6), an
// unprivileged caller's workspace is one tmpfs and snapshots are copies,
// about a second per 100 MB. They wait for Runs in flight; a Run sees one
// workspace from start to end.
//
// What a run changed: with [SessionWorkspace.TrackChanges] each Run's
// [Result.Changes] lists the workspace paths it added, modified and
// deleted, sorted by path, at most [MaxChanges] of them (the rest counted
// in ChangesDropped), and [Sandbox.Changes] lists what differs between a
// snapshot, or the initial content, and now. The keeper records the
// workspace as a Run starts and compares it when the Run ends. Where the
// workspace is layered it records only the layer that takes changes,
// which holds all that differs from the stack beneath: what lies beneath
// a snapshot costs nothing per Run, and what lies in that layer about 5
// µs per file and Run here; a flat workspace is recorded whole. Entries
// are compared by inode, size, mode, modification time and inode change
// time, which no program can set; a file whose ctime falls within the
// file system's clock tick before the record is hashed too, so a second
// write in that tick is not missed. Runs of one session share its
// workspace, so a Run's Changes are what changed while it ran, by
// anyone: concurrent Runs and file operations included. The keeper holds
// a record of about 128 bytes and the path per recorded entry for each
// Run in flight, at most 32 MiB a record: a workspace past that (a
// chain of thousands of directories has paths of its depth squared
// bytes) gets no list, ChangesDropped -1, and its Runs run as ever. A
// host directory (Options.Workspace) has neither a keeper nor snapshots:
// New refuses TrackChanges with it, and Changes returns an error
// matching [ErrNotSupported].
//
// [Options.Workspace] makes the workspace a host directory instead, kept
// after Close (the command-line tool's --workspace); it has no size cap
// but [Limits.FileSize] per file ([DefaultMaxFileSize] unless set),
// and no snapshots. [FreshWorkspace]
// gives each Run an empty workspace of its own and starts no keeper, for
// unrelated programs run through one Sandbox.
//
// # Live sandboxes
//
// With [Options.Live], the Runs of a Sandbox share more than the
// workspace: one running sandbox, its namespaces, root, /tmp, /workspace
// and processes, from the first call to [Sandbox.Close],
// [Live.IdleTimeout] or [Live.MaxLifetime]. A process a call leaves
// running (a server started in the background, a Python kernel started
// with [Sandbox.Start]) keeps running; Run returns when the process it
// started ends, and its Result is that process's. [Sandbox.Processes]
// lists what runs, [Sandbox.Signal] signals it by its pid inside, and
// [Sandbox.DialContext] connects from the host to a listener in the
// sandbox's own network namespace (its loopback, or a Unix socket in it):
// nothing of the sandbox is exposed on the host's network.
//
//	sb := sandbox.New(sandbox.Options{Live: &sandbox.Live{}})
//	defer sb.Close()
//	sb.Run(ctx, sandbox.Command("sh", "-c", "python3 -m http.server 8000 >/tmp/log 2>&1 &"))
//	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
//		return sb.DialContext(ctx, "tcp", "127.0.0.1:8000")
//	}}}
//
// The running sandbox's init is the exec shim in a mode of its own: it
// execs nothing, waits, and, as its PID namespace's init, reaps the
// orphans. Each call enters the sandbox as a new process, which hostile
// code already inside had time to prepare for. The spawner clones a
// forker, which joins the sandbox's cgroup, then all of its init's
// namespaces at once (setns of a pidfd), and forks into its PID namespace;
// the forker has no pid there, and nothing inside can name it. The fork,
// the entrant, has a copy of the spawner's memory, never a share of it,
// although sharing would save about 0.8 ms a call: it has a pid where
// hostile code runs, and a flaw past the dumpable check should reach a
// throw-away copy, not the spawner. Its first steps raise its
// oom_score_adj (below) and make it non-dumpable (so /proc/PID/mem, fd,
// environ and ptrace need a capability over the host's user namespace);
// it becomes the sandbox user with no capability,
// no_new_privs and the filter, with no descriptor but its stdio and two
// close-on-exec ones, before the exec shim's exec makes it dumpable. Its
// working directory and program are resolved from the sandbox's root. The
// sandbox's cgroup limits bound everything alive in it together, and a
// call that cannot start for the pids limit says so.
//
// Every process a call starts there, and what it starts, has an
// oom_score_adj of 1000, above the init's (the caller's own, 0 as a
// rule): at the memory limit the OOM killer takes them, not the init,
// one at a time (on cgroup v2 too, where a one-shot run ends whole).
// Should the init end anyway (killed from outside, by the OOM killer
// where files in /tmp hold the memory, which no kill frees, or with its
// spawner), everything in the sandbox ends with it, the Sandbox closes as
// Close would, and every later call fails with an error matching
// [ErrClosed] that says why. An OOM kill of a process left in the
// background between calls is counted in the next call's
// [Result.OOMKills].
//
// Two things follow, by design, from the calls and the init sharing one
// sandbox user. Code inside can write the memory of the sandbox's pid 1,
// the init (through /proc/1/mem): it gains nothing, since the init holds
// no descriptor, secret or privilege the code lacks, and at worst ends
// the sandbox. And a process an earlier call left running can read a later call's environment, [Cmd.Env]
// included, in /proc/PID/environ once that call's program has exec'd:
// credentials belong in [Egress.Secrets], which the egress proxy adds to
// requests and the sandbox never holds, not in the Env of a live call.
//
// A call's output is read until its process has ended and, for what it
// left running, [Sandbox.Run] waits a tenth of a second more: a
// background process that still holds the call's stdout and stderr then
// finds them closed (EPIPE). Start background processes with their output
// redirected, or with [Sandbox.Start], whose [Process] reads its output
// for as long as it runs. [Sandbox.Snapshot], [Sandbox.Restore] and
// [Sandbox.Reset] end the running sandbox and every process in it first,
// so that nothing writes to a workspace that is being frozen or replaced;
// the next call starts a new one on the workspace as they left it; they
// do not wait for processes that run on. An idle timeout (no call in
// progress, a Wait for a process counting as one) or the maximum lifetime
// closes the Sandbox: its later calls fail with an error matching
// [ErrExpired].
//
// # Audit trail
//
// [Options.Audit] takes a [log/slog.Handler] that receives every event of
// the Sandbox, in order; for JSON lines, give it
// slog.NewJSONHandler(w, nil). Each event is a record at slog.LevelInfo
// whose message says its kind (the Audit* constants) and whose attributes
// say the rest. Every event has "sandbox", an id drawn at random for the
// Sandbox, and all but "audit dropped" have "run", the run's id (the one
// [Options.Logger]'s run events carry). A record's time is when the event
// happened.
//
//	message          when                                attributes besides sandbox and run
//	"run start"      a Run or Start begins               path, argv, dir, live, network, egress,
//	                                                     limits.memory, limits.cpus, limits.pids,
//	                                                     limits.output (as asked, defaults applied),
//	                                                     timeout (left of ctx's deadline, if it has one)
//	"connection"     an attempt through the egress       host, port, method, decision ("allowed" or
//	                 proxy ended (one still open: when   "refused"), reason, addr, status, bytes_up,
//	                 the run ended it)                   bytes_down, started, duration, error
//	"denial"         the filter refused a syscall with   syscall, errno, error (its text), pid (inside
//	                 ActNotify (see Seccomp)             the sandbox; 0 if it was gone)
//	"exec"           a process of the run executed a     path (as the process's memory held it),
//	                 program (Options.Audit.Exec)         pid (inside the sandbox), syscall ("execve"
//	                                                     or "execveat"), dirfd (execveat's)
//	"change"         the run changed a workspace path    path, change ("added", "modified",
//	                 (SessionWorkspace.TrackChanges)              "deleted"), size, mode
//	"run end"        the run is over (or failed to       started, duration, outcome, exit_code,
//	                 start: then error alone)            signal, violation, wall, user, system,
//	                                                     memory_peak, pooled, limits.NAME.value,
//	                                                     .enforced and .by (as Result.Limits),
//	                                                     denials, connections, changes, execs (how
//	                                                     many happened; execs with AuditExec),
//	                                                     denials_dropped, connections_dropped,
//	                                                     changes_dropped, execs_dropped (how many
//	                                                     of those have no event of their own),
//	                                                     audit_dropped (the run's events the queue
//	                                                     dropped), error
//	"live start"     a live sandbox starts (Options.     as run start, without path, argv, dir
//	                 Live), at the call that needs it;
//	                 its connections carry its run id
//	"live end"       the live sandbox ended              as run end
//	"audit dropped"  the queue was full                  count (events dropped since the last one)
//
// Each call that enters a live sandbox is a run of its own, with its own
// start, refusals, execs and end. Events are queued as they happen:
// connections by the egress proxy in the caller's process as each attempt
// ends; refusals and execs by the run's seccomp supervisor in the spawner,
// which sends them to the caller at once, ahead of the run's end. Each
// source's events keep their order; between the two, events a moment
// apart may arrive the other way round, and each record's time, which is
// when it happened, puts them in order. Changes are listed when the run
// has ended, just before its run end event.
//
// Programs executed are recorded only with [Audit.Exec]: the
// filter hands each execve and execveat to the supervisor, which reads
// the path from the process's memory, checks that the call still waits
// (so that the pid it read from was the caller's), and lets it run
// (SECCOMP_USER_NOTIF_FLAG_CONTINUE, Linux 5.5). An attempt whose path
// names no file is not recorded: a shell searching PATH tries each
// directory in turn. The path is a record of what was asked, not proof
// of what ran: it is read before the exec, and another thread of a
// hostile program can change that memory before the kernel reads it, so
// the record can name another path than the program that ran. Reading
// /proc/PID/exe after the exec would not lie, but the supervisor learns
// nothing after it lets the call go, and a process may exec again or
// exit before anything looks; a tracer (ptrace's exec event) could, at a
// cost to every run's syscalls. The cost, about 0.3 ms an exec here, is
// why it is not on by default.
//
// The program cannot reach or alter the trail: the records are made and
// handed over by the caller's process, and nothing of the handler or what
// it writes to is in any sandbox. What a program chooses (a host it asks
// the proxy for, a file name, its arguments) is only ever an attribute's
// value, never a message, so a handler that escapes values, as
// slog.JSONHandler does, writes it as one string: a program cannot forge
// an event.
//
// Nothing is lost silently, and nothing waits for the handler. Events go
// into a queue of [AuditQueue] records per Sandbox that one goroutine of
// its own hands to the handler; a run, its proxy and its supervisor never
// wait for room. Past the queue's bound events are dropped and counted;
// an "audit dropped" event with the count follows as soon as the handler
// takes events again, and each run end says how many of that run's
// events were dropped. The queue's last places are kept for run start
// and run end events, so a flood of one run's connections does not cost
// the record of the runs. Per run, connections are listed up to 1,000 as
// [Result.Connections] is, refusals and execs up to 1,000 each, and
// changes up to [MaxChanges]; the run end event counts the rest. The
// spawner holds at most 256 of a run's events waiting to be sent; more
// are counted as not listed. What the trail costs the caller is bounded
// likewise: the queue's records take about 1 KiB each beyond the text
// they share with the Results, the text a program chooses is clipped (a
// host to 256 bytes, an exec's path to 512), and the supervisor's work for
// an audited exec is a few system calls, far less than the exec costs the
// run. [Sandbox.Close] waits
// up to [AuditFlushTimeout] for the handler to take what is queued; events
// a handler stuck past it has not taken reach it when it returns.
//
// # What a run can cost the caller
//
// A run may use up its own limits; the process that called Run does work
// for it (the egress proxy, capturing output, the host-side workspace
// calls), and each of those is bounded by a constant, whatever the
// program does:
//
//   - The egress proxy of a [Egress] run holds at most about 9 MiB
//     (egress.MaxProxyMemory: 64 connections at once, each at most 96 KiB,
//     2 MiB of read buffers shared among them, a report of at most 1,000
//     attempts of about 1 KiB each) and 129 descriptors, with two
//     goroutines a connection. Request and response headers are limited to
//     32 KiB and 128 fields, checked before anything is parsed. Its CPU
//     time for the run is at most about 0.5 s plus 10% of the run's CPU
//     limit ([Limits.CPUs]) over the run's wall time: past that, it reads
//     from the run only as fast as that allows (a 1-CPU run's tunnel then
//     moves about 28 MB/s). Everything it held is released when the run
//     ends. With [Egress.Secrets], a tunnel it terminates holds at most
//     160 KiB more, about 19 MiB in all (egress.MaxSecretsProxyMemory),
//     and its handshakes are charged to the same CPU time.
//   - Output: at most [Limits.Output] bytes a stream
//     ([DefaultOutputLimit]).
//   - The workspace calls: a bounded number of descriptors at any depth,
//     memory for one path, and no more tar than the workspace holds
//     (see Sessions).
//   - The command line is checked against [MaxCommandLine] and
//     [MaxArgString] before anything starts.
//
// The spawner and the keeper are the caller's too: the spawner holds a
// run's messages (each bounded by the socket that carries them), and the
// keeper holds the workspace's tmpfs layers, capped by
// [SessionWorkspace.Size] together with its snapshots (where snapshots
// are copies, each copy has that cap of its own, and the caller decides
// how many to take).
//
// # Requirements
//
//   - Linux 5.12 or newer (mount_setattr).
//   - Unprivileged user namespaces: user.max_user_namespaces above zero,
//     and on Debian-patched kernels kernel.unprivileged_userns_clone=1.
//   - On Ubuntu 23.10 and newer, AppArmor restricts unprivileged user
//     namespaces (kernel.apparmor_restrict_unprivileged_userns=1); either
//     set it to 0 or give the calling binary an AppArmor profile that
//     allows "userns".
//   - When the caller is root, the sandbox maps to host uid/gid 65534
//     (nobody) unless [Options.HostUID] and [Options.HostGID] say
//     otherwise, so a [Options.Workspace] directory or a writable [Bind]
//     must be writable by that uid; [New] refuses one it cannot write, and
//     a Workspace that does not exist, naming the uid and the fix. A
//     caller that is not root maps its own ids, gid 0 too where that is
//     its group. A root caller needs CAP_SETUID, CAP_SETGID and
//     CAP_SETFCAP (a container's root has them by default).
//   - [Limits.Memory] of at least [MinMemory], what the sandbox's own
//     init needs to build it.
//   - In a container: a seccomp profile that allows creating namespaces
//     and mounting (docker --security-opt seccomp=unconfined), and an
//     unmasked /proc (docker --security-opt systempaths=unconfined, a
//     pod's procMount: Unmasked), since the kernel refuses a sandbox its
//     own /proc beside the runtime's masks; deploy/README.md has the rest.
//
// [Probe] reports which layers this host can provide to the caller it runs
// as; its report's first line ([ProbeReport.Summary]) says whether a Run
// with the default Options works, and where only best-effort limits can,
// the two fixes. When a required layer is missing, Run's error matches
// [ErrNotSupported] and is an [*UnsupportedError] that starts with how to
// enable it, then says what is missing.
//
// # Degradation
//
// None yet: every layer is required. When the host cannot provide one,
// Run refuses with an [*UnsupportedError] naming it rather than run a
// weaker sandbox. A later version may offer an explicit, per-layer policy
// for optional layers, reported in the Result.
//
// # Limitations
//
//   - Resource limits need a cgroup this process may write: root, or a
//     delegated cgroup v2 subtree. On a cgroup v1 host an unprivileged
//     caller has none; Run then refuses unless [Limits.Policy] is
//     [BestEffortLimits], where rlimits stand in and the CPU share is not
//     limited ([Result.Limits] says so).
//   - RLIMIT_FSIZE ([Limits.FileSize]) bounds each file a run writes in
//     a host Workspace or writable Bind, not their total; a quota on the
//     host filesystem bounds that. The program starts with SIGXFSZ
//     ignored, so a write past the bound fails with EFBIG.
//   - A denied syscall costs a round trip to the supervisor (the kernel
//     stops the caller until it is answered), a few microseconds, so a
//     program that calls a refused syscall in a tight loop runs slower
//     than it would get EPERM from the kernel. [ActErrno] avoids the trip
//     for refusals that need no report.
//   - When [Cmd.Stdin] is an io.Reader other than an *os.File, the goroutine
//     copying it into the sandbox is not waited for: Run returns when the
//     sandbox ends even if the Reader is still blocked, and that goroutine
//     ends only when the Reader returns. An *os.File is read only while
//     the run lasts (Run polls it, and reads only what is there), so
//     nothing of the caller's later input is taken.
//   - The program never holds a descriptor of the caller's: its stdin,
//     stdout and stderr are pipes Run copies, or with [Cmd.Terminal] a pty
//     of the sandbox's own devpts. Whatever it does to them (termios,
//     O_NONBLOCK, the line discipline, flow control, TIOCEXCL, the window
//     size) stays in the sandbox. The copy costs the caller a goroutine
//     and a 32 KiB buffer per stream.
//   - A command line is bounded on every kind of run alike: each string of
//     [Cmd.Args], [Cmd.Env] and [Options.Env] at [MaxArgString] bytes
//     (execve's own bound), and argv and the whole environment together
//     at [MaxCommandLine] bytes (256 KiB), each string counted with its
//     NUL. Run checks both before it starts anything and answers an
//     [*OptionError] naming the field, the size and the bound. A command
//     line whose strings are mostly control bytes or <, > and & takes up
//     to six times its size in the run's configuration, which the spawner
//     receives in one message of at most 1 MiB (less for an unprivileged
//     caller: twice net.core.wmem_max); one that does not fit fails
//     with [ErrInvalidOption] too, before the run's sandbox starts.
//   - The program is pid 1 of its PID namespace: signals it sends itself
//     without a handler are ignored, and orphans are reaped only when it
//     exits.
//
// # Multithreading
//
// Go programs are multithreaded, and some process state is per thread. The
// sandbox's init is a clone of one thread, with no other, so its
// per-thread state (capabilities, no_new_privs, the filter) is the
// program's when it execs. The caller needs no
// care: namespaces are created by cloning a new process, never by changing
// a thread of the caller, so Run may be called from any goroutine without
// runtime.LockOSThread. (With [InProcess], as with os/exec's
// Pdeathsig, not from a goroutine that locked its thread and then returns:
// the thread's exit kills the sandbox.) A [Sandbox] is safe for
// concurrent use by many goroutines; each Run has its own namespaces,
// filesystem and pipes, and one spawner serves all of them.
package sandbox
