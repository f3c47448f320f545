// Package apitest holds "sandbox serve" to its OpenAPI description,
// ../openapi.yaml, so that clients generated from the document work with
// the server. Its tests are the check:
//
//	cd internal/service/apitest && go test ./...
//
// They read the document with github.com/getkin/kin-openapi and check it
// is a valid OpenAPI 3 document; compare the routes the server's source
// registers on its mux with the document's paths, both ways; build the
// server and start it on loopback; send the requests of the document's
// examples, each checked against the document before it is sent; and
// validate every answer the real server gives (successes, refusals,
// streams) against the document, the status included.
//
// It is a module of its own so that the library's go.mod does not grow the
// validator and its dependencies.
package apitest
