package redeliver

import (
	"bytes"

	"github.com/twmb/franz-go/pkg/kgo"
)

// probingCompressor compresses the batches the scheduler and the archiver
// produce with snappy, the Kafka client's default, when they compress: it
// compresses a batch's first probeBytes, and sends the batch uncompressed
// when those do not shrink to 7/8 of their size or less.
//
// Records are redelivered as they were stored, and what cannot be
// compressed (encrypted or already compressed values, random identifiers)
// cost the producer about 0.8 µs of snappy a 1 KiB record for nothing; the
// broker then kept the batch uncompressed anyway (the client sends a batch
// that did not shrink uncompressed). A batch whose first records do not
// compress and whose later ones would is sent uncompressed: larger on the
// wire, never wrong.
type probingCompressor struct{ snappy kgo.Compressor }

// probeBytes is how much of a batch is compressed to decide.
const probeBytes = 4 << 10

func newProbingCompressor() (kgo.Compressor, error) {
	c, err := kgo.DefaultCompressor(kgo.SnappyCompression())
	if err != nil {
		return nil, err
	}
	return probingCompressor{snappy: c}, nil
}

// Compress implements kgo.Compressor.
func (p probingCompressor) Compress(dst *bytes.Buffer, src []byte, flags ...kgo.CompressFlag) ([]byte, kgo.CompressionCodecType) {
	if len(src) > 2*probeBytes {
		probe, codec := p.snappy.Compress(dst, src[:probeBytes], flags...)
		if codec == kgo.CodecNone || len(probe) > probeBytes*7/8 {
			return src, kgo.CodecNone
		}
		dst.Reset()
	}
	return p.snappy.Compress(dst, src, flags...)
}
