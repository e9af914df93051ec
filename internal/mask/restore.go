package mask

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
)

// EditError says that an edited document changed masked content in part:
// the value at Pointer holds the marker but is not what was shown, so what
// the caller meant cannot be told.
type EditError struct {
	// Pointer is the value's JSON Pointer in the edited document.
	Pointer string
}

func (e *EditError) Error() string {
	return "the value at " + e.Pointer + " is masked (" + Marker + "): send it back as shown to keep it, " +
		"or replace it whole with a value without " + Marker
}

// Restore puts back, in an edited copy of base, what masking hid from the
// editor: every value of edited that is where base had a masked value
// (same object keys and array indexes) and is still as it was shown is
// replaced by base's original bytes. A masked value replaced whole by one
// without the marker is the editor's to change, and stays. A value holding
// the marker that is not as shown is an *EditError. What is not restored
// is copied byte for byte.
//
// base and edited are JSON; when base is not, or masks nothing, edited is
// returned as it is.
func (r *Rules) Restore(edited, base []byte) ([]byte, error) {
	if !r.MasksValue() || len(base) == 0 {
		return edited, nil
	}
	idx := &node{}
	w := &walker{in: base, rules: r, index: idx, out: make([]byte, 0, len(base))}
	if w.document() != nil || (idx.children == nil && !idx.masked) {
		return edited, nil
	}
	rs := &restorer{in: edited, out: make([]byte, 0, len(edited))}
	rs.ws()
	if err := rs.value(idx); err != nil {
		return nil, err
	}
	rs.ws()
	if rs.pos != len(edited) {
		return nil, errSyntax
	}
	return rs.out, nil
}

// restorer copies an edited document, restoring masked values (Restore).
type restorer struct {
	in    []byte
	pos   int
	out   []byte
	depth int
	ptr   []string
}

func (rs *restorer) ws() {
	for rs.pos < len(rs.in) && strings.IndexByte(" \t\n\r", rs.in[rs.pos]) >= 0 {
		rs.out = append(rs.out, rs.in[rs.pos])
		rs.pos++
	}
}

func (rs *restorer) pointer() string {
	var b strings.Builder
	for _, s := range rs.ptr {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(s))
	}
	return b.String()
}

func (rs *restorer) value(n *node) error {
	if rs.pos >= len(rs.in) {
		return errSyntax
	}
	if n != nil && n.masked {
		end, err := skipValue(rs.in, rs.pos, rs.depth, false)
		if err != nil {
			return err
		}
		tok := rs.in[rs.pos:end]
		rs.pos = end
		switch {
		case sameJSON(tok, n.shown):
			rs.out = append(rs.out, n.orig...)
		case bytes.Contains(tok, []byte(Marker)):
			return &EditError{Pointer: rs.pointer()}
		default:
			rs.out = append(rs.out, tok...)
		}
		return nil
	}
	c := rs.in[rs.pos]
	if (c != '{' && c != '[') || n == nil {
		end, err := skipValue(rs.in, rs.pos, rs.depth, false)
		if err != nil {
			return err
		}
		rs.out = append(rs.out, rs.in[rs.pos:end]...)
		rs.pos = end
		return nil
	}
	rs.depth++
	if rs.depth > MaxDepth {
		return errDepth
	}
	rs.out = append(rs.out, c)
	rs.pos++
	closer := byte('}')
	if c == '[' {
		closer = ']'
	}
	rs.ws()
	if rs.pos < len(rs.in) && rs.in[rs.pos] == closer {
		rs.out = append(rs.out, closer)
		rs.pos++
		rs.depth--
		return nil
	}
	for i := 0; ; i++ {
		step := strconv.Itoa(i)
		if c == '{' {
			end, err := scanString(rs.in, rs.pos)
			if err != nil {
				return errSyntax
			}
			tok := rs.in[rs.pos:end]
			if json.Unmarshal(tok, &step) != nil {
				return errSyntax
			}
			rs.out = append(rs.out, tok...)
			rs.pos = end
			rs.ws()
			if rs.pos >= len(rs.in) || rs.in[rs.pos] != ':' {
				return errSyntax
			}
			rs.out = append(rs.out, ':')
			rs.pos++
			rs.ws()
		}
		rs.ptr = append(rs.ptr, step)
		err := rs.value(n.child(step))
		rs.ptr = rs.ptr[:len(rs.ptr)-1]
		if err != nil {
			return err
		}
		rs.ws()
		if rs.pos >= len(rs.in) {
			return errSyntax
		}
		switch rs.in[rs.pos] {
		case ',':
			rs.out = append(rs.out, ',')
			rs.pos++
			rs.ws()
		case closer:
			rs.out = append(rs.out, closer)
			rs.pos++
			rs.depth--
			return nil
		default:
			return errSyntax
		}
	}
}

// sameJSON reports whether two JSON values are equal (numbers by their
// text, strings by their decoded content).
func sameJSON(a, b []byte) bool {
	var va, vb any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	if da.Decode(&va) != nil || db.Decode(&vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}
