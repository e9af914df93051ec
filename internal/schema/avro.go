package schema

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/hamba/avro/v2"
)

// Avro values are walked by this file's own binary reader and writer over
// the schema hamba/avro parsed, rather than through hamba's generic
// Unmarshal/Marshal: its generic form wraps union values in maps keyed by
// type name, turns decimals into *big.Rat and timestamps into time.Time,
// and its writer splits arrays into blocks of 100 where Confluent's Java
// serializer writes one block. Walking the binary ourselves gives the
// natural JSON directly, exact numbers, and byte-identical re-encoding.

// maxAvroDepth bounds nesting while walking (recursive schemas such as a
// linked list could otherwise recurse as deep as hostile bytes ask).
const maxAvroDepth = 256

func compileAvro(src *Source) (avro.Schema, error) {
	cache := &avro.SchemaCache{} // never hamba's global cache: names differ by id
	var addRefs func(refs []Reference) error
	addRefs = func(refs []Reference) error {
		for _, r := range refs {
			if err := addRefs(r.References); err != nil {
				return err
			}
			if _, err := avro.ParseWithCache(r.Text, "", cache); err != nil {
				return fmt.Errorf("reference %q (subject %q version %d): %w", r.Name, r.Subject, r.Version, err)
			}
		}
		return nil
	}
	if err := addRefs(src.References); err != nil {
		return nil, err
	}
	return avro.ParseWithCache(src.Text, "", cache)
}

// ---- decoding ----

type avroReader struct {
	b     []byte
	pos   int
	items int // budget of array/map items left, against zero-size items
	depth int
}

var errAvroShort = errors.New("unexpected end of data")

func (r *avroReader) long() (int64, error) {
	var u uint64
	for shift := uint(0); shift < 70; shift += 7 {
		if r.pos >= len(r.b) {
			return 0, errAvroShort
		}
		c := r.b[r.pos]
		r.pos++
		if shift == 63 && c > 1 {
			return 0, errors.New("varint overflows 64 bits")
		}
		u |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), nil
		}
	}
	return 0, errors.New("varint overflows 64 bits")
}

func (r *avroReader) int() (int32, error) {
	v, err := r.long()
	if err != nil {
		return 0, err
	}
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, fmt.Errorf("int %d out of range", v)
	}
	return int32(v), nil
}

func (r *avroReader) take(n int64) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("negative length %d", n)
	}
	if n > int64(len(r.b)-r.pos) {
		return nil, errAvroShort
	}
	b := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return b, nil
}

func (r *avroReader) bytes() ([]byte, error) {
	n, err := r.long()
	if err != nil {
		return nil, err
	}
	return r.take(n)
}

// blockCount reads an array or map block header; a negative count is
// followed by the block's size in bytes, which we skip over.
func (r *avroReader) blockCount() (int64, error) {
	n, err := r.long()
	if err != nil {
		return 0, err
	}
	if n < 0 {
		if n == math.MinInt64 {
			return 0, errors.New("bad block count")
		}
		n = -n
		if _, err := r.long(); err != nil {
			return 0, err
		}
	}
	if n > int64(r.items) {
		return 0, fmt.Errorf("block of %d items exceeds what the data can hold", n)
	}
	r.items -= int(n)
	return n, nil
}

// decodeAvro decodes body with schema s into natural JSON.
func decodeAvro(s avro.Schema, body []byte) ([]byte, error) {
	r := &avroReader{b: body, items: len(body) + 1<<16}
	out, err := r.value(make([]byte, 0, len(body)*2+16), s, "")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMismatch, err)
	}
	if r.pos != len(body) {
		return nil, fmt.Errorf("%w: %d bytes left after the value", ErrMismatch, len(body)-r.pos)
	}
	return out, nil
}

func deref(s avro.Schema) avro.Schema {
	if ref, ok := s.(*avro.RefSchema); ok {
		return ref.Schema()
	}
	return s
}

func logicalOf(s avro.Schema) avro.LogicalSchema {
	if l, ok := s.(avro.LogicalTypeSchema); ok {
		if ls := l.Logical(); ls != nil {
			return ls
		}
	}
	return nil
}

func (r *avroReader) value(dst []byte, s avro.Schema, path string) ([]byte, error) {
	r.depth++
	defer func() { r.depth-- }()
	if r.depth > maxAvroDepth {
		return nil, fmt.Errorf("%s: nested deeper than %d", pathOrRoot(path), maxAvroDepth)
	}
	s = deref(s)
	fail := func(err error) ([]byte, error) { return nil, fmt.Errorf("%s: %w", pathOrRoot(path), err) }
	switch s.Type() {
	case avro.Null:
		return append(dst, "null"...), nil
	case avro.Boolean:
		b, err := r.take(1)
		if err != nil {
			return fail(err)
		}
		switch b[0] {
		case 0:
			return append(dst, "false"...), nil
		case 1:
			return append(dst, "true"...), nil
		}
		return fail(fmt.Errorf("boolean byte %d", b[0]))
	case avro.Int:
		v, err := r.int()
		if err != nil {
			return fail(err)
		}
		if l := logicalOf(s); l != nil {
			switch l.Type() {
			case avro.Date:
				t := time.Unix(int64(v)*86400, 0).UTC()
				if inRFC3339(t) {
					return append(append(append(dst, '"'), t.Format(time.DateOnly)...), '"'), nil
				}
			case avro.TimeMillis:
				if v >= 0 && v < 86400_000 {
					return appendTimeOfDay(dst, int64(v)*1e6, 3), nil
				}
			}
		}
		return strconv.AppendInt(dst, int64(v), 10), nil
	case avro.Long:
		v, err := r.long()
		if err != nil {
			return fail(err)
		}
		if l := logicalOf(s); l != nil {
			if out, ok := appendLongLogical(dst, l.Type(), v); ok {
				return out, nil
			}
		}
		return strconv.AppendInt(dst, v, 10), nil
	case avro.Float:
		b, err := r.take(4)
		if err != nil {
			return fail(err)
		}
		f := math.Float32frombits(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
		return appendJSONFloat(dst, float64(f), 32), nil
	case avro.Double:
		b, err := r.take(8)
		if err != nil {
			return fail(err)
		}
		var u uint64
		for i := 7; i >= 0; i-- {
			u = u<<8 | uint64(b[i])
		}
		return appendJSONFloat(dst, math.Float64frombits(u), 64), nil
	case avro.String:
		b, err := r.bytes()
		if err != nil {
			return fail(err)
		}
		if !validUTF8(b) {
			return fail(errors.New("string is not valid UTF-8"))
		}
		return appendJSONString(dst, string(b)), nil
	case avro.Bytes:
		b, err := r.bytes()
		if err != nil {
			return fail(err)
		}
		if d, ok := logicalOf(s).(*avro.DecimalLogicalSchema); ok {
			out, err := appendDecimal(dst, b, d)
			if err != nil {
				return fail(err)
			}
			return out, nil
		}
		return appendBase64(dst, b), nil
	case avro.Fixed:
		fs := s.(*avro.FixedSchema)
		b, err := r.take(int64(fs.Size()))
		if err != nil {
			return fail(err)
		}
		if d, ok := fs.Logical().(*avro.DecimalLogicalSchema); ok {
			out, err := appendDecimal(dst, b, d)
			if err != nil {
				return fail(err)
			}
			return out, nil
		}
		return appendBase64(dst, b), nil
	case avro.Enum:
		es := s.(*avro.EnumSchema)
		i, err := r.int()
		if err != nil {
			return fail(err)
		}
		sym, ok := es.Symbol(int(i))
		if !ok {
			return fail(fmt.Errorf("enum index %d outside %s's %d symbols", i, es.FullName(), len(es.Symbols())))
		}
		return appendJSONString(dst, sym), nil
	case avro.Record, avro.Error:
		rs := s.(*avro.RecordSchema)
		dst = append(dst, '{')
		for i, f := range rs.Fields() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, f.Name())
			dst = append(dst, ':')
			var err error
			if dst, err = r.value(dst, f.Type(), path+"/"+escapePointer(f.Name())); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	case avro.Array:
		as := s.(*avro.ArraySchema)
		dst = append(dst, '[')
		i := 0
		for {
			n, err := r.blockCount()
			if err != nil {
				return fail(err)
			}
			if n == 0 {
				break
			}
			for ; n > 0; n-- {
				if i > 0 {
					dst = append(dst, ',')
				}
				if dst, err = r.value(dst, as.Items(), path+"/"+strconv.Itoa(i)); err != nil {
					return nil, err
				}
				i++
			}
		}
		return append(dst, ']'), nil
	case avro.Map:
		ms := s.(*avro.MapSchema)
		dst = append(dst, '{')
		first := true
		for {
			n, err := r.blockCount()
			if err != nil {
				return fail(err)
			}
			if n == 0 {
				break
			}
			for ; n > 0; n-- {
				k, err := r.bytes()
				if err != nil {
					return fail(err)
				}
				if !validUTF8(k) {
					return fail(errors.New("map key is not valid UTF-8"))
				}
				if !first {
					dst = append(dst, ',')
				}
				first = false
				dst = appendJSONString(dst, string(k))
				dst = append(dst, ':')
				if dst, err = r.value(dst, ms.Values(), path+"/"+escapePointer(string(k))); err != nil {
					return nil, err
				}
			}
		}
		return append(dst, '}'), nil
	case avro.Union:
		us := s.(*avro.UnionSchema)
		i, err := r.long()
		if err != nil {
			return fail(err)
		}
		types := us.Types()
		if i < 0 || i >= int64(len(types)) {
			return fail(fmt.Errorf("union index %d outside its %d branches", i, len(types)))
		}
		branch := types[i]
		if unionWrapped(us, int(i)) {
			dst = append(dst, '{')
			dst = appendJSONString(dst, branchName(branch))
			dst = append(dst, ':')
			if dst, err = r.value(dst, branch, path); err != nil {
				return nil, err
			}
			return append(dst, '}'), nil
		}
		return r.value(dst, branch, path)
	}
	return fail(fmt.Errorf("unsupported Avro type %s", s.Type()))
}

func pathOrRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// escapePointer escapes a JSON Pointer reference token (RFC 6901).
func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

func inRFC3339(t time.Time) bool { return t.Year() >= 0 && t.Year() <= 9999 }

func appendTimeOfDay(dst []byte, nanos int64, digits int) []byte {
	t := time.Unix(0, nanos).UTC()
	layout := "15:04:05.000"
	if digits == 6 {
		layout = "15:04:05.000000"
	}
	return append(append(append(dst, '"'), t.Format(layout)...), '"')
}

// appendLongLogical writes time-like logical longs as text with a fixed
// number of fraction digits, so the text parses back to the same long.
// It reports false for values RFC 3339 cannot hold; those stay numbers.
func appendLongLogical(dst []byte, lt avro.LogicalType, v int64) ([]byte, bool) {
	var t time.Time
	layout := ""
	switch lt {
	case avro.TimestampMillis, avro.LocalTimestampMillis:
		if v < -62135596800000 || v > 253402300799999 {
			return dst, false
		}
		t, layout = time.UnixMilli(v).UTC(), "2006-01-02T15:04:05.000"
	case avro.TimestampMicros, avro.LocalTimestampMicros:
		if v < -62135596800000000 || v > 253402300799999999 {
			return dst, false
		}
		t, layout = time.UnixMicro(v).UTC(), "2006-01-02T15:04:05.000000"
	case avro.TimeMicros:
		if v < 0 || v >= 86400_000_000 {
			return dst, false
		}
		return appendTimeOfDay(dst, v*1000, 6), true
	default:
		return dst, false
	}
	if lt == avro.TimestampMillis || lt == avro.TimestampMicros {
		layout += "Z07:00"
	}
	return append(append(append(dst, '"'), t.Format(layout)...), '"'), true
}

func appendBase64(dst []byte, b []byte) []byte {
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}

// appendDecimal writes a two's-complement big-endian unscaled value as
// an exact JSON number with exactly scale fraction digits. A value with
// more digits than the precision is refused, as Java's decimal conversion
// refuses to write one: what decodes must encode back.
func appendDecimal(dst []byte, b []byte, d *avro.DecimalLogicalSchema) ([]byte, error) {
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(len(b)*8)))
	}
	if digits := len(new(big.Int).Abs(n).String()); n.Sign() != 0 && d.Precision() > 0 && digits > d.Precision() {
		return nil, fmt.Errorf("decimal of %d digits exceeds its precision %d", digits, d.Precision())
	}
	return appendScaled(dst, n, d.Scale()), nil
}

func appendScaled(dst []byte, n *big.Int, scale int) []byte {
	neg := n.Sign() < 0
	digits := new(big.Int).Abs(n).String()
	if neg {
		dst = append(dst, '-')
	}
	if scale <= 0 {
		dst = append(dst, digits...)
		for i := 0; i < -scale && digits != "0"; i++ {
			dst = append(dst, '0')
		}
		return dst
	}
	if len(digits) <= scale {
		digits = strings.Repeat("0", scale-len(digits)+1) + digits
	}
	dst = append(dst, digits[:len(digits)-scale]...)
	dst = append(dst, '.')
	return append(dst, digits[len(digits)-scale:]...)
}

// ---- unions ----

// jsonKinds is the set of JSON kinds a branch's natural JSON can take.
func jsonKinds(s avro.Schema) jkind {
	s = deref(s)
	switch s.Type() {
	case avro.Null:
		return jNull
	case avro.Boolean:
		return jBool
	case avro.Int, avro.Long:
		if logicalOf(s) != nil {
			return jNumber | jString
		}
		return jNumber
	case avro.Float, avro.Double:
		return jNumber | jString
	case avro.String, avro.Enum:
		return jString
	case avro.Bytes, avro.Fixed:
		if _, ok := logicalOf(s).(*avro.DecimalLogicalSchema); ok {
			return jNumber
		}
		return jString
	case avro.Array:
		return jArray
	case avro.Record, avro.Error, avro.Map:
		return jObject
	}
	return 0
}

// unionWrapped reports whether branch i of u is written wrapped, as
// {"type name": value} the way Avro's own JSON encoding writes every
// union: only when another branch's natural JSON could take the same JSON
// kind, so the plain value would not say which branch it is. Every other
// branch, notably the T of ["null", T], is written as the plain value.
func unionWrapped(u *avro.UnionSchema, i int) bool {
	types := u.Types()
	k := jsonKinds(types[i])
	for j, t := range types {
		if j != i && jsonKinds(t)&k != 0 {
			return true
		}
	}
	return false
}

// branchName is the name Avro's JSON encoding gives a union branch.
func branchName(s avro.Schema) string {
	if n, ok := deref(s).(avro.NamedSchema); ok {
		return n.FullName()
	}
	return string(deref(s).Type())
}

// ---- encoding ----

type avroWriter struct {
	b     []byte
	depth int
}

func (w *avroWriter) long(v int64) {
	u := uint64(v<<1) ^ uint64(v>>63)
	for u >= 0x80 {
		w.b = append(w.b, byte(u)|0x80)
		u >>= 7
	}
	w.b = append(w.b, byte(u))
}

func (w *avroWriter) bytes(b []byte) {
	w.long(int64(len(b)))
	w.b = append(w.b, b...)
}

// encodeAvro encodes natural JSON v with schema s, appending to dst.
func encodeAvro(dst []byte, s avro.Schema, v *jval) ([]byte, error) {
	w := &avroWriter{b: dst}
	if err := w.value(s, v, ""); err != nil {
		return nil, err
	}
	return w.b, nil
}

func (w *avroWriter) value(s avro.Schema, v *jval, path string) error {
	w.depth++
	defer func() { w.depth-- }()
	if w.depth > maxAvroDepth {
		return &ValidationError{Path: pathOrRoot(path), Expected: fmt.Sprintf("nesting at most %d deep", maxAvroDepth)}
	}
	s = deref(s)
	bad := func(expected string) error { return mismatch(path, expected, v) }
	switch s.Type() {
	case avro.Null:
		if v.kind != jNull {
			return bad("null")
		}
		return nil
	case avro.Boolean:
		if v.kind != jBool {
			return bad("boolean")
		}
		if v.b {
			w.b = append(w.b, 1)
		} else {
			w.b = append(w.b, 0)
		}
		return nil
	case avro.Int:
		l := logicalOf(s)
		if v.kind == jString && l != nil {
			n, ok := parseIntLogical(l.Type(), v.s)
			if !ok {
				return bad(describeLogical(l))
			}
			w.long(n)
			return nil
		}
		n, err := strconv.ParseInt(numText(v), 10, 32)
		if v.kind != jNumber || err != nil {
			if l != nil {
				return bad(describeLogical(l))
			}
			return bad("int (32-bit integer)")
		}
		w.long(n)
		return nil
	case avro.Long:
		l := logicalOf(s)
		if v.kind == jString && l != nil {
			n, ok := parseLongLogical(l.Type(), v.s)
			if !ok {
				return bad(describeLogical(l))
			}
			w.long(n)
			return nil
		}
		n, err := strconv.ParseInt(numText(v), 10, 64)
		if v.kind != jNumber || err != nil {
			if l != nil {
				return bad(describeLogical(l))
			}
			return bad("long (64-bit integer)")
		}
		w.long(n)
		return nil
	case avro.Float:
		f, ok := parseJSONFloat(v, 32)
		if !ok {
			return bad("float")
		}
		u := math.Float32bits(float32(f))
		w.b = append(w.b, byte(u), byte(u>>8), byte(u>>16), byte(u>>24))
		return nil
	case avro.Double:
		f, ok := parseJSONFloat(v, 64)
		if !ok {
			return bad("double")
		}
		u := math.Float64bits(f)
		for i := 0; i < 8; i++ {
			w.b = append(w.b, byte(u>>(8*i)))
		}
		return nil
	case avro.String:
		if v.kind != jString {
			if l := logicalOf(s); l != nil {
				return bad("string (" + string(l.Type()) + ")")
			}
			return bad("string")
		}
		w.bytes([]byte(v.s))
		return nil
	case avro.Bytes:
		if d, ok := logicalOf(s).(*avro.DecimalLogicalSchema); ok {
			n, err := parseDecimal(v, d)
			if err != nil {
				return mismatch(path, err.Error(), v)
			}
			w.bytes(twosComplement(n, 0))
			return nil
		}
		b, ok := parseBase64(v)
		if !ok {
			return bad("bytes as a base64 string")
		}
		w.bytes(b)
		return nil
	case avro.Fixed:
		fs := s.(*avro.FixedSchema)
		if d, ok := fs.Logical().(*avro.DecimalLogicalSchema); ok {
			n, err := parseDecimal(v, d)
			if err != nil {
				return mismatch(path, err.Error(), v)
			}
			b := twosComplement(n, fs.Size())
			if len(b) != fs.Size() {
				return bad(fmt.Sprintf("decimal that fits in %d bytes", fs.Size()))
			}
			w.b = append(w.b, b...)
			return nil
		}
		b, ok := parseBase64(v)
		if !ok || len(b) != fs.Size() {
			return bad(fmt.Sprintf("%d bytes as a base64 string (fixed %s)", fs.Size(), fs.FullName()))
		}
		w.b = append(w.b, b...)
		return nil
	case avro.Enum:
		es := s.(*avro.EnumSchema)
		if v.kind == jString {
			for i, sym := range es.Symbols() {
				if sym == v.s {
					w.long(int64(i))
					return nil
				}
			}
		}
		return bad(fmt.Sprintf("one of %s (enum %s)", quoteList(es.Symbols()), es.FullName()))
	case avro.Record, avro.Error:
		rs := s.(*avro.RecordSchema)
		if v.kind != jObject {
			return bad("object (record " + rs.FullName() + ")")
		}
		for _, m := range v.obj {
			known := false
			for _, f := range rs.Fields() {
				if f.Name() == m.key {
					known = true
					break
				}
			}
			if !known {
				return &ValidationError{Path: path + "/" + escapePointer(m.key), Expected: "no such field: record " + rs.FullName() + " has " + fieldList(rs)}
			}
		}
		for _, f := range rs.Fields() {
			fp := path + "/" + escapePointer(f.Name())
			fv, ok := v.get(f.Name())
			if !ok {
				if !f.HasDefault() {
					return &ValidationError{Path: fp, Expected: "a value: the field is required (it has no default)"}
				}
				if err := w.fieldDefault(f, fp); err != nil {
					return err
				}
				continue
			}
			if err := w.value(f.Type(), fv, fp); err != nil {
				return err
			}
		}
		return nil
	case avro.Array:
		as := s.(*avro.ArraySchema)
		if v.kind != jArray {
			return bad("array")
		}
		if len(v.arr) > 0 {
			w.long(int64(len(v.arr)))
			for i := range v.arr {
				if err := w.value(as.Items(), &v.arr[i], path+"/"+strconv.Itoa(i)); err != nil {
					return err
				}
			}
		}
		w.long(0)
		return nil
	case avro.Map:
		ms := s.(*avro.MapSchema)
		if v.kind != jObject {
			return bad("object (map)")
		}
		if len(v.obj) > 0 {
			w.long(int64(len(v.obj)))
			for i := range v.obj {
				w.bytes([]byte(v.obj[i].key))
				if err := w.value(ms.Values(), &v.obj[i].val, path+"/"+escapePointer(v.obj[i].key)); err != nil {
					return err
				}
			}
		}
		w.long(0)
		return nil
	case avro.Union:
		return w.union(s.(*avro.UnionSchema), v, path)
	}
	return &ValidationError{Path: pathOrRoot(path), Expected: "a type Redrive can encode, not " + string(s.Type())}
}

func (w *avroWriter) union(u *avro.UnionSchema, v *jval, path string) error {
	types := u.Types()
	// A wrapped branch: {"type name": value}.
	if v.kind == jObject && len(v.obj) == 1 {
		for i, t := range types {
			if unionWrapped(u, i) && branchName(t) == v.obj[0].key {
				w.long(int64(i))
				return w.value(t, &v.obj[0].val, path)
			}
		}
	}
	// A plain value: the one unwrapped branch taking its JSON kind.
	for i, t := range types {
		if !unionWrapped(u, i) && jsonKinds(t)&v.kind != 0 {
			w.long(int64(i))
			return w.value(t, v, path)
		}
	}
	var want []string
	for i, t := range types {
		if unionWrapped(u, i) {
			want = append(want, fmt.Sprintf(`{"%s": …}`, branchName(t)))
		} else {
			want = append(want, branchName(t))
		}
	}
	return mismatch(path, "one of the union's branches: "+strings.Join(want, ", "), v)
}

// fieldDefault encodes a missing field's default. For a union the default
// is the first branch's value (Avro spec).
func (w *avroWriter) fieldDefault(f *avro.Field, path string) error {
	def := f.Default()
	raw, err := json.Marshal(def)
	if err != nil {
		return &ValidationError{Path: path, Expected: "a value: the field's default cannot be used"}
	}
	dv, err := parseJSON(raw)
	if err != nil {
		return &ValidationError{Path: path, Expected: "a value: the field's default cannot be used"}
	}
	t := deref(f.Type())
	if u, ok := t.(*avro.UnionSchema); ok {
		w.long(0)
		t = u.Types()[0]
	}
	if d, ok := logicalOf(t).(*avro.DecimalLogicalSchema); ok {
		_ = d // a decimal default is given as bytes, not as a number
		return &ValidationError{Path: path, Expected: "a value: decimal defaults are not supported"}
	}
	if dt := deref(t).Type(); (dt == avro.Bytes || dt == avro.Fixed) && dv.kind == jString {
		// Avro writes bytes defaults as ISO-8859-1 strings.
		rs := []rune(dv.s)
		b := make([]byte, len(rs))
		for i, r := range rs {
			b[i] = byte(r)
		}
		dv.s = base64.StdEncoding.EncodeToString(b)
	}
	return w.value(t, &dv, path)
}

func numText(v *jval) string {
	if v.kind != jNumber {
		return "x"
	}
	return v.s
}

func parseBase64(v *jval) ([]byte, bool) {
	if v.kind != jString {
		return nil, false
	}
	b, err := base64.StdEncoding.DecodeString(v.s)
	return b, err == nil
}

func describeLogical(l avro.LogicalSchema) string {
	switch l.Type() {
	case avro.Date:
		return `date: "YYYY-MM-DD" or days since 1970-01-01`
	case avro.TimeMillis:
		return `time-millis: "HH:MM:SS.sss" or milliseconds after midnight`
	case avro.TimeMicros:
		return `time-micros: "HH:MM:SS.ssssss" or microseconds after midnight`
	case avro.TimestampMillis, avro.TimestampMicros:
		return string(l.Type()) + ": RFC 3339 text with a time zone, or an integer since the epoch"
	case avro.LocalTimestampMillis, avro.LocalTimestampMicros:
		return string(l.Type()) + ": YYYY-MM-DDTHH:MM:SS[.fraction] without a zone, or an integer"
	}
	return "integer (" + string(l.Type()) + ")"
}

func parseIntLogical(lt avro.LogicalType, s string) (int64, bool) {
	switch lt {
	case avro.Date:
		t, err := time.Parse(time.DateOnly, s)
		if err != nil {
			return 0, false
		}
		return t.Unix() / 86400, true
	case avro.TimeMillis:
		d, ok := parseTimeOfDay(s)
		return int64(d / time.Millisecond), ok && d%time.Millisecond == 0
	}
	return 0, false
}

func parseTimeOfDay(s string) (time.Duration, bool) {
	t, err := time.Parse("15:04:05.999999999", s)
	if err != nil {
		return 0, false
	}
	return time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute +
		time.Duration(t.Second())*time.Second + time.Duration(t.Nanosecond()), true
}

func parseLongLogical(lt avro.LogicalType, s string) (int64, bool) {
	var t time.Time
	var err error
	switch lt {
	case avro.TimeMicros:
		d, ok := parseTimeOfDay(s)
		return int64(d / time.Microsecond), ok && d%time.Microsecond == 0
	case avro.TimestampMillis, avro.TimestampMicros:
		t, err = time.Parse(time.RFC3339Nano, s)
	case avro.LocalTimestampMillis, avro.LocalTimestampMicros:
		t, err = time.ParseInLocation("2006-01-02T15:04:05.999999999", s, time.UTC)
	default:
		return 0, false
	}
	if err != nil {
		return 0, false
	}
	switch lt {
	case avro.TimestampMillis, avro.LocalTimestampMillis:
		return t.UnixMilli(), t.Nanosecond()%1e6 == 0
	default:
		return t.UnixMicro(), t.Nanosecond()%1e3 == 0
	}
}

// parseDecimal reads a JSON number (or a numeric string) as an exact
// unscaled integer at the decimal's scale: never through float64, and
// never rounding.
func parseDecimal(v *jval, d *avro.DecimalLogicalSchema) (*big.Int, error) {
	want := fmt.Sprintf("decimal(%d,%d): a number with at most %d digits, %d after the point", d.Precision(), d.Scale(), d.Precision(), d.Scale())
	if v.kind != jNumber && v.kind != jString {
		return nil, errors.New(want)
	}
	if len(v.s) > 1024 {
		return nil, errors.New(want)
	}
	r, ok := new(big.Rat).SetString(v.s)
	if !ok || strings.ContainsAny(v.s, "/") {
		return nil, errors.New(want)
	}
	r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d.Scale())), nil)))
	if !r.IsInt() {
		return nil, errors.New(want)
	}
	n := new(big.Int).Set(r.Num())
	if d.Precision() > 0 && len(new(big.Int).Abs(n).String()) > d.Precision() && n.Sign() != 0 {
		return nil, errors.New(want)
	}
	return n, nil
}

// twosComplement is n's minimal big-endian two's complement, sign-extended
// to size bytes when size > 0 (Java's BigInteger.toByteArray, which
// Confluent's serializers use).
func twosComplement(n *big.Int, size int) []byte {
	var b []byte
	if n.Sign() >= 0 {
		b = n.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
	} else {
		// -n-1 inverted bitwise.
		m := new(big.Int).Neg(n)
		m.Sub(m, big.NewInt(1))
		b = m.Bytes()
		for i := range b {
			b[i] = ^b[i]
		}
		if len(b) == 0 || b[0]&0x80 == 0 {
			b = append([]byte{0xff}, b...)
		}
	}
	for size > 0 && len(b) < size {
		pad := byte(0)
		if n.Sign() < 0 {
			pad = 0xff
		}
		b = append([]byte{pad}, b...)
	}
	return b
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

func fieldList(rs *avro.RecordSchema) string {
	names := make([]string, len(rs.Fields()))
	for i, f := range rs.Fields() {
		names[i] = f.Name()
	}
	return strings.Join(names, ", ")
}
