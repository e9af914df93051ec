package schema_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"testing"

	"github.com/redrive/redrive/internal/schema"
	"github.com/redrive/redrive/internal/schema/srtest"
)

const tinyAvro = `{"type":"record","name":"T","fields":[{"name":"n","type":"long"}]}`

func TestRegistryOutageAndSecondLevelCache(t *testing.T) {
	reg := srtest.New(t)
	id := reg.Register("t-value", "AVRO", tinyAvro)
	wire := append(header(t, id, nil), 0x02) // n = 1
	l2 := newMemCache()
	ctx := context.Background()

	reg.SetDown(true)
	r := newRegistry(t, reg, l2)
	if _, err := r.Decode(wire); !errors.Is(err, schema.ErrSchemaNotCached) {
		t.Fatalf("ingest path with nothing cached: %v", err)
	}
	before := reg.Requests()
	if _, err := r.Decode(wire); err == nil || reg.Requests() != before {
		t.Fatal("the non-blocking path must never ask the registry")
	}
	if _, err := r.Fetch(ctx, id); !errors.Is(err, schema.ErrRegistryUnavailable) {
		t.Fatalf("fetch while down: %v", err)
	}

	reg.SetDown(false)
	if d, err := r.DecodeContext(ctx, wire); err != nil || string(d.Payload) != `{"n":1}` {
		t.Fatalf("after recovery: %v %s", err, d.Payload)
	}
	if _, err := r.Fetch(ctx, 999); !errors.Is(err, schema.ErrUnknownSchema) {
		t.Fatalf("unknown id: %v", err)
	}

	// A new process, registry down again: the second-level cache serves.
	reg.SetDown(true)
	r2 := newRegistry(t, reg, l2)
	if d, err := r2.DecodeContext(ctx, wire); err != nil || string(d.Payload) != `{"n":1}` {
		t.Fatalf("from the second-level cache: %v %s", err, d.Payload)
	}
}

func TestRegistryAuthTLSAndURLs(t *testing.T) {
	ctx := context.Background()
	t.Run("basic auth over TLS", func(t *testing.T) {
		reg := srtest.New(t, srtest.BasicAuth("key", "secret"), srtest.TLS())
		id := reg.Register("t-value", "AVRO", tinyAvro)
		pool := reg.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
		r, err := schema.New(schema.Config{URLs: []string{reg.URL()}, Username: "key", Password: "secret",
			TLS: &tls.Config{RootCAs: pool}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Fetch(ctx, id); err != nil {
			t.Fatal(err)
		}
		bad, _ := schema.New(schema.Config{URLs: []string{reg.URL()}, Username: "key", Password: "wrong",
			TLS: &tls.Config{RootCAs: pool}}, nil)
		if _, err := bad.Fetch(ctx, id); !errors.Is(err, schema.ErrRegistryUnavailable) {
			t.Fatalf("wrong password: %v", err)
		}
	})
	t.Run("bearer token, first URL dead", func(t *testing.T) {
		reg := srtest.New(t, srtest.BearerToken("tok"))
		id := reg.Register("t-value", "AVRO", tinyAvro)
		r, err := schema.New(schema.Config{URLs: []string{"http://127.0.0.1:1", reg.URL()}, BearerToken: "tok"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Fetch(ctx, id); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("config", func(t *testing.T) {
		for _, c := range []schema.Config{{}, {URLs: []string{"x"}, Password: "p"}, {URLs: []string{"x"}, Username: "u", BearerToken: "t"}} {
			if _, err := schema.New(c, nil); err == nil {
				t.Errorf("%+v accepted", c)
			}
		}
	})
}

func TestHostileSchemas(t *testing.T) {
	for _, src := range []schema.Source{
		{ID: 1, Format: "XML", Text: "<x/>"},
		{ID: 1, Format: schema.FormatAvro, Text: `{"type":"record"`},
		{ID: 1, Format: schema.FormatProtobuf, Text: `syntax = "proto3"; import "nowhere.proto";`},
		{ID: 1, Format: schema.FormatJSON, Text: `{"$ref":"https://example.com/remote.json"}`},
		{ID: 1, Format: schema.FormatAvro, Text: string(make([]byte, schema.MaxSchemaBytes+1))},
	} {
		if _, err := schema.Compile(src); !errors.Is(err, schema.ErrInvalidSchema) {
			t.Errorf("%s %.40q: %v", src.Format, src.Text, err)
		}
	}
	// References nested past the bound.
	src := schema.Source{ID: 1, Format: schema.FormatAvro, Text: tinyAvro}
	refs := &src.References
	for i := 0; i <= schema.MaxReferenceDepth; i++ {
		*refs = []schema.Reference{{Name: "r", Format: schema.FormatAvro, Text: `"long"`}}
		refs = &(*refs)[0].References
	}
	if _, err := schema.Compile(src); !errors.Is(err, schema.ErrInvalidSchema) {
		t.Errorf("deep references: %v", err)
	}
}
