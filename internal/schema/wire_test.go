package schema_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/redrive/redrive/internal/schema"
	"github.com/twmb/franz-go/pkg/sr"
)

func TestWireFormat(t *testing.T) {
	for _, idx := range [][]int{{0}, {1}, {1, 0}, {3, 2, 70000}} {
		var h sr.ConfluentHeader
		b, _ := h.AppendEncode(nil, 258, idx)
		b = append(b, 0xAA)
		id, rest, err := schema.SplitHeader(b)
		if err != nil || id != 258 {
			t.Fatalf("%v: id %d err %v", idx, id, err)
		}
		got, body, err := schema.SplitIndexes(rest)
		if err != nil || !slices.Equal(got, idx) || len(body) != 1 || body[0] != 0xAA {
			t.Fatalf("%v: got %v %x %v", idx, got, body, err)
		}
		if mine := schema.AppendIndexes(schema.AppendHeader(nil, 258), idx); string(mine) != string(b[:len(b)-1]) {
			t.Fatalf("%v: wrote %x, franz-go %x", idx, mine, b[:len(b)-1])
		}
	}
	for _, b := range [][]byte{nil, {0}, {0, 0, 0, 1}, {1, 0, 0, 0, 1}, []byte(`{"a":1}`)} {
		if _, _, err := schema.SplitHeader(b); !errors.Is(err, schema.ErrNotWireFormat) {
			t.Errorf("%x: %v", b, err)
		}
	}
	if _, _, err := schema.SplitHeader([]byte{0, 0x80, 0, 0, 0}); !errors.Is(err, schema.ErrMalformed) {
		t.Errorf("negative id: %v", err)
	}
	for _, b := range [][]byte{{}, {0x80}, {0x01}, {0x02}, {0x02, 0x01}, {0xfe, 0xff, 0xff, 0xff, 0x0f}, {0x02, 0x80, 0x80, 0x80, 0x80, 0x10}} {
		if _, _, err := schema.SplitIndexes(b); !errors.Is(err, schema.ErrMalformed) {
			t.Errorf("indexes %x: %v", b, err)
		}
	}
}

func FuzzSplit(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 1, 0, 2})
	f.Add([]byte{0, 0, 0, 0, 1, 4, 2, 0, 9})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, rest, err := schema.SplitHeader(b)
		if err != nil {
			return
		}
		idx, body, err := schema.SplitIndexes(rest)
		if err != nil {
			return
		}
		if len(idx) == 0 || len(idx) > schema.MaxMessageIndexes || len(body) > len(rest) {
			t.Fatalf("indexes %v body %d of %d", idx, len(body), len(rest))
		}
	})
}
