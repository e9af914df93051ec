// Package api holds Redrive's API contracts as data: the OpenAPI document of
// the HTTP API and the JSON Schema of policy files. The Go code here only
// embeds them so the server can serve the document it is tested against.
package api

import _ "embed"

// OpenAPI is the OpenAPI 3.1 document of the HTTP API (YAML).
//
//go:embed openapi.yaml
var OpenAPI []byte
