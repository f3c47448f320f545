// Package egress is the host-side proxy through which a sandbox in "allow"
// network mode reaches the hosts its allowlist names, and nothing else.
//
// # Overview
//
// A sandbox runs in its own network namespace holding only loopback. In
// allow mode the sandbox's init creates a listening TCP socket on
// 127.0.0.1:<port> inside that namespace and hands the listening file
// descriptor to the host process, which serves a [Proxy] on it: accepted
// connections come from inside the sandbox, while the proxy dials out from
// the host's namespace. The program finds the proxy through
// HTTP_PROXY/HTTPS_PROXY (and their lower-case forms). The proxy speaks
// HTTP/1.1: CONNECT host:port opens a tunnel (TLS passes through
// untouched, but to the hosts of secrets: see Secrets), and absolute-form
// plain HTTP requests (GET http://host/path) are forwarded. Every attempt is recorded
// with its decision and byte counts ([Proxy.Report]).
//
//	rules, err := egress.ParseRules([]string{"pypi.org", "*.pythonhosted.org"})
//	p := &egress.Proxy{Rules: rules, CPUs: 1} // CPUs: the sandbox's CPU limit
//	go p.Serve(listener)      // the listener handed out of the sandbox
//	... run the program ...
//	p.Close()                 // ends every connection
//	report := p.Report()      // complete once Close returned
//
// # Why the proxy resolves names
//
// The sandbox has no DNS: no resolver is reachable from its namespace, so
// its programs cannot resolve anything, and they need not, since proxy
// clients send the host name to the proxy. This closes the channel through
// which every domain-allowlist sandbox leaks: data encoded in DNS labels
// (secret.attacker.example) leaves through the host's resolver even when
// the connection that follows is refused. Here the proxy resolves a name
// only after the rules allowed it, so a name off the list never reaches
// any resolver. (A wildcard rule does let the program choose labels under
// its suffix, whose queries reach that domain's name servers; that domain
// is trusted by the rule, and could be sent the same data over HTTP.)
// Names are looked up rooted (with a trailing dot), so the host's search
// domains are never appended.
//
// # Why it dials the address it checked
//
// A name on the allowlist can still resolve to an address the sandbox
// must never reach: loopback (the host's own services), private networks,
// link-local (the cloud metadata service at 169.254.169.254, which hands
// out credentials), and so on, whether by mistake or because its owner is
// hostile and answers with such addresses (DNS rebinding). So every
// resolved address is checked, and the proxy dials exactly the checked
// address as a literal: there is no second lookup whose answer could
// differ from the first. Addresses in refused ranges are skipped; a name
// that resolves only to refused addresses is refused.
//
// Refused (see refusedRanges in addr.go): 0.0.0.0/8, loopback 127.0.0.0/8
// and ::1, private 10/8, 172.16/12, 192.168/16, shared/CGNAT 100.64/10,
// link-local 169.254/16 and fe80::/10 with the metadata addresses
// (169.254.169.254, 169.254.170.2, 100.100.100.200, fd00:ec2::254) as
// ranges of their own, unique-local fc00::/7, site-local fec0::/10,
// multicast, broadcast, unspecified, the reserved, documentation and
// benchmarking ranges, IPv4-compatible ::/96, SIIT ::ffff:0:0:0/96, Teredo
// 2001::/32, local-use NAT64 64:ff9b:1::/48 and discard-only 100::/64.
// IPv4-mapped addresses (::ffff:127.0.0.1) are checked as the IPv4 address
// they are. NAT64 addresses (64:ff9b::/96) and 6to4 addresses (2002::/16)
// carry an IPv4 address that a gateway or relay would forward to, so they
// are refused when that IPv4 address is (64:ff9b::a9fe:a9fe is the
// metadata service seen through NAT64), and allowed otherwise, since on
// IPv6-only hosts NAT64 is how public IPv4 hosts are reached.
//
// The host's own addresses are refused too, beyond loopback: every
// address on the interfaces of the network namespace the proxy dials from
// (listed at most a second before; addresses change), since a service of
// the host listening on all addresses answers on each of them. The
// reason given is "an address of this host". Such an address opens only
// with a CIDR rule for exactly it (192.0.2.7 or 192.0.2.7/32), as the
// metadata service's does: a rule that opens the private network the
// host is on does not open the host. Loopback is left to its range (a
// rule inside 127.0.0.0/8 opens it). If the addresses cannot be listed,
// every address is refused.
//
// A request for a literal IP address is checked the same way, and must
// also be covered by a CIDR rule: name rules never cover IP literals. A
// CIDR rule opens a refused range only if it lies inside that range (see
// [Rules]): a caller who must reach 10.1.2.3 says 10.1.2.0/24 or
// 10.1.2.3, and 0.0.0.0/0 opens nothing refused. There is deliberately no
// "allow private" switch beside the rules.
//
// # Failure closes
//
// A refusal is answered 403 with a one-line reason, a name that cannot be
// resolved or an upstream that cannot be reached 502 (504 on a timeout),
// and the connection to the sandbox is closed after each. Once relaying,
// any error on either side closes both; a clean end of one direction of a
// tunnel is passed on as a half-close. A connection idle in both
// directions for [Proxy.IdleTimeout] is closed, and one that sends no
// request in time is answered 408 and closed (see Limits). Nothing the
// proxy fails at widens what the sandbox can reach: the worst case is a
// closed connection.
//
// # CPU
//
// The proxy runs in the process that serves it, and a sandbox decides how
// much work it does: header parsing in particular costs the proxy far
// more than it costs the sandbox to send (a request with a 250 KiB header
// of tiny fields is about 40 ms of the proxy's CPU). So with
// [Proxy.CPUs] set to the sandbox's CPU limit, the proxy keeps a work
// budget: a token bucket of CPU time, starting with and holding at most
// [CPUBurst], refilled at [CPUShare] of that limit, and charged for each
// accepted connection, each request, each byte of request header, each
// byte relayed either way and each read or write on the sandbox's side,
// at costs measured on an x86-64 host. When it is empty the proxy stops
// accepting the sandbox's connections and reading from it until about
// 100 ms of refill has accumulated; the sandbox's writes block meanwhile.
// Over a run of d seconds limited to c CPUs the proxy's CPU time for it
// is then about CPUBurst + CPUShare*c*d (0.5 s + 10% of the limit; the
// costs are estimates, and the tests allow twice that). A run within the
// burst (a package install, a clone: about 140 MB relayed, or a thousand
// ordinary requests) is not slowed; past it, a run limited to 1 CPU gets
// about 28 MB/s through tunnels. Close ends every wait at once.
//
// # Limits
//
// The proxy runs in its caller's process, so nothing a sandbox sends may
// make that process hold more than a fixed amount: at the defaults, one
// Proxy holds at most [MaxProxyMemory] bytes (about 9 MiB) and
// [MaxProxyFDs] descriptors (2 x DefaultMaxConns + 1), whatever its
// connections send. The parts:
//
//   - Connections: at most MaxConns ([DefaultMaxConns], 64) are served at
//     once; more are closed as soon as they are accepted, and recorded.
//     Each costs at most [MaxConnMemory] (96 KiB) besides the buffers it
//     borrows (its goroutines, two for a tunnel; its state; a header
//     being parsed and what came after it), and two descriptors: its own
//     and one upstream.
//   - Headers: a request header, and an upstream's response header, may
//     have at most 32 KiB (maxHeaderBytes) and 128 fields
//     (maxHeaderFields: lines after the first), checked on the raw bytes
//     as they arrive, before anything parses them (a parser allocates for
//     each field); a secret's host's response header must fit once its
//     values are replaced with placeholders too. A larger request header
//     is answered 431, a larger response header 502; both are recorded.
//   - Buffers: data is read into 32 KiB buffers borrowed from a budget of
//     64 per Proxy (maxBuffers: 2 MiB). A connection takes one only once
//     there is data to read, waiting for data holding none, and gives it
//     back once the data was passed on (a tunnel whose read filled the
//     buffer keeps it for the next read); one in the middle of a header
//     holds one until the header ends or times out. When every buffer is
//     taken, connections wait for one, and what the sandbox sends waits
//     in its sockets' kernel buffers: the proxy never allocates more.
//   - Time: a connection must send its first request header within 30 s
//     of being accepted (firstRequestTimeout, or IdleTimeout if that is
//     shorter); otherwise it is answered 408, closed and recorded. A
//     later request's header must be complete within 30 s of its first
//     byte. A connection idle both ways for IdleTimeout is closed.
//   - The report keeps at most ReportLimit ([DefaultReportLimit], 1,000)
//     attempts, each at most [MaxRecordBytes] (about 1 KiB: the text the
//     sandbox chooses is clipped); later ones are only counted (Dropped):
//     about 1 MiB.
//
// Every connection the sandbox opens to the proxy is recorded, including
// one that never sent a request: closed by the sandbox, timed out, or
// ended by Close (Method ""; Reason says which). After Close nothing of
// the Proxy's connections stays reachable but its report; the buffers go
// back to a pool shared by all proxies, which the garbage collector
// empties when they are not used.
//
// # Secrets
//
// [Proxy.Secrets] are values the sandbox never holds: it holds each one's
// placeholder, and the proxy puts the value in its place in the header
// values of requests to the secret's hosts (names, matched as Rules
// match them). A plain HTTP request is rewritten as it is forwarded. A
// CONNECT to a secret's host is terminated: the proxy dials and checks as
// for any CONNECT, completes TLS with the server (verified against
// [Proxy.UpstreamRoots], ALPN http/1.1), answers 200, then completes the
// sandbox's handshake with a leaf of [Proxy.Authority] for exactly the
// CONNECT's host (a handshake asking for another name gets none), and
// serves one HTTP/1.1 request inside through the same bounded code as
// plain forwarding; the response says Connection: close. The report has
// the CONNECT (its bytes are the TLS records) and, as an attempt of its
// own, the request inside (its bytes are the plain HTTP). The Authority's
// certificate is name-constrained (critical) to the secrets' names and
// excludes every IP address (a DNS constraint also admits the names
// beneath it: the Authority itself signs none of those unless a secret's
// rule matches them); it signs a leaf for a host only when a
// CONNECT to it arrives, and keeps at most 64.
//
// A request carrying a placeholder (in a header, or its target) to a host
// its secret is not bound to is refused with 403, its record's Reason
// naming the secret (never its value). Requests to a secret's host ask
// for Accept-Encoding: identity, and lose the fields by which a front end
// could route them elsewhere than their forced Host (Forwarded,
// X-Forwarded-*, X-Original-*, X-Rewrite-URL, X-Host,
// X-HTTP-Host-Override). Their responses have every secret's value
// replaced by its placeholder in the status line, header names and values
// and body, by one rule: at the first place a value begins, the longest
// value beginning there (so "id:password" is replaced whole where "id" is
// a secret too). The header is scrubbed before it is parsed (names in any
// case), so no error quoting it holds a value, escaped or not; one with a
// folded field line (obs-fold) is refused with 502. The body is streamed
// with the last len(value)-1 bytes of each piece held back (and re-framed
// chunked, or until the close for HTTP/1.0). A response that names a
// content coding but identity (on any Content-Encoding line, in any list)
// or a transfer coding but chunked (or any in HTTP/1.0) is refused with
// 502. A server that returns the value transformed (base64, say) defeats
// the scrubber. Record texts are scrubbed too.
//
// Interception costs the proxy's process, within the bounds: each
// terminated tunnel's two handshakes (handshakeCost, about 1.2 ms
// measured) and each new leaf (leafCost) are charged to the CPU budget
// before they are done, and each byte of TLS records on the sandbox's
// side (tlsByteCost) besides the relay's cost; a tunnel holds at most
// [MaxInterceptMemory] (160 KiB: two TLS connections' state and record
// buffers, a 32 KiB read buffer of its own, so it never waits holding one
// of the Proxy's, its request's headers and the bytes held back while
// scrubbing) beyond MaxConnMemory, and no more descriptors. A Proxy with
// secrets holds at most [MaxSecretsProxyMemory] (about 19 MiB) at the
// defaults.
//
// The proxy does not see inside TLS but to the hosts of secrets: a tunnel
// to another allowed name reaches that name's addresses, but what the
// TLS session then asks for (SNI, the Host header) is not checked, so on
// a shared front end (a CDN) the program may reach other sites served
// from the same addresses ("domain fronting"); and a placeholder sent
// inside it is not seen, which leaks only the placeholder, worth nothing
// outside the proxy. Plain HTTP is forwarded one request per upstream connection,
// without protocol upgrades, 1xx interim responses or trailers; programs
// that need WebSockets or HTTP/2 use CONNECT. Only TCP is relayed: no UDP,
// so no QUIC (HTTP/3 clients fall back to TCP).
package egress
