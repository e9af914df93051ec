package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/redrive/redrive/internal/ingest"
	"github.com/redrive/redrive/internal/schema"
)

// benchAvroSchema is the schema of the Avro suite's values: a typical
// order event, its note padded to the value size.
const benchAvroSchema = `{"type":"record","name":"Order","namespace":"com.acme.bench","fields":[
	{"name":"order_id","type":"long"},
	{"name":"customer","type":"string"},
	{"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}},
	{"name":"created_at","type":{"type":"long","logicalType":"timestamp-millis"}},
	{"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","PAID","SHIPPED"]}},
	{"name":"coupon","type":["null","string"],"default":null},
	{"name":"note","type":"string"}]}`

const benchAvroID = 4242

// IngestAvro measures ingest of Avro values in the Schema Registry wire
// format with decoding on (each value decoded to JSON, stored as the
// searchable payload) against a raw COPY of the same rows, as Ingest does
// for JSON values. The schema is in Postgres's schema cache and fetched
// once before timing (the steady state: ingest decodes every record
// itself); the registry is never asked.
func IngestAvro(ctx context.Context, cfg Config) (*IngestResult, error) {
	cfg = cfg.withDefaults()
	pool, _, cleanup, err := scratchDB(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	st := pool.Store()
	src := schema.Source{ID: benchAvroID, Format: schema.FormatAvro, Text: benchAvroSchema, Subject: "orders-value"}
	if err := st.PutSchema(ctx, src); err != nil {
		return nil, err
	}
	// Nothing listens there: every schema comes from Postgres's cache.
	reg, err := schema.New(schema.Config{URLs: []string{"http://127.0.0.1:1"}, Timeout: time.Second, Logger: quiet}, st)
	if err != nil {
		return nil, err
	}
	if _, err := reg.Fetch(ctx, benchAvroID); err != nil {
		return nil, err
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, benchTopic))
	if err != nil {
		return nil, fmt.Errorf("start kfake: %w", err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	fmt.Fprintf(cfg.Out, "ingest-avro: %d records, %d-byte Avro values (wire format), decoding on\n", cfg.Records, cfg.ValueSize)
	if err := produceAvroFailures(ctx, brokers, cfg.Records, cfg.ValueSize); err != nil {
		return nil, err
	}
	res := &IngestResult{Records: cfg.Records}
	quiesce(ctx, pool)
	if res.Ingest, res.IngestCount, err = timeIngestTopicWith(ctx, pool, brokers, benchTopic, cfg.Records, nil,
		func(c *ingest.Config) { c.Schemas = reg }); err != nil {
		return nil, err
	}
	var undecoded int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM redrive_record WHERE value_schema IS NULL").Scan(&undecoded); err != nil {
		return nil, err
	}
	if undecoded > 0 {
		return nil, fmt.Errorf("ingest-avro: %d records not decoded", undecoded)
	}
	if res.RawCopy, err = timeRawCopy(ctx, pool, ingestBatch); err != nil {
		return nil, err
	}
	e2e, raw := rate(res.IngestCount, res.Ingest), rate(res.Records, res.RawCopy)
	fmt.Fprintf(cfg.Out, "  end-to-end ingest   %9.0f records/s  (%d records in %v, Avro decoded)\n", e2e, res.IngestCount, res.Ingest.Round(time.Millisecond))
	fmt.Fprintf(cfg.Out, "  raw COPY baseline   %9.0f records/s  (%d records in %v)\n", raw, res.Records, res.RawCopy.Round(time.Millisecond))
	fmt.Fprintf(cfg.Out, "  ratio               %9.2f          (target >= %.2f)\n", e2e/raw, IngestTarget)
	return res, nil
}

// AvroFigures is the Avro suite's ratio.
func AvroFigures(r *IngestResult) []Figure {
	return []Figure{{Name: "ingest of Avro, decoded / raw COPY", Value: rate(r.IngestCount, r.Ingest) / rate(r.Records, r.RawCopy), Target: IngestTarget}}
}

// produceAvroFailures fills the DLQ topic with native envelopes of distinct
// Avro values of about size bytes.
func produceAvroFailures(ctx context.Context, brokers []string, n, size int) error {
	s := avro.MustParse(benchAvroSchema)
	var h sr.ConfluentHeader
	base := time.Now().UnixMilli()
	return produceAll(ctx, brokers, n, func(i int) (*kgo.Record, error) {
		pad := make([]byte, max(size-120, 16)/2)
		_, _ = rand.Read(pad)
		body, err := avro.Marshal(s, map[string]any{
			"order_id": int64(1_000_000_000 + i), "customer": fmt.Sprintf("c-%d", i%5000),
			"amount": avroDecimal(int64(i) * 137), "created_at": time.UnixMilli(base + int64(i)).UTC(),
			"status": "PAID", "coupon": nil, "note": hex.EncodeToString(pad),
		})
		if err != nil {
			return nil, fmt.Errorf("encode avro: %w", err)
		}
		value, _ := h.AppendEncode(nil, benchAvroID, nil)
		return benchFailure(i, append(value, body...)), nil
	})
}

// avroDecimal is cents as a decimal(12,2).
func avroDecimal(cents int64) *big.Rat { return big.NewRat(cents, 100) }
