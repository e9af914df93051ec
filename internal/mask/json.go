package mask

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// MaxDepth bounds how deeply nested a JSON document is walked: a deeper one
// is masked whole (Value, Record) or refused (JSON), so that a hostile
// document costs no more than its size.
const MaxDepth = 256

var (
	errSyntax = errors.New("mask: not JSON")
	errDepth  = fmt.Errorf("mask: nested deeper than %d", MaxDepth)
	// errEnd is the end of a prefix reached inside a token.
	errEnd = errors.New("mask: end of prefix")
)

// walker copies a JSON document to out, masking what the rules say. It
// reads one token at a time and copies each whole token once it has read
// it, so that a prefix (partial) stops before a token cut at its end.
type walker struct {
	in      []byte
	pos     int
	out     []byte
	rules   *Rules
	partial bool
	depth   int
	keys    []string // the object keys from the root to the value walked
	// index, when set, records where something was masked (Restore).
	index *node
	ptr   []string // every step from the root, array indexes too (with index)
}

// node is a position in a document masked for Restore: its children by
// object key or array index, and what was masked there.
type node struct {
	children map[string]*node
	masked   bool
	orig     []byte // the original value's bytes
	shown    []byte // what was shown instead
}

func (n *node) child(step string) *node {
	if n == nil {
		return nil
	}
	return n.children[step]
}

// record notes that the value at the walker's position, orig, was shown as shown.
func (w *walker) record(orig, shown []byte) {
	if w.index == nil {
		return
	}
	n := w.index
	for _, s := range w.ptr {
		if n.children == nil {
			n.children = map[string]*node{}
		}
		c := n.children[s]
		if c == nil {
			c = &node{}
			n.children[s] = c
		}
		n = c
	}
	n.masked, n.orig, n.shown = true, slices.Clone(orig), slices.Clone(shown)
}

func (w *walker) document() error {
	w.ws()
	err := w.value()
	if err == nil {
		w.ws()
		if w.pos < len(w.in) {
			err = errSyntax
		}
	}
	if errors.Is(err, errEnd) && w.partial {
		return nil
	}
	return err
}

// ws copies whitespace.
func (w *walker) ws() {
	for w.pos < len(w.in) {
		switch w.in[w.pos] {
		case ' ', '\t', '\n', '\r':
			w.out = append(w.out, w.in[w.pos])
			w.pos++
		default:
			return
		}
	}
}

// end is the error of input that ends where more was expected.
func (w *walker) end() error {
	if w.partial {
		return errEnd
	}
	return errSyntax
}

// pathMasked reports whether the value at w.keys is under a masked path.
func (w *walker) pathMasked() bool {
	for _, p := range w.rules.Paths {
		if len(p) == len(w.keys) && slices.Equal(p, w.keys) {
			return true
		}
	}
	return false
}

func (w *walker) value() error {
	if w.pos >= len(w.in) {
		return w.end()
	}
	if len(w.keys) > 0 && w.pathMasked() {
		end, err := skipValue(w.in, w.pos, w.depth, w.partial)
		if err != nil {
			return err
		}
		w.record(w.in[w.pos:end], markerJSON)
		w.out = append(w.out, markerJSON...)
		w.pos = end
		return nil
	}
	switch c := w.in[w.pos]; {
	case c == '{':
		return w.object()
	case c == '[':
		return w.array()
	case c == '"':
		end, err := scanString(w.in, w.pos)
		if err != nil {
			return w.tokenErr(err)
		}
		tok := w.in[w.pos:end]
		w.pos = end
		w.out = append(w.out, w.maskString(tok)...)
		return nil
	case c == '-' || c >= '0' && c <= '9':
		end, err := scanNumber(w.in, w.pos)
		if err != nil || end == len(w.in) && w.partial {
			// A number at the end of a prefix may have been cut.
			return w.tokenErr(cmpErr(err, errEnd))
		}
		tok := w.in[w.pos:end]
		w.pos = end
		if len(w.rules.Patterns) > 0 && w.rules.textMasked(tok) {
			w.record(tok, markerJSON)
			w.out = append(w.out, markerJSON...)
			return nil
		}
		w.out = append(w.out, tok...)
		return nil
	default:
		end, err := scanLiteral(w.in, w.pos)
		if err != nil {
			return w.tokenErr(err)
		}
		w.out = append(w.out, w.in[w.pos:end]...)
		w.pos = end
		return nil
	}
}

func cmpErr(err, or error) error {
	if err != nil {
		return err
	}
	return or
}

// tokenErr is the error of a token: the end of a prefix stays errEnd
// only in partial mode.
func (w *walker) tokenErr(err error) error {
	if errors.Is(err, errEnd) {
		return w.end()
	}
	return err
}

// maskString is a string token with what the patterns find in it masked.
func (w *walker) maskString(tok []byte) []byte {
	if len(w.rules.Patterns) == 0 {
		return tok
	}
	var s string
	if json.Unmarshal(tok, &s) != nil {
		return tok // scanned as a string token: cannot happen
	}
	if !w.rules.textMasked([]byte(s)) {
		return tok
	}
	shown := encodeString(w.rules.Text([]byte(s)))
	w.record(tok, shown)
	return shown
}

// encodeString writes s as a JSON string, without HTML escaping.
func encodeString(s []byte) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(string(s))
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func (w *walker) enter() error {
	w.depth++
	if w.depth > MaxDepth {
		return errDepth
	}
	w.out = append(w.out, w.in[w.pos])
	w.pos++
	return nil
}

func (w *walker) object() error {
	if err := w.enter(); err != nil {
		return err
	}
	w.ws()
	if w.pos < len(w.in) && w.in[w.pos] == '}' {
		w.out = append(w.out, '}')
		w.pos++
		w.depth--
		return nil
	}
	for {
		if w.pos >= len(w.in) {
			return w.end()
		}
		if w.in[w.pos] != '"' {
			return errSyntax
		}
		end, err := scanString(w.in, w.pos)
		if err != nil {
			return w.tokenErr(err)
		}
		tok := w.in[w.pos:end]
		var key string
		if json.Unmarshal(tok, &key) != nil {
			return errSyntax
		}
		w.pos = end
		// A key is data too ({"ann@example.com": …}): the patterns apply.
		if len(w.rules.Patterns) > 0 && w.rules.textMasked([]byte(key)) {
			w.out = append(w.out, encodeString(w.rules.Text([]byte(key)))...)
		} else {
			w.out = append(w.out, tok...)
		}
		w.ws()
		if w.pos >= len(w.in) {
			return w.end()
		}
		if w.in[w.pos] != ':' {
			return errSyntax
		}
		w.out = append(w.out, ':')
		w.pos++
		w.ws()
		w.keys = append(w.keys, key)
		if w.index != nil {
			w.ptr = append(w.ptr, key)
		}
		err = w.value()
		w.keys = w.keys[:len(w.keys)-1]
		if w.index != nil {
			w.ptr = w.ptr[:len(w.ptr)-1]
		}
		if err != nil {
			return err
		}
		if done, err := w.after('}'); done || err != nil {
			return err
		}
	}
}

func (w *walker) array() error {
	if err := w.enter(); err != nil {
		return err
	}
	w.ws()
	if w.pos < len(w.in) && w.in[w.pos] == ']' {
		w.out = append(w.out, ']')
		w.pos++
		w.depth--
		return nil
	}
	for i := 0; ; i++ {
		if w.index != nil {
			w.ptr = append(w.ptr, strconv.Itoa(i))
		}
		err := w.value()
		if w.index != nil {
			w.ptr = w.ptr[:len(w.ptr)-1]
		}
		if err != nil {
			return err
		}
		if done, err := w.after(']'); done || err != nil {
			return err
		}
	}
}

// scanString returns the end of the string token at pos (just past its
// closing quote).
func scanString(in []byte, pos int) (int, error) {
	i := pos + 1
	for i < len(in) {
		switch c := in[i]; {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if i+1 >= len(in) {
				return 0, errEnd
			}
			switch in[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(in) {
					return 0, errEnd
				}
				for _, h := range in[i+2 : i+6] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return 0, errSyntax
					}
				}
				i += 6
			default:
				return 0, errSyntax
			}
		case c < 0x20:
			return 0, errSyntax
		default:
			i++
		}
	}
	return 0, errEnd
}

// scanNumber returns the end of the number token at pos.
func scanNumber(in []byte, pos int) (int, error) {
	i := pos
	digits := func() int {
		n := 0
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(in) && in[i] == '-' {
		i++
	}
	if i >= len(in) {
		return 0, errEnd
	}
	if in[i] == '0' {
		i++
	} else if digits() == 0 {
		return 0, errSyntax
	}
	if i < len(in) && in[i] == '.' {
		i++
		if digits() == 0 {
			if i >= len(in) {
				return 0, errEnd
			}
			return 0, errSyntax
		}
	}
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		i++
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			i++
		}
		if digits() == 0 {
			if i >= len(in) {
				return 0, errEnd
			}
			return 0, errSyntax
		}
	}
	return i, nil
}

// scanLiteral returns the end of true, false or null at pos.
func scanLiteral(in []byte, pos int) (int, error) {
	for _, lit := range []string{"true", "false", "null"} {
		rest := in[pos:]
		if len(rest) >= len(lit) && string(rest[:len(lit)]) == lit {
			return pos + len(lit), nil
		}
		if len(rest) < len(lit) && string(rest) == lit[:len(rest)] {
			return 0, errEnd
		}
	}
	return 0, errSyntax
}

// skipValue returns the end of the value at pos, checking its syntax;
// depth is the nesting it starts at.
func skipValue(in []byte, pos, depth int, partial bool) (int, error) {
	w := &walker{in: in, pos: pos, depth: depth, rules: &Rules{}, partial: partial}
	if err := w.value(); err != nil {
		return 0, err
	}
	return w.pos, nil
}

// after reads what follows a member of an object or an array: a comma
// (another member follows) or its closer (done).
func (w *walker) after(closer byte) (done bool, err error) {
	w.ws()
	if w.pos >= len(w.in) {
		return true, w.end()
	}
	switch w.in[w.pos] {
	case ',':
		w.out = append(w.out, ',')
		w.pos++
		w.ws()
		return false, nil
	case closer:
		w.out = append(w.out, closer)
		w.pos++
		w.depth--
		return true, nil
	}
	return true, errSyntax
}
