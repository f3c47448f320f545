package egress_test

import (
	"fmt"
	"log"
	"net"

	"github.com/fumehood/sandbox/internal/egress"
)

// The host side of a run in allow mode. Here the listener is an ordinary
// loopback one; in a run it is the socket the sandbox's init made inside
// the sandbox's network namespace (see the package documentation).
func ExampleProxy() {
	rules, err := egress.ParseRules([]string{"pypi.org", "*.pythonhosted.org"})
	if err != nil {
		log.Fatal(err) // names the bad entry
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	p := &egress.Proxy{Rules: rules}
	go p.Serve(l)

	// ... the program runs with HTTP_PROXY=http://<l.Addr()> ...

	p.Close() // ends every connection; the report is then complete
	for _, c := range p.Report() {
		fmt.Printf("%s %s:%d allowed=%v (%s) up=%d down=%d\n",
			c.Method, c.Host, c.Port, c.Allowed, c.Reason, c.BytesUp, c.BytesDown)
	}
	// Output:
}
