//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fumehood/sandbox/internal/recipe"
	"golang.org/x/sys/unix"
)

// The sandbox's /etc: what it generates, what it takes from the host, and
// what it keeps out.

// etcWant is what /etc inside should list: the generated files and, of
// the host's, those that describe the system. Written out here rather
// than taken from recipe.HostEtc, so that a name added there by mistake fails.
func etcWant(t *testing.T) []string {
	t.Helper()
	want := []string{"group", "hostname", "hosts", "nsswitch.conf", "passwd"}
	for _, pat := range []string{"services", "protocols", "rpc", "ethertypes", "gai.conf", "host.conf", "mime.types",
		"localtime", "timezone", "os-release", "debian_version", "ld.so.cache", "alternatives", "mtab", "inputrc",
		"fonts", "python3", "python3.*", "java-*", "ca-certificates", "ca-certificates.conf"} {
		m, _ := filepath.Glob("/etc/" + pat)
		for _, p := range m {
			if _, err := os.Lstat(p); err == nil {
				want = append(want, filepath.Base(p))
			}
		}
	}
	// ssl and pki are made for what is taken from inside them.
	for _, dir := range []string{"ssl", "pki"} {
		m, _ := filepath.Glob("/etc/" + dir + "/*")
		if dir == "pki" {
			m, _ = filepath.Glob("/etc/pki/*/*")
		}
		for _, p := range m {
			if b := filepath.Base(p); b != "private" && (strings.Contains(p, "cert") || strings.Contains(p, "openssl") ||
				strings.Contains(p, "ca-") || strings.Contains(p, "trust")) {
				want = append(want, dir)
				break
			}
		}
	}
	slices.Sort(want)
	return slices.Compact(want)
}

func TestEtcHoldsWhatProgramsRead(t *testing.T) {
	requireSandbox(t)
	want := etcWant(t)
	out := sh(t, Options{}, `ls -A /etc; echo --; ls -A /etc/ssl 2>/dev/null; echo --
		for p in /etc/machine-id /etc/shadow /etc/gshadow /etc/ssh /etc/ssl/private /etc/pki/tls/private /etc/npmrc /etc/pip.conf \
			/etc/gitconfig /etc/apt /etc/resolv.conf /etc/sudoers /etc/subuid /etc/environment /etc/profile; do
			test -e "$p" && echo "visible $p"; done
		echo --
		/usr/bin/python3 -c 'import socket; print(socket.getservbyname("http", "tcp"), socket.getprotobyname("tcp"), socket.getservbyport(443))'
		getent services ssh; getent protocols udp | cut -d' ' -f1`)
	parts := strings.Split(out, "--\n")
	if len(parts) != 4 {
		t.Fatalf("unexpected output:\n%s", out)
	}
	if got := strings.Fields(parts[0]); !slices.Equal(got, want) {
		t.Errorf("/etc holds %q\nwant only %q", got, want)
	}
	if _, err := os.Stat("/etc/ssl/private"); err == nil && strings.Contains(parts[1], "private") {
		t.Errorf("/etc/ssl inside holds the host's private directory: %q", parts[1])
	}
	if parts[2] != "" {
		t.Errorf("host secrets or configuration visible inside:\n%s", parts[2])
	}
	if _, err := os.Stat("/etc/services"); err != nil {
		t.Skip("the host has no /etc/services to look names up in")
	}
	fields := strings.Fields(parts[3])
	if len(fields) < 5 || fields[0] != "80" || fields[1] != "6" || fields[2] != "https" || fields[3] != "ssh" || fields[len(fields)-1] != "udp" {
		t.Errorf("looking up services and protocols inside: %q, want 80 6 https, ssh ..., udp", parts[3])
	}
}

func TestEtcBinds(t *testing.T) {
	requireSandbox(t)
	data := sharedTempDir(t)
	if err := os.WriteFile(filepath.Join(data, "conf"), []byte("bound\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A host directory of /etc at its own place, as apt needs it; a
	// file bound over one /etc takes from the host; a writable one.
	binds := []Bind{{Source: data, Target: "/etc/myapp"}, {Source: filepath.Join(data, "conf"), Target: "/etc/services"},
		{Source: data, Target: "/etc/rw", Writable: true}}
	script := `cat /etc/myapp/conf /etc/services; touch /etc/myapp/x 2>/dev/null && echo wrote-ro; touch /etc/rw/y && echo wrote-rw`
	wantOut := "bound\nbound\nwrote-rw\n"
	if _, err := os.Stat("/etc/apt/sources.list.d"); err == nil {
		binds = append(binds, Bind{Source: "/etc/apt"})
		script += `; test -d /etc/apt/sources.list.d && echo apt`
		wantOut += "apt\n"
	}
	spawned, inProc, errS, errI := runBothLaunchers(t, Options{Binds: binds}, func() *Cmd { return Command("/bin/sh", "-c", script) })
	if errS != nil || errI != nil {
		t.Fatalf("spawned: %v; in process: %v", errS, errI)
	}
	for i, r := range []*Result{spawned, inProc} {
		if string(r.Stdout) != wantOut {
			t.Errorf("%s: stdout %q, stderr %q; want %q", launcherName[i], r.Stdout, r.Stderr, wantOut)
		}
	}
	if _, err := os.Stat(filepath.Join(data, "y")); err != nil {
		t.Errorf("the writable bind in /etc did not reach the host: %v", err)
	}

	// The files the sandbox generates stay its own, and the refusal names
	// the option that shapes each.
	for target, option := range map[string]string{"/etc/passwd": "Options.Env", "/etc/group": "Options.HostGID",
		"/etc/hosts": "*Egress", "/etc/hostname": "Options.Hostname", "/etc/resolv.conf": "Options.Network",
		"/etc/nsswitch.conf": "Options.Network", "/etc": "/etc", "/etc/hosts/x": "*Egress"} {
		for _, writable := range []bool{false, true} {
			err := New(Options{Binds: []Bind{{Source: data, Target: target, Writable: writable}}}).Err()
			oe, ok := errors.AsType[*OptionError](err)
			if !ok || oe.Option != "Options.Binds[0].Target" || !strings.Contains(err.Error(), option) {
				t.Errorf("bind over %s: %v; want an OptionError on Options.Binds[0].Target naming %s", target, err, option)
			}
		}
	}
}

func TestPtys(t *testing.T) {
	requireSandbox(t)
	requirePrograms(t, "python3", "script")
	// A pty of the host's, which must stay out of sight.
	master, _ := openPty(t)
	n, err := unix.IoctlGetUint32(master, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("host pty /dev/pts/%d", n)
	script := `ls -A /dev/pts | tr '\n' ' '; echo
		/usr/bin/python3 -c '
import os, pty
m, s = pty.openpty()
print(os.ttyname(s))
os.write(m, b"ping\n")
print(os.read(s, 64))
print(sorted(os.listdir("/dev/pts")))
m2, s2 = os.openpty()
print(os.ttyname(s2), os.stat(os.ttyname(s2)).st_gid)
'
		script -qc tty /dev/null
		/usr/bin/python3 -c '
import os
fds = []
try:
    while len(fds) < 500:
        fds.append(os.openpty())
except OSError as e:
    print(len(fds), e.errno)
'`
	spawned, inProc, errS, errI := runBothLaunchers(t, Options{}, func() *Cmd { return Command("/bin/sh", "-c", script) })
	if errS != nil || errI != nil {
		t.Fatalf("spawned: %v; in process: %v", errS, errI)
	}
	// At most recipe.MaxPtys at once: the host's pool of ptys is shared.
	want := "ptmx \n/dev/pts/0\nb'ping\\n'\n['0', 'ptmx']\n/dev/pts/1 1000\n/dev/pts/0\r\n" + fmt.Sprintf("%d %d\n", recipe.MaxPtys, unix.ENOSPC)
	for i, r := range []*Result{spawned, inProc} {
		if !r.Success() || string(r.Stdout) != want {
			t.Errorf("%s: %v, stdout %q, stderr %q; want %q", launcherName[i], r.Err(), r.Stdout, r.Stderr, want)
		}
		if len(r.Denials) != 0 {
			t.Errorf("%s: the default filter refused %v", launcherName[i], r.Denials)
		}
	}
}
