package events_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/events"
)

// An event's key is at most KeyBytes of text: UTF-8 cut at a character
// boundary, anything else (NUL bytes, invalid UTF-8) the base64 of a
// prefix that decodes; nil for a null key.
func TestRecordKeyIsABoundedPreview(t *testing.T) {
	emoji := strings.Repeat("a", 126) + "😀😀" // the cut at 128 falls inside the first emoji
	bin := []byte(strings.Repeat("\x00", 200))
	for _, c := range []struct {
		name string
		key  []byte
		want events.RecordKeyData
	}{
		{"short", []byte("order-17"), events.RecordKeyData{Key: "order-17", KeyEncoding: "utf8", KeySize: 8}},
		{"empty", []byte{}, events.RecordKeyData{Key: "", KeyEncoding: "utf8", KeySize: 0}},
		{"exactly 128", []byte(strings.Repeat("k", 128)), events.RecordKeyData{Key: strings.Repeat("k", 128), KeyEncoding: "utf8", KeySize: 128}},
		{"a cut character", []byte(emoji), events.RecordKeyData{Key: strings.Repeat("a", 126), KeyEncoding: "utf8", KeySize: len(emoji), KeyTruncated: true}},
		{"NUL bytes", bin, events.RecordKeyData{Key: base64.StdEncoding.EncodeToString(bin[:96]), KeyEncoding: "base64", KeySize: 200, KeyTruncated: true}},
		{"invalid UTF-8", []byte{0xff, 'a'}, events.RecordKeyData{Key: "/2E=", KeyEncoding: "base64", KeySize: 2}},
	} {
		got := events.KeyOf(c.key)
		if got == nil || *got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
	if got := events.KeyOf(nil); got != nil {
		t.Errorf("a null key: %+v, want nil", got)
	}
	if got := events.RecordKey([]byte("abc"), -1); got != nil {
		t.Errorf("size -1: %+v, want nil", got)
	}
}
