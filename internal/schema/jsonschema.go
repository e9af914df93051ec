package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// JSON Schema values are JSON already: decoding checks the body is one
// valid JSON value and hands it on byte for byte, so an unchanged payload
// re-encodes identically. Encoding validates the payload with
// santhosh-tekuri/jsonschema (pure Go, every draft from 4 to 2020-12,
// numbers kept as json.Number, errors with instance locations) and writes
// the header before the payload's own bytes.

// jsonSchemaBase is where the schema itself is registered with the
// compiler; references named by relative URLs resolve against it.
const jsonSchemaBase = "https://schema-registry.redrive.invalid/schemas/"

var englishPrinter = message.NewPrinter(language.English)

type refusingLoader struct{}

func (refusingLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("%s is not among the schema's references (remote schemas are never fetched)", u)
}

func compileJSONSchema(src *Source) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.UseLoader(refusingLoader{})
	base, _ := url.Parse(jsonSchemaBase)
	mainURL := fmt.Sprintf("%s%d.json", jsonSchemaBase, src.ID)
	var add func(refs []Reference) error
	seen := map[string]bool{}
	add = func(refs []Reference) error {
		for _, r := range refs {
			u, err := base.Parse(r.Name)
			if err != nil {
				return fmt.Errorf("reference %q: %w", r.Name, err)
			}
			if !seen[u.String()] {
				seen[u.String()] = true
				doc, err := jsonschema.UnmarshalJSON(strings.NewReader(r.Text))
				if err != nil {
					return fmt.Errorf("reference %q: %w", r.Name, err)
				}
				if err := c.AddResource(u.String(), doc); err != nil {
					return fmt.Errorf("reference %q: %w", r.Name, err)
				}
			}
			if err := add(r.References); err != nil {
				return err
			}
		}
		return nil
	}
	if err := add(src.References); err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(src.Text))
	if err != nil {
		return nil, err
	}
	if err := c.AddResource(mainURL, doc); err != nil {
		return nil, err
	}
	return c.Compile(mainURL)
}

// decodeJSONValue checks body is exactly one JSON value.
func decodeJSONValue(body []byte) ([]byte, error) {
	if !json.Valid(body) {
		return nil, fmt.Errorf("%w: the value is not valid JSON", ErrMismatch)
	}
	return body, nil
}

func (s *Schema) encodeJSON(dst, payload []byte) ([]byte, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return nil, &ValidationError{Path: "/", Expected: "valid JSON", Got: err.Error()}
	}
	if err := s.json.Validate(v); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return nil, jsonSchemaError(ve)
		}
		return nil, fmt.Errorf("validate payload: %w", err)
	}
	return append(dst, payload...), nil
}

// jsonSchemaError turns the validator's error tree into one field error:
// the first leaf, which names the deepest failing value.
func jsonSchemaError(ve *jsonschema.ValidationError) *ValidationError {
	leaf := ve
	for len(leaf.Causes) > 0 {
		leaf = leaf.Causes[0]
	}
	path := ""
	for _, tok := range leaf.InstanceLocation {
		path += "/" + escapePointer(tok)
	}
	msg := leaf.ErrorKind.LocalizedString(englishPrinter)
	return &ValidationError{Path: pathOrRoot(path), Expected: "to conform to the JSON schema: " + msg}
}
