package recipe

import (
	"os"
	"path"
	"slices"
	"strings"
)

// The sandbox's /etc: files it generates, and what it takes from the host
// (or from Options.Root). Both inits build it from the lists here.

// generatedEtc are the files of /etc the sandbox writes itself, each with
// the option that shapes it; a Bind over one is refused with that advice.
var generatedEtc = map[string]string{
	"/etc/passwd":        "it names the sandbox's own users (root, sandbox as SandboxUID, nobody); set HOME, USER or LOGNAME for the program through Options.Env",
	"/etc/group":         "it names the sandbox's own groups (root, sandbox as SandboxGID, nogroup); the host ids they map to are Options.HostUID and Options.HostGID",
	"/etc/hosts":         "it names loopback and Options.Hostname; reach hosts by name through an Options.Network of *Egress and its Allow",
	"/etc/hostname":      "it holds Options.Hostname; set that instead",
	"/etc/resolv.conf":   "names are resolved by the egress proxy (an Options.Network of *Egress, its Resolver), or by the host's resolv.conf with HostNetworkUnsafe",
	"/etc/nsswitch.conf": "it follows Options.Network; set that instead",
}

// HostEtc are the paths of the host (or of Options.Root) that describe
// the system without naming the host or holding its secrets, brought in
// read-only where they exist. A pattern matches names as path.Match does.
// Everything else of the host's /etc stays out: machine-id, shadow,
// gshadow, ssh keys, the host's passwd, group, hosts, hostname and
// resolv.conf, /etc/ssl/private, the package managers' and tools' own
// configuration (apt, pip.conf, npmrc, gitconfig, wgetrc), which may hold
// credentials or point at the host's mirrors and proxies. The package
// documentation lists the reason for each.
var HostEtc = []string{
	// Name and number tables of the C library's getservbyname,
	// getprotobyname, getrpcbyname and of ebtables.
	"/etc/services", "/etc/protocols", "/etc/rpc", "/etc/ethertypes",
	// getaddrinfo's address order and the resolver's host.conf options.
	"/etc/gai.conf", "/etc/host.conf",
	// File types by extension (Python's mimetypes, many web servers).
	"/etc/mime.types",
	// The time zone: localtime is a link into /usr/share/zoneinfo.
	"/etc/localtime", "/etc/timezone",
	// Which distribution this is, as pip, platform and installers read it.
	"/etc/os-release", "/etc/debian_version",
	// The dynamic linker's cache, and the alternatives links that
	// Debian's /usr/bin names point into.
	"/etc/ld.so.cache", "/etc/alternatives",
	// The mount table, a link into /proc: the sandbox's own mounts.
	"/etc/mtab",
	// readline's key bindings and fontconfig's configuration.
	"/etc/inputrc", "/etc/fonts",
	// Python's site customisation, which Debian keeps in /etc.
	"/etc/python3", "/etc/python3.*",
	// The Java runtime's configuration, which Debian keeps in /etc:
	// java.security (its TLS and crypto providers), logging, jvm.cfg.
	"/etc/java-*",
	// The OpenSSL configuration and the trust store, in the places of
	// Debian and Ubuntu, Alpine, RHEL and Fedora, and SUSE: certificates
	// only (never ssl/private, pki/tls/private or a subscription's keys).
	"/etc/ssl/openssl.cnf", "/etc/ssl/certs", "/etc/ssl/cert.pem", "/etc/ssl/ca-bundle.pem",
	"/etc/ca-certificates", "/etc/ca-certificates.conf",
	"/etc/pki/tls/openssl.cnf", "/etc/pki/tls/certs", "/etc/pki/tls/cert.pem", "/etc/pki/ca-trust",
	// SUSE's /etc/ssl/certs links here.
	"/var/lib/ca-certificates",
}

// trustBundles are the CA bundle files TLS clients read, where each system
// keeps them. With Options.TrustedCAs, each that exists in the sandbox
// (after its links) shows the store's certificates and the caller's.
var trustBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",                      // Debian, Ubuntu, Alpine, Arch; Go, curl, git, apt
	"/etc/pki/tls/certs/ca-bundle.crt",                        // RHEL, Fedora
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",       // RHEL, Fedora (what the above links to)
	"/etc/pki/ca-trust/extracted/openssl/ca-bundle.trust.crt", // RHEL's OpenSSL trust format
	"/etc/ssl/ca-bundle.pem",                                  // SUSE
	"/var/lib/ca-certificates/ca-bundle.pem",                  // SUSE
	"/etc/ssl/cert.pem",                                       // Alpine, the BSDs
	"/etc/pki/tls/cert.pem",                                   // RHEL's OpenSSL default
	"/etc/pki/tls/cacert.pem",                                 // older RHEL
}

// newTrustBundle is where Options.TrustedCAs goes when the store has no
// bundle to extend.
const newTrustBundle = "/etc/ssl/certs/ca-certificates.crt"

// MaxTrustBundle bounds a host bundle read to extend it, and
// Options.TrustedCAs: each extended copy lives in the run's root, a tmpfs
// of 4 MiB. Debian's bundle is about 220 KiB, RHEL's largest 600 KiB.
const MaxTrustBundle = 1 << 20

// etcKind is what one brought-in path is.
type etcKind int

const (
	etcRegular etcKind = iota + 1
	etcDir
	etcLink
)

// etcEntry is one path brought in from the host or a rootfs.
type etcEntry struct {
	path    string // inside the sandbox, absolute
	kind    etcKind
	link    string // a link's target, recreated as is
	content []byte // a regular file's bytes, written into the new root instead of bound; nil: bound
	stamp   fileStamp
}

// etcPaths expands HostEtc into the paths to look for, sorted, with
// names listed by readdir (a directory's names, nil if it has none), asked
// once per directory. With a rootfs, only paths in /etc are taken: it
// brings the rest itself. A pattern's wildcards are in its last element
// only.
func etcPaths(rootfs bool, readdir func(dir string) []string) []string {
	var out []string
	listed := map[string][]string{}
	for _, pat := range HostEtc {
		if rootfs && !strings.HasPrefix(pat, "/etc/") {
			continue
		}
		if !strings.ContainsAny(pat, "*?[") {
			out = append(out, pat)
			continue
		}
		dir, name := path.Split(pat)
		names, ok := listed[dir]
		if !ok {
			names = readdir(dir)
			listed[dir] = names
		}
		for _, n := range names {
			if ok, _ := path.Match(name, n); ok {
				out = append(out, dir+n)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// etcDirs are the directories HostEtc's paths lie in, each once.
func etcDirs() []string {
	var dirs []string
	for _, p := range HostEtc {
		if d := path.Dir(p); !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// mergeTrust is a bundle's content with the caller's certificates after it.
func mergeTrust(bundle, extra []byte) []byte {
	out := make([]byte, 0, len(bundle)+len(extra)+1)
	out = append(out, bundle...)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return append(out, extra...)
}

// TrustBundleIn is the bundle Node is pointed at (NODE_EXTRA_CA_CERTS):
// the first of trustBundles present beneath base ("" for the host), or
// where TrustedCAs goes when there is none; "" when the sandbox has none.
// Beneath a base (a rootfs, an image's root), links are followed only
// while they stay inside it: a link an image aims at a host file must not
// tell the sandbox whether that file exists. A bundle reached by an
// absolute link counts as absent.
func TrustBundleIn(base string, extra bool) string {
	stat := os.Stat
	if base != "" {
		root, err := os.OpenRoot(base)
		if err != nil {
			return ""
		}
		defer root.Close()
		stat = func(p string) (os.FileInfo, error) { return root.Stat(strings.TrimPrefix(p, "/")) }
	}
	for _, p := range trustBundles {
		if base != "" && !strings.HasPrefix(p, "/etc/") {
			continue
		}
		if st, err := stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	if extra {
		return newTrustBundle
	}
	return ""
}

// EtcGenerated says why target, a path in /etc, cannot be bound over, or
// "" if it can.
func EtcGenerated(target string) string {
	for p, why := range generatedEtc {
		if target == p || strings.HasPrefix(target, p+"/") {
			return path.Base(p) + " is generated by the sandbox: " + why
		}
	}
	return ""
}
