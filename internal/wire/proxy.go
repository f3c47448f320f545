package wire

// The proxy channel of an *Egress run is a socket pair the caller
// makes for the run: it keeps one end, and the other goes to the init
// (through the spawner, untouched), which listens on 127.0.0.1:ProxyPort
// inside the run's network namespace and sends the listening socket back
// on it, before it execs the program:
//
//	caller                       spawner              init
//	Request + SCM_RIGHTS(…,   →  passes it on  →      listens on 127.0.0.1:ProxyPort
//	  the channel's child end)
//	                          ←──────────────────────  ProxyMark + SCM_RIGHTS(the listener),
//	                                                   then closes its end
//	serves the egress proxy on the listener: connections are accepted in
//	the run's namespace, and dialled from the caller's

// ProxyMark is the byte that carries the listening socket of a
// Egress run's egress proxy from its init, inside the run's network
// namespace, straight to the caller, as SCM_RIGHTS on the proxy channel.
const ProxyMark = 'P'
