package redeliver

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A batch is compressed with snappy when its first bytes compress, and sent
// as it is when they do not; a short batch is compressed without a probe.
func TestBatchesAreCompressedWhenTheyCompress(t *testing.T) {
	c, err := newProbingCompressor()
	if err != nil {
		t.Fatal(err)
	}
	var orders []byte
	for i := range 200 {
		orders = fmt.Appendf(orders, `{"order_id":%d,"customer":"c-%d","status":"created","lines":[{"sku":"A-1","qty":1}]}`, i, i%7)
	}
	random := make([]byte, 32<<10)
	_, _ = rand.Read(random)
	// Random bytes first, then text: the probe decides for the batch.
	mixed := append(append([]byte{}, random[:8<<10]...), orders...)
	for _, tc := range []struct {
		name string
		src  []byte
		want kgo.CompressionCodecType
	}{
		{"JSON orders", orders, kgo.CodecSnappy},
		{"a short batch of JSON", orders[:2<<10], kgo.CodecSnappy},
		{"random bytes", random, kgo.CodecNone},
		{"random bytes, then JSON", mixed, kgo.CodecNone},
	} {
		var dst bytes.Buffer
		out, codec := c.Compress(&dst, tc.src)
		if codec != tc.want {
			t.Errorf("%s: codec %v, want %v", tc.name, codec, tc.want)
			continue
		}
		if codec == kgo.CodecNone {
			if !bytes.Equal(out, tc.src) {
				t.Errorf("%s: sent uncompressed, but not as it was", tc.name)
			}
			continue
		}
		back, err := kgo.DefaultDecompressor().Decompress(out, codec)
		if err != nil || !bytes.Equal(back, tc.src) {
			t.Errorf("%s: %d bytes compressed to %d do not decompress to the batch (%v)", tc.name, len(tc.src), len(out), err)
		}
		if len(out) >= len(tc.src) {
			t.Errorf("%s: compressed to %d bytes from %d", tc.name, len(out), len(tc.src))
		}
	}
}
