package schema

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Confluent wire format: magic byte 0, then the schema id as a 4-byte
// big-endian signed integer, then (Protobuf only) the message-index list,
// then the encoded value.
const (
	magicByte  = 0
	headerSize = 5

	// MaxMessageIndexes bounds the Protobuf message-index list: it is the
	// nesting depth of the message within its file, so real lists are a
	// handful long. A longer list is hostile or corrupt.
	MaxMessageIndexes = 64
	// maxMessageIndex bounds each index (a position among a file's or a
	// message's nested messages).
	maxMessageIndex = 1 << 20
)

var (
	// ErrNotWireFormat says the bytes do not start with the Confluent
	// wire-format header (too short, or the first byte is not 0): they are
	// not schema-registry encoded and should be kept as they are.
	ErrNotWireFormat = errors.New("not in the schema registry wire format")
	// ErrMalformed says the bytes claim the wire format but its header is
	// broken (bad schema id, bad or oversized message-index list).
	ErrMalformed = errors.New("malformed schema registry wire-format header")
)

// SplitHeader splits b into the schema id of its Confluent wire-format
// header and what follows it (for Protobuf, still starting with the
// message-index list: see SplitIndexes). The returned slice aliases b.
func SplitHeader(b []byte) (id int, rest []byte, err error) {
	if len(b) < headerSize || b[0] != magicByte {
		return 0, nil, ErrNotWireFormat
	}
	raw := int32(binary.BigEndian.Uint32(b[1:headerSize]))
	if raw < 0 {
		return 0, nil, fmt.Errorf("%w: negative schema id %d", ErrMalformed, raw)
	}
	return int(raw), b[headerSize:], nil
}

// SplitIndexes reads the Protobuf message-index list at the start of b:
// a zig-zag varint count, then that many zig-zag varint indexes, where a
// count of 0 is the shortcut for [0] (the file's first message). It
// returns the indexes and the encoded message after them.
func SplitIndexes(b []byte) (indexes []int, rest []byte, err error) {
	count, n := binary.Varint(b)
	if n <= 0 {
		return nil, nil, fmt.Errorf("%w: unreadable message-index count", ErrMalformed)
	}
	b = b[n:]
	if count == 0 {
		return []int{0}, b, nil
	}
	if count < 0 || count > MaxMessageIndexes {
		return nil, nil, fmt.Errorf("%w: message-index count %d outside 1..%d", ErrMalformed, count, MaxMessageIndexes)
	}
	indexes = make([]int, 0, count)
	for i := int64(0); i < count; i++ {
		v, n := binary.Varint(b)
		if n <= 0 {
			return nil, nil, fmt.Errorf("%w: unreadable message index %d of %d", ErrMalformed, i, count)
		}
		if v < 0 || v > maxMessageIndex {
			return nil, nil, fmt.Errorf("%w: message index %d outside 0..%d", ErrMalformed, v, maxMessageIndex)
		}
		indexes = append(indexes, int(v))
		b = b[n:]
	}
	return indexes, b, nil
}

// splitIndexesDeprecated reads a message-index list in the deprecated
// form: unsigned varints instead of zig-zag ones, as confluent-kafka-python
// up to 1.7 wrote it (later clients' use.deprecated.format). [0] is the
// same single 0 byte in both forms; other lists differ.
func splitIndexesDeprecated(b []byte) (indexes []int, rest []byte, err error) {
	count, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, nil, fmt.Errorf("%w: unreadable message-index count", ErrMalformed)
	}
	b = b[n:]
	if count == 0 {
		return []int{0}, b, nil
	}
	if count > MaxMessageIndexes {
		return nil, nil, fmt.Errorf("%w: message-index count %d outside 1..%d", ErrMalformed, count, MaxMessageIndexes)
	}
	indexes = make([]int, 0, count)
	for i := uint64(0); i < count; i++ {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, nil, fmt.Errorf("%w: unreadable message index %d of %d", ErrMalformed, i, count)
		}
		if v > maxMessageIndex {
			return nil, nil, fmt.Errorf("%w: message index %d outside 0..%d", ErrMalformed, v, maxMessageIndex)
		}
		indexes = append(indexes, int(v))
		b = b[n:]
	}
	return indexes, b, nil
}

// appendIndexesDeprecated is AppendIndexes in the deprecated form.
func appendIndexesDeprecated(dst []byte, indexes []int) []byte {
	if len(indexes) == 1 && indexes[0] == 0 {
		return append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(indexes)))
	for _, i := range indexes {
		dst = binary.AppendUvarint(dst, uint64(i))
	}
	return dst
}

// AppendHeader appends the wire-format header for schema id to dst.
func AppendHeader(dst []byte, id int) []byte {
	if id < 0 || id > math.MaxInt32 {
		panic(fmt.Sprintf("schema: id %d out of range", id))
	}
	dst = append(dst, magicByte)
	return binary.BigEndian.AppendUint32(dst, uint32(id))
}

// AppendIndexes appends a Protobuf message-index list to dst, using the
// single-byte shortcut for [0] as Confluent's serializers do.
func AppendIndexes(dst []byte, indexes []int) []byte {
	if len(indexes) == 1 && indexes[0] == 0 {
		return append(dst, 0)
	}
	dst = binary.AppendVarint(dst, int64(len(indexes)))
	for _, i := range indexes {
		dst = binary.AppendVarint(dst, int64(i))
	}
	return dst
}
