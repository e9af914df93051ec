package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/labstack/echo/v4"
	"go.yaml.in/yaml/v3"

	"github.com/redrive/redrive/api"
)

// OpenAPIJSON returns the embedded OpenAPI document as JSON.
var OpenAPIJSON = sync.OnceValues(func() ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(api.OpenAPI, &doc); err != nil {
		return nil, fmt.Errorf("parse openapi.yaml: %w", err)
	}
	return json.Marshal(doc)
})

// openAPI serves the OpenAPI document; it needs no key.
func (s *Server) openAPI(c echo.Context) error {
	b, err := OpenAPIJSON()
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, b)
}
