package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// jkind is the kind of a JSON value.
type jkind uint8

const (
	jNull jkind = 1 << iota
	jBool
	jNumber
	jString
	jArray
	jObject
)

func (k jkind) String() string {
	var names []string
	for _, p := range []struct {
		k jkind
		n string
	}{{jNull, "null"}, {jBool, "boolean"}, {jNumber, "number"}, {jString, "string"}, {jArray, "array"}, {jObject, "object"}} {
		if k&p.k != 0 {
			names = append(names, p.n)
		}
	}
	return strings.Join(names, " or ")
}

// jval is a parsed JSON value that keeps what encoding/json's any loses:
// the order of object members and the exact text of numbers.
type jval struct {
	kind jkind
	b    bool
	s    string // string value, or a number's exact text
	arr  []jval
	obj  []jmember
}

type jmember struct {
	key string
	val jval
}

func (v *jval) get(key string) (*jval, bool) {
	for i := range v.obj {
		if v.obj[i].key == key {
			return &v.obj[i].val, true
		}
	}
	return nil, false
}

// maxJSONDepth bounds nesting of a payload we are asked to encode.
const maxJSONDepth = 512

// parseJSON parses one JSON value (and nothing after it).
func parseJSON(data []byte) (jval, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseJSONValue(dec, 0)
	if err != nil {
		return jval{}, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return jval{}, errors.New("invalid JSON: data after the value")
	}
	return v, nil
}

func parseJSONValue(dec *json.Decoder, depth int) (jval, error) {
	if depth > maxJSONDepth {
		return jval{}, fmt.Errorf("invalid JSON: nested deeper than %d", maxJSONDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return jval{}, fmt.Errorf("invalid JSON: %w", err)
	}
	switch t := tok.(type) {
	case nil:
		return jval{kind: jNull}, nil
	case bool:
		return jval{kind: jBool, b: t}, nil
	case json.Number:
		return jval{kind: jNumber, s: string(t)}, nil
	case string:
		return jval{kind: jString, s: t}, nil
	case json.Delim:
		switch t {
		case '[':
			v := jval{kind: jArray, arr: []jval{}}
			for dec.More() {
				e, err := parseJSONValue(dec, depth+1)
				if err != nil {
					return jval{}, err
				}
				v.arr = append(v.arr, e)
			}
			if _, err := dec.Token(); err != nil {
				return jval{}, fmt.Errorf("invalid JSON: %w", err)
			}
			return v, nil
		case '{':
			v := jval{kind: jObject, obj: []jmember{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return jval{}, fmt.Errorf("invalid JSON: %w", err)
				}
				key, _ := kt.(string)
				e, err := parseJSONValue(dec, depth+1)
				if err != nil {
					return jval{}, err
				}
				v.obj = append(v.obj, jmember{key: key, val: e})
			}
			if _, err := dec.Token(); err != nil {
				return jval{}, fmt.Errorf("invalid JSON: %w", err)
			}
			return v, nil
		}
	}
	return jval{}, fmt.Errorf("invalid JSON: unexpected %v", tok)
}

// appendJSONString appends s as a JSON string. It escapes only what JSON
// requires (no HTML escaping), so operators read what the record holds.
// s must be valid UTF-8.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendJSONFloat appends f as the shortest JSON number that parses back
// to the same bits at the given size, or as the strings "NaN",
// "Infinity" and "-Infinity", which JSON numbers cannot hold.
func appendJSONFloat(dst []byte, f float64, bits int) []byte {
	switch {
	case f != f:
		return append(dst, `"NaN"`...)
	case f > 0 && f*0.5 == f: // +Inf
		return append(dst, `"Infinity"`...)
	case f < 0 && f*0.5 == f:
		return append(dst, `"-Infinity"`...)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, bits)
}

// parseJSONFloat reads a float from a JSON number or one of the strings
// appendJSONFloat writes for non-finite values.
func parseJSONFloat(v *jval, bits int) (float64, bool) {
	switch v.kind {
	case jNumber:
		f, err := strconv.ParseFloat(v.s, bits)
		return f, err == nil
	case jString:
		switch v.s {
		case "NaN":
			return math.NaN(), true
		case "Infinity":
			return math.Inf(1), true
		case "-Infinity":
			return math.Inf(-1), true
		}
	}
	return 0, false
}

// validUTF8 reports whether b can be a JSON string without loss.
func validUTF8(b []byte) bool { return utf8.Valid(b) }
