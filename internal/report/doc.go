// Package report holds the shapes a run reports about itself that more
// than one process writes: the Limits and Denials the launcher sends in
// its Exit (internal/wire carries them as they are), and the Connections
// the caller's egress proxy records. The sandbox package hands them back
// in its Result under the same types, so that each is defined, documented
// and serialised once. It imports nothing of the sandbox's own.
//
// Each type serialises itself in the JSON the command-line tool, the MCP
// server and the HTTP service write: snake_case names, durations as
// integer nanoseconds with an "_ns" suffix, sizes in bytes with "_bytes".
package report
