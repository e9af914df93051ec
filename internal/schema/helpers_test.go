package schema_test

import (
	"context"
	"sync"
	"testing"

	"github.com/redrive/redrive/internal/schema"
	"github.com/redrive/redrive/internal/schema/srtest"
	"github.com/twmb/franz-go/pkg/sr"
)

// memCache is an in-memory second-level SchemaCache, as the store will be.
type memCache struct {
	mu   sync.Mutex
	m    map[int]schema.Source
	puts int
}

func newMemCache() *memCache { return &memCache{m: map[int]schema.Source{}} }

func (c *memCache) GetSchema(_ context.Context, id int) (schema.Source, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.m[id]
	return s, ok, nil
}

func (c *memCache) PutSchema(_ context.Context, s schema.Source) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[s.ID] = s
	c.puts++
	return nil
}

// newRegistry returns a Registry talking to reg.
func newRegistry(t *testing.T, reg *srtest.Registry, l2 schema.SchemaCache) *schema.Registry {
	t.Helper()
	r, err := schema.New(schema.Config{URLs: []string{reg.URL()}, HTTPClient: reg.Client()}, l2)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// srClient is franz-go's registry client, used by tests to register
// schemas over HTTP like a producer's serializer would.
func srClient(t testing.TB, reg *srtest.Registry) *sr.Client {
	t.Helper()
	cl, err := sr.NewClient(sr.URLs(reg.URL()), sr.HTTPClient(reg.Client()))
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func register(t testing.TB, cl *sr.Client, subject string, s sr.Schema) int {
	t.Helper()
	ss, err := cl.CreateSchema(context.Background(), subject, s)
	if err != nil {
		t.Fatalf("register %s: %v", subject, err)
	}
	return ss.ID
}

// header is the wire header as franz-go's serde writes it.
func header(t testing.TB, id int, indexes []int) []byte {
	t.Helper()
	var h sr.ConfluentHeader
	b, err := h.AppendEncode(nil, id, indexes)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// roundTrip fetches the schema, checks the non-blocking path before and
// after, decodes wire to the expected JSON and re-encodes it byte for byte.
func roundTrip(t *testing.T, r *schema.Registry, wire []byte, want string) schema.Decoded {
	t.Helper()
	ctx := context.Background()
	d, err := r.DecodeContext(ctx, wire)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if string(d.Payload) != want {
		t.Fatalf("payload\n got: %s\nwant: %s", d.Payload, want)
	}
	d2, err := r.Decode(wire) // now cached: the non-blocking path works
	if err != nil || string(d2.Payload) != want {
		t.Fatalf("non-blocking decode after fetch: %v %s", err, d2.Payload)
	}
	// The encoder itself writes the original bytes back…
	s, ok := r.Cached(d.SchemaID)
	if !ok {
		t.Fatal("schema not cached after a decode")
	}
	again, err := s.EncodeFor(d, d.Payload)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	if string(again) != string(wire) {
		t.Fatalf("encoded bytes differ\n got: %x\nwant: %x", again, wire)
	}
	// …and so does the API's path.
	again, err = r.EncodeLike(ctx, wire, d.Payload)
	if err != nil {
		t.Fatalf("re-encode: %v", err)
	}
	if string(again) != string(wire) {
		t.Fatalf("re-encoded bytes differ\n got: %x\nwant: %x", again, wire)
	}
	return d
}
