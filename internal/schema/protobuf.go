package schema

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// Protobuf schemas are the .proto text the registry returns, compiled with
// bufbuild/protocompile (pure Go, no protoc) against the texts of their
// references and the well-known types. Values are read into dynamicpb
// messages by Google's own proto.Unmarshal. The natural JSON is written by
// this file rather than protojson, which writes 64-bit integers as strings
// and renames fields to lowerCamelCase: here fields keep their .proto
// names and every integer is a JSON number with its exact digits.
// Well-known types (Timestamp, Duration, Struct, wrappers, …) are written
// by protojson in their canonical JSON form. Values are written back in
// field-number order, as generated code and Java write them, so an
// unchanged value re-encodes byte for byte (map entries are written
// sorted by key).

// protoMainFile names the schema's own file among its imports; a
// reference cannot use it because it is not a valid import path.
const protoMainFile = "<redrive schema>.proto"

// maxProtoDepth bounds message nesting when reading and writing.
const maxProtoDepth = 100

type protoSchema struct {
	file protoreflect.FileDescriptor
}

// builtinProtos are imports the registry serves without references:
// Confluent's own option and decimal types (the well-known google/protobuf
// ones come with protocompile).
var builtinProtos = map[string]string{
	"confluent/meta.proto": `syntax = "proto3";
package confluent;
import "google/protobuf/descriptor.proto";
message Meta { string doc = 1; map<string, string> params = 2; repeated string tags = 3; }
extend google.protobuf.FileOptions { Meta file_meta = 1088; }
extend google.protobuf.MessageOptions { Meta message_meta = 1088; }
extend google.protobuf.FieldOptions { Meta field_meta = 1088; }
extend google.protobuf.EnumOptions { Meta enum_meta = 1088; }
extend google.protobuf.EnumValueOptions { Meta enum_value_meta = 1088; }
`,
	"confluent/type/decimal.proto": `syntax = "proto3";
package confluent.type;
message Decimal { bytes value = 1; uint32 precision = 2; int32 scale = 3; }
`,
}

func compileProto(src *Source) (*protoSchema, error) {
	files := map[string]string{protoMainFile: src.Text}
	var add func(refs []Reference)
	add = func(refs []Reference) {
		for _, r := range refs {
			if _, ok := files[r.Name]; !ok {
				files[r.Name] = r.Text
			}
			add(r.References)
		}
	}
	add(src.References)
	for name, text := range builtinProtos {
		if _, ok := files[name]; !ok {
			files[name] = text
		}
	}
	c := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{Accessor: protocompile.SourceAccessorFromMap(files)}),
		MaxParallelism: 1,
	}
	out, err := c.Compile(context.Background(), protoMainFile)
	if err != nil {
		return nil, err
	}
	return &protoSchema{file: out[0]}, nil
}

// message finds the message a header's index list names. Indexes count
// the messages declared in the schema text, in order, as Confluent's
// (Java) serializers and the registry count them over the parsed .proto:
// the synthetic entry messages of map fields are not counted. (protocompile
// puts a map's entry among a message's nested messages where the map field
// is; the registry's .proto text lists fields before nested messages, so
// counting entries would shift every nested message after a map field.)
func (p *protoSchema) message(indexes []int) (protoreflect.MessageDescriptor, error) {
	if len(indexes) == 0 {
		indexes = []int{0}
	}
	msgs := p.file.Messages()
	var md protoreflect.MessageDescriptor
	for _, i := range indexes {
		md = nthDeclaredMessage(msgs, i)
		if md == nil {
			return nil, fmt.Errorf("%w: message index %v names no message of the schema", ErrMismatch, indexes)
		}
		msgs = md.Messages()
	}
	return md, nil
}

// nthDeclaredMessage returns the i-th of msgs that is not a map entry, or
// nil.
func nthDeclaredMessage(msgs protoreflect.MessageDescriptors, i int) protoreflect.MessageDescriptor {
	if i < 0 {
		return nil
	}
	for j := 0; j < msgs.Len(); j++ {
		md := msgs.Get(j)
		if md.IsMapEntry() {
			continue
		}
		if i == 0 {
			return md
		}
		i--
	}
	return nil
}

func (p *protoSchema) decode(indexes []int, body []byte) (string, []byte, error) {
	md, err := p.message(indexes)
	if err != nil {
		return "", nil, err
	}
	m := dynamicpb.NewMessage(md)
	if err := unmarshalProto(body, m); err != nil {
		return "", nil, fmt.Errorf("%w: %v", ErrMismatch, err)
	}
	out, err := writeProtoMessage(make([]byte, 0, len(body)*2+16), m, "", 0)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %v", ErrMismatch, err)
	}
	return string(md.FullName()), out, nil
}

func (p *protoSchema) encode(dst []byte, indexes []int, v *jval) ([]byte, error) {
	md, err := p.message(indexes)
	if err != nil {
		return nil, err
	}
	m := dynamicpb.NewMessage(md)
	if err := readProtoMessage(m, v, "", 0); err != nil {
		return nil, err
	}
	return marshalProto(dst, m)
}

// unmarshalProto is proto.Unmarshal, made safe for hostile bytes: the
// reflective path dynamicpb takes panics on some malformed map entries
// (google.golang.org/protobuf v1.36.12, "cannot convert nil to map key";
// FuzzDecode found it), so a panic there is a mismatch, not a crash.
func unmarshalProto(body []byte, m *dynamicpb.Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed protobuf: %v", r)
		}
	}()
	return proto.UnmarshalOptions{RecursionLimit: maxProtoDepth}.Unmarshal(body, m)
}

// ---- well-known types ----

func isWKT(md protoreflect.MessageDescriptor) bool {
	return md.ParentFile() != nil && md.ParentFile().Package() == "google.protobuf" &&
		strings.HasPrefix(md.ParentFile().Path(), "google/protobuf/") && md.FullName() != "google.protobuf.FileDescriptorProto"
}

func isInt64Wrapper(md protoreflect.MessageDescriptor) bool {
	n := md.FullName()
	return n == "google.protobuf.Int64Value" || n == "google.protobuf.UInt64Value"
}

// ---- natural JSON out ----

func writeProtoMessage(dst []byte, m protoreflect.Message, path string, depth int) ([]byte, error) {
	if depth > maxProtoDepth {
		return nil, fmt.Errorf("%s: nested deeper than %d", pathOrRoot(path), maxProtoDepth)
	}
	md := m.Descriptor()
	if len(m.GetUnknown()) > 0 {
		return nil, fmt.Errorf("%s: fields that %s does not define", pathOrRoot(path), md.FullName())
	}
	if isWKT(md) {
		b, err := protojson.Marshal(m.Interface())
		if err != nil {
			return nil, fmt.Errorf("%s: %v", pathOrRoot(path), err)
		}
		if isInt64Wrapper(md) && len(b) > 1 && b[0] == '"' {
			b = b[1 : len(b)-1] // an exact JSON number, like every other integer
		}
		return append(dst, b...), nil
	}
	dst = append(dst, '{')
	first := true
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if !m.Has(fd) {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendJSONString(dst, string(fd.Name()))
		dst = append(dst, ':')
		fp := path + "/" + escapePointer(string(fd.Name()))
		var err error
		v := m.Get(fd)
		switch {
		case fd.IsList():
			l := v.List()
			dst = append(dst, '[')
			for j := 0; j < l.Len(); j++ {
				if j > 0 {
					dst = append(dst, ',')
				}
				if dst, err = writeProtoScalar(dst, fd, l.Get(j), fp+"/"+strconv.Itoa(j), depth); err != nil {
					return nil, err
				}
			}
			dst = append(dst, ']')
		case fd.IsMap():
			mp := v.Map()
			keys := make([]protoreflect.MapKey, 0, mp.Len())
			mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool { keys = append(keys, k); return true })
			sortMapKeys(fd.MapKey().Kind(), keys)
			dst = append(dst, '{')
			for j, k := range keys {
				if j > 0 {
					dst = append(dst, ',')
				}
				ks := k.String()
				dst = appendJSONString(dst, ks)
				dst = append(dst, ':')
				if dst, err = writeProtoScalar(dst, fd.MapValue(), mp.Get(k), fp+"/"+escapePointer(ks), depth); err != nil {
					return nil, err
				}
			}
			dst = append(dst, '}')
		default:
			if dst, err = writeProtoScalar(dst, fd, v, fp, depth); err != nil {
				return nil, err
			}
		}
	}
	return append(dst, '}'), nil
}

func writeProtoScalar(dst []byte, fd protoreflect.FieldDescriptor, v protoreflect.Value, path string, depth int) ([]byte, error) {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return strconv.AppendBool(dst, v.Bool()), nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return strconv.AppendInt(dst, v.Int(), 10), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return strconv.AppendUint(dst, v.Uint(), 10), nil
	case protoreflect.FloatKind:
		return appendJSONFloat(dst, v.Float(), 32), nil
	case protoreflect.DoubleKind:
		return appendJSONFloat(dst, v.Float(), 64), nil
	case protoreflect.StringKind:
		if !validUTF8([]byte(v.String())) {
			return nil, fmt.Errorf("%s: string is not valid UTF-8", path)
		}
		return appendJSONString(dst, v.String()), nil
	case protoreflect.BytesKind:
		return appendBase64(dst, v.Bytes()), nil
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return appendJSONString(dst, string(ev.Name())), nil
		}
		return strconv.AppendInt(dst, int64(v.Enum()), 10), nil
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return writeProtoMessage(dst, v.Message(), path, depth+1)
	}
	return nil, fmt.Errorf("%s: unsupported kind %s", path, fd.Kind())
}

func sortMapKeys(k protoreflect.Kind, keys []protoreflect.MapKey) {
	slices.SortFunc(keys, func(a, b protoreflect.MapKey) int {
		switch k {
		case protoreflect.StringKind:
			return strings.Compare(a.String(), b.String())
		case protoreflect.BoolKind:
			if a.Bool() == b.Bool() {
				return 0
			}
			if !a.Bool() {
				return -1
			}
			return 1
		case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
			return cmpOrdered(a.Uint(), b.Uint())
		default:
			return cmpOrdered(a.Int(), b.Int())
		}
	})
}

func cmpOrdered[T int64 | uint64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ---- natural JSON in ----

func readProtoMessage(m protoreflect.Message, v *jval, path string, depth int) error {
	md := m.Descriptor()
	if depth > maxProtoDepth {
		return &ValidationError{Path: pathOrRoot(path), Expected: fmt.Sprintf("nesting at most %d deep", maxProtoDepth)}
	}
	if isWKT(md) {
		text := appendJVal(nil, v)
		if err := (protojson.UnmarshalOptions{}).Unmarshal(text, m.Interface()); err != nil {
			return mismatch(path, string(md.FullName())+" in its JSON form ("+strings.TrimPrefix(err.Error(), "proto: ")+")", v)
		}
		return nil
	}
	if v.kind != jObject {
		return mismatch(path, "object (message "+string(md.FullName())+")", v)
	}
	fields := md.Fields()
	for i := range v.obj {
		mem := &v.obj[i]
		fp := path + "/" + escapePointer(mem.key)
		fd := fields.ByName(protoreflect.Name(mem.key))
		if fd == nil {
			fd = fields.ByJSONName(mem.key)
		}
		if fd == nil {
			names := make([]string, fields.Len())
			for j := range names {
				names[j] = string(fields.Get(j).Name())
			}
			return &ValidationError{Path: fp, Expected: "no such field: message " + string(md.FullName()) + " has " + strings.Join(names, ", ")}
		}
		if mem.val.kind == jNull && !(fd.Message() != nil && fd.Message().FullName() == "google.protobuf.Value") {
			continue // null leaves a field unset, as in protojson
		}
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
			if set := m.WhichOneof(od); set != nil && set != fd {
				return &ValidationError{Path: fp, Expected: "only one field of oneof " + string(od.Name()) + " (" + string(set.Name()) + " is set too)"}
			}
		}
		switch {
		case fd.IsList():
			if mem.val.kind != jArray {
				return mismatch(fp, "array", &mem.val)
			}
			l := m.Mutable(fd).List()
			for j := range mem.val.arr {
				pv, err := readProtoScalar(l.NewElement, fd, &mem.val.arr[j], fp+"/"+strconv.Itoa(j), depth)
				if err != nil {
					return err
				}
				l.Append(pv)
			}
		case fd.IsMap():
			if mem.val.kind != jObject {
				return mismatch(fp, "object (map)", &mem.val)
			}
			mp := m.Mutable(fd).Map()
			for j := range mem.val.obj {
				e := &mem.val.obj[j]
				ep := fp + "/" + escapePointer(e.key)
				kv, err := readProtoScalar(nil, fd.MapKey(), &jval{kind: jString, s: e.key}, ep, depth)
				if err != nil {
					return err
				}
				vv, err := readProtoScalar(mp.NewValue, fd.MapValue(), &e.val, ep, depth)
				if err != nil {
					return err
				}
				mp.Set(kv.MapKey(), vv)
			}
		default:
			pv, err := readProtoScalar(func() protoreflect.Value { return m.NewField(fd) }, fd, &mem.val, fp, depth)
			if err != nil {
				return err
			}
			m.Set(fd, pv)
		}
	}
	return nil
}

func readProtoScalar(newMsg func() protoreflect.Value, fd protoreflect.FieldDescriptor, v *jval, path string, depth int) (protoreflect.Value, error) {
	intText := func() (string, bool) {
		if v.kind == jNumber || v.kind == jString { // protojson accepts quoted integers too
			return v.s, true
		}
		return "", false
	}
	switch fd.Kind() {
	case protoreflect.BoolKind:
		if v.kind == jBool {
			return protoreflect.ValueOfBool(v.b), nil
		}
		if v.kind == jString && (v.s == "true" || v.s == "false") { // map keys
			return protoreflect.ValueOfBool(v.s == "true"), nil
		}
		return protoreflect.Value{}, mismatch(path, "boolean", v)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		if t, ok := intText(); ok {
			if n, err := strconv.ParseInt(t, 10, 32); err == nil {
				return protoreflect.ValueOfInt32(int32(n)), nil
			}
		}
		return protoreflect.Value{}, mismatch(path, string(fd.Kind().String())+" (32-bit integer)", v)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		if t, ok := intText(); ok {
			if n, err := strconv.ParseInt(t, 10, 64); err == nil {
				return protoreflect.ValueOfInt64(n), nil
			}
		}
		return protoreflect.Value{}, mismatch(path, fd.Kind().String()+" (64-bit integer)", v)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		if t, ok := intText(); ok {
			if n, err := strconv.ParseUint(t, 10, 32); err == nil {
				return protoreflect.ValueOfUint32(uint32(n)), nil
			}
		}
		return protoreflect.Value{}, mismatch(path, fd.Kind().String()+" (unsigned 32-bit integer)", v)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if t, ok := intText(); ok {
			if n, err := strconv.ParseUint(t, 10, 64); err == nil {
				return protoreflect.ValueOfUint64(n), nil
			}
		}
		return protoreflect.Value{}, mismatch(path, fd.Kind().String()+" (unsigned 64-bit integer)", v)
	case protoreflect.FloatKind:
		if f, ok := parseJSONFloat(v, 32); ok {
			return protoreflect.ValueOfFloat32(float32(f)), nil
		}
		return protoreflect.Value{}, mismatch(path, "float", v)
	case protoreflect.DoubleKind:
		if f, ok := parseJSONFloat(v, 64); ok {
			return protoreflect.ValueOfFloat64(f), nil
		}
		return protoreflect.Value{}, mismatch(path, "double", v)
	case protoreflect.StringKind:
		if v.kind == jString {
			return protoreflect.ValueOfString(v.s), nil
		}
		return protoreflect.Value{}, mismatch(path, "string", v)
	case protoreflect.BytesKind:
		if b, ok := parseBase64(v); ok {
			return protoreflect.ValueOfBytes(b), nil
		}
		return protoreflect.Value{}, mismatch(path, "bytes as a base64 string", v)
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		if v.kind == jString {
			if ev := vals.ByName(protoreflect.Name(v.s)); ev != nil {
				return protoreflect.ValueOfEnum(ev.Number()), nil
			}
		}
		if v.kind == jNumber {
			if n, err := strconv.ParseInt(v.s, 10, 32); err == nil {
				return protoreflect.ValueOfEnum(protoreflect.EnumNumber(n)), nil
			}
		}
		names := make([]string, vals.Len())
		for i := range names {
			names[i] = string(vals.Get(i).Name())
		}
		return protoreflect.Value{}, mismatch(path, "one of "+quoteList(names)+" (enum "+string(fd.Enum().FullName())+")", v)
	case protoreflect.MessageKind, protoreflect.GroupKind:
		mv := newMsg()
		if err := readProtoMessage(mv.Message(), v, path, depth+1); err != nil {
			return protoreflect.Value{}, err
		}
		return mv, nil
	}
	return protoreflect.Value{}, &ValidationError{Path: pathOrRoot(path), Expected: "a field kind Redrive can encode, not " + fd.Kind().String()}
}

// appendJVal writes v back as JSON text (for protojson's well-known types).
func appendJVal(dst []byte, v *jval) []byte {
	switch v.kind {
	case jNull:
		return append(dst, "null"...)
	case jBool:
		return strconv.AppendBool(dst, v.b)
	case jNumber:
		return append(dst, v.s...)
	case jString:
		return appendJSONString(dst, v.s)
	case jArray:
		dst = append(dst, '[')
		for i := range v.arr {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJVal(dst, &v.arr[i])
		}
		return append(dst, ']')
	}
	dst = append(dst, '{')
	for i := range v.obj {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, v.obj[i].key)
		dst = append(dst, ':')
		dst = appendJVal(dst, &v.obj[i].val)
	}
	return append(dst, '}')
}

// ---- wire out, in field-number order ----

func marshalProto(dst []byte, m protoreflect.Message) ([]byte, error) {
	md := m.Descriptor()
	fields := md.Fields()
	order := make([]protoreflect.FieldDescriptor, 0, fields.Len())
	for i := 0; i < fields.Len(); i++ {
		if fd := fields.Get(i); m.Has(fd) {
			order = append(order, fd)
		}
	}
	slices.SortFunc(order, func(a, b protoreflect.FieldDescriptor) int { return cmpOrdered(int64(a.Number()), int64(b.Number())) })
	var err error
	for _, fd := range order {
		v := m.Get(fd)
		switch {
		case fd.IsList():
			l := v.List()
			if fd.IsPacked() {
				var packed []byte
				for j := 0; j < l.Len(); j++ {
					packed = appendProtoScalar(packed, fd, l.Get(j))
				}
				dst = protowire.AppendTag(dst, fd.Number(), protowire.BytesType)
				dst = protowire.AppendBytes(dst, packed)
				continue
			}
			for j := 0; j < l.Len(); j++ {
				if dst, err = appendProtoField(dst, fd, l.Get(j)); err != nil {
					return nil, err
				}
			}
		case fd.IsMap():
			mp := v.Map()
			keys := make([]protoreflect.MapKey, 0, mp.Len())
			mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool { keys = append(keys, k); return true })
			sortMapKeys(fd.MapKey().Kind(), keys)
			for _, k := range keys {
				var entry []byte
				if entry, err = appendProtoField(entry, fd.MapKey(), k.Value()); err != nil {
					return nil, err
				}
				if entry, err = appendProtoField(entry, fd.MapValue(), mp.Get(k)); err != nil {
					return nil, err
				}
				dst = protowire.AppendTag(dst, fd.Number(), protowire.BytesType)
				dst = protowire.AppendBytes(dst, entry)
			}
		default:
			if dst, err = appendProtoField(dst, fd, v); err != nil {
				return nil, err
			}
		}
	}
	return append(dst, m.GetUnknown()...), nil
}

func appendProtoField(dst []byte, fd protoreflect.FieldDescriptor, v protoreflect.Value) ([]byte, error) {
	switch fd.Kind() {
	case protoreflect.MessageKind:
		sub, err := marshalProto(nil, v.Message())
		if err != nil {
			return nil, err
		}
		dst = protowire.AppendTag(dst, fd.Number(), protowire.BytesType)
		return protowire.AppendBytes(dst, sub), nil
	case protoreflect.GroupKind:
		dst = protowire.AppendTag(dst, fd.Number(), protowire.StartGroupType)
		dst, err := marshalProto(dst, v.Message())
		if err != nil {
			return nil, err
		}
		return protowire.AppendTag(dst, fd.Number(), protowire.EndGroupType), nil
	case protoreflect.StringKind, protoreflect.BytesKind:
		dst = protowire.AppendTag(dst, fd.Number(), protowire.BytesType)
		if fd.Kind() == protoreflect.StringKind {
			return protowire.AppendString(dst, v.String()), nil
		}
		return protowire.AppendBytes(dst, v.Bytes()), nil
	}
	dst = protowire.AppendTag(dst, fd.Number(), wireType(fd.Kind()))
	return appendProtoScalar(dst, fd, v), nil
}

func wireType(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	}
	return protowire.VarintType
}

// appendProtoScalar appends a packable scalar's value without a tag.
func appendProtoScalar(dst []byte, fd protoreflect.FieldDescriptor, v protoreflect.Value) []byte {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protowire.AppendVarint(dst, protowire.EncodeBool(v.Bool()))
	case protoreflect.EnumKind:
		return protowire.AppendVarint(dst, uint64(v.Enum()))
	case protoreflect.Int32Kind, protoreflect.Int64Kind:
		return protowire.AppendVarint(dst, uint64(v.Int()))
	case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return protowire.AppendVarint(dst, protowire.EncodeZigZag(v.Int()))
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind:
		return protowire.AppendVarint(dst, v.Uint())
	case protoreflect.Fixed32Kind:
		return protowire.AppendFixed32(dst, uint32(v.Uint()))
	case protoreflect.Sfixed32Kind:
		return protowire.AppendFixed32(dst, uint32(int32(v.Int())))
	case protoreflect.Fixed64Kind:
		return protowire.AppendFixed64(dst, v.Uint())
	case protoreflect.Sfixed64Kind:
		return protowire.AppendFixed64(dst, uint64(v.Int()))
	case protoreflect.FloatKind:
		return protowire.AppendFixed32(dst, math.Float32bits(float32(v.Float())))
	case protoreflect.DoubleKind:
		return protowire.AppendFixed64(dst, math.Float64bits(v.Float()))
	}
	panic(errors.New("schema: not a packable kind: " + fd.Kind().String()))
}
