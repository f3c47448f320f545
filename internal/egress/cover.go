package egress

import (
	"fmt"
	"strings"
)

// Uncovered returns why some host other allows is not allowed by r, or ""
// when r allows every name and port other does. other must hold names
// only; a range in it is reported. A wildcard of other is covered by a
// wildcard of r over the same or a parent domain, never by exact names.
func (r *Rules) Uncovered(other *Rules) string {
	if len(other.nets) > 0 {
		n := other.nets[0]
		return fmt.Sprintf("%q is an address range; only host names can be given", n.entry)
	}
	for _, n := range other.names {
		for _, pr := range n.ports {
			for port := int(pr.lo); port <= int(pr.hi); port++ {
				if !r.coversName(n, port) {
					return fmt.Sprintf("%q is not allowed by the allowlist on port %d", n.entry, port)
				}
			}
		}
	}
	return ""
}

// coversName says whether a name rule of r allows everything n allows on
// port.
func (r *Rules) coversName(n nameRule, port int) bool {
	if !n.wildcard {
		m, _ := r.matchName(n.name, port)
		return m != nil
	}
	for _, w := range r.names {
		if w.wildcard && w.ports.has(port) && (w.name == n.name || strings.HasSuffix(n.name, "."+w.name)) {
			return true
		}
	}
	return false
}
