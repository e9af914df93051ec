package schema

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"golang.org/x/sync/singleflight"
)

// Config says how to reach the schema registry.
type Config struct {
	// URLs of the registry; each request tries them in order until one
	// answers. Required.
	URLs []string
	// Username and Password, when Username is set, are sent as HTTP basic
	// auth (Confluent Cloud: API key and secret).
	Username, Password string
	// BearerToken, when set, is sent as "Authorization: Bearer …".
	BearerToken string
	// TLS configures HTTPS (CA, client certificate). Default: the system's
	// roots, no client certificate.
	TLS *tls.Config
	// Timeout bounds each request. Default 10s.
	Timeout time.Duration
	// HTTPClient replaces the client built from TLS and Timeout (tests).
	HTTPClient *http.Client
	// Observe, when set, is called after every registry request with what
	// was asked ("schema", "subjects", "reference"), how long it took and
	// its error (nil on success), for metrics.
	Observe func(op string, took time.Duration, err error)
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	if len(c.URLs) == 0 {
		return errors.New("schema registry: no URL")
	}
	if c.Username == "" && c.Password != "" {
		return errors.New("schema registry: a password without a username")
	}
	if c.Username != "" && c.BearerToken != "" {
		return errors.New("schema registry: both basic auth and a bearer token")
	}
	return nil
}

// Registry decodes and encodes wire-format values with schemas from a
// schema registry. Compiled schemas are kept in memory for the life of
// the process (they are immutable by id); sources are also kept in the
// second-level SchemaCache, when there is one, so known schemas survive a
// restart during a registry outage. It is safe for concurrent use.
type Registry struct {
	cl      *sr.Client
	l2      SchemaCache
	observe func(string, time.Duration, error)
	log     *slog.Logger

	mu  sync.RWMutex
	mem map[int]*Schema

	flight singleflight.Group
}

// New returns a Registry for cfg. l2 may be nil.
func New(cfg Config, l2 SchemaCache) (*Registry, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	hc := cfg.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = cfg.TLS
		hc = &http.Client{Timeout: cfg.Timeout, Transport: limitTransport{tr}}
	} else {
		c := *hc
		base := c.Transport
		if base == nil {
			base = http.DefaultTransport
		}
		c.Transport = limitTransport{base}
		hc = &c
	}
	opts := []sr.ClientOpt{sr.URLs(append([]string(nil), cfg.URLs...)...), sr.HTTPClient(hc), sr.UserAgent("redrive")}
	if cfg.Username != "" {
		opts = append(opts, sr.BasicAuth(cfg.Username, cfg.Password))
	}
	if cfg.BearerToken != "" {
		opts = append(opts, sr.BearerToken(cfg.BearerToken))
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("schema registry client: %w", err)
	}
	return &Registry{
		cl:      cl,
		l2:      l2,
		observe: cfg.Observe,
		log:     cfg.Logger.With("component", "schema"),
		mem:     map[int]*Schema{},
	}, nil
}

// Cached returns the compiled schema for id if it is in memory. It never
// blocks on the registry or the second-level cache.
func (r *Registry) Cached(id int) (*Schema, bool) {
	r.mu.RLock()
	s, ok := r.mem[id]
	r.mu.RUnlock()
	return s, ok
}

// Decode decodes wire-format bytes if their schema is in memory, and
// never waits: for a schema it does not hold it returns an error
// wrapping ErrSchemaNotCached (SchemaIDOf names the id to Fetch in the
// background). Ingest uses it.
func (r *Registry) Decode(b []byte) (Decoded, error) {
	id, _, err := SplitHeader(b)
	if err != nil {
		return Decoded{}, err
	}
	s, ok := r.Cached(id)
	if !ok {
		return Decoded{}, fmt.Errorf("decode: schema %d: %w", id, ErrSchemaNotCached)
	}
	return s.Decode(b)
}

// DecodeContext decodes wire-format bytes, fetching their schema if it
// is not in memory (background backfill, the API).
func (r *Registry) DecodeContext(ctx context.Context, b []byte) (Decoded, error) {
	id, _, err := SplitHeader(b)
	if err != nil {
		return Decoded{}, err
	}
	s, err := r.Fetch(ctx, id)
	if err != nil {
		return Decoded{}, err
	}
	return s.Decode(b)
}

// EncodeLike encodes a natural-JSON payload the way original was
// encoded: same schema id and, for Protobuf, the same message indexes.
// A payload that does not conform returns a *ValidationError.
func (r *Registry) EncodeLike(ctx context.Context, original, payload []byte) ([]byte, error) {
	id, rest, err := SplitHeader(original)
	if err != nil {
		return nil, err
	}
	s, err := r.Fetch(ctx, id)
	if err != nil {
		return nil, err
	}
	d, derr := s.Decode(original)
	if derr == nil {
		// An unchanged payload is the original bytes, whichever of the
		// format's equivalent encodings their writer chose (hamba/avro's
		// sized blocks, say): a plain retry and an unedited "edit" agree.
		if bytes.Equal(d.Payload, payload) {
			return bytes.Clone(original), nil
		}
		// Same message indexes, in the form the producer wrote them.
		return s.EncodeFor(d, payload)
	}
	var indexes []int
	if s.Source.Format == FormatProtobuf {
		if indexes, _, err = SplitIndexes(rest); err != nil {
			return nil, err
		}
	}
	return s.Encode(payload, indexes)
}

// Warm loads into memory up to limit schemas of the second-level cache
// (the most recently stored first) that memory does not hold yet, so that
// after a restart ingest decodes known schemas at once instead of leaving
// their records pending. It never asks the registry. A source that does not
// compile is logged and left to Fetch. It returns how many schemas it
// added; without a cache that can list (SchemaLister) it does nothing.
func (r *Registry) Warm(ctx context.Context, limit int) (int, error) {
	lister, ok := r.l2.(SchemaLister)
	if !ok || limit <= 0 {
		return 0, nil
	}
	srcs, err := lister.RecentSchemas(ctx, limit)
	if err != nil {
		return 0, fmt.Errorf("warm schemas: %w", err)
	}
	added := 0
	for _, src := range srcs {
		if ctx.Err() != nil {
			return added, ctx.Err()
		}
		if _, ok := r.Cached(src.ID); ok {
			continue
		}
		s, err := Compile(src)
		if err != nil {
			r.log.Warn("cached schema does not compile; left to fetch", "schema_id", src.ID, "err", err)
			continue
		}
		r.mu.Lock()
		if _, ok := r.mem[src.ID]; !ok {
			r.mem[src.ID] = s
			added++
		}
		r.mu.Unlock()
	}
	return added, nil
}

// SchemaIDOf returns the schema id in b's wire-format header.
func SchemaIDOf(b []byte) (int, error) {
	id, _, err := SplitHeader(b)
	return id, err
}

// Fetch returns the compiled schema for id: from memory, else from the
// second-level cache, else from the registry (storing it in both). It
// blocks; concurrent fetches of one id share one request. Errors wrap
// ErrUnknownSchema, ErrRegistryUnavailable or ErrInvalidSchema.
func (r *Registry) Fetch(ctx context.Context, id int) (*Schema, error) {
	if s, ok := r.Cached(id); ok {
		return s, nil
	}
	v, err, _ := r.flight.Do(strconv.Itoa(id), func() (any, error) {
		if s, ok := r.Cached(id); ok {
			return s, nil
		}
		s, err := r.load(ctx, id)
		if err != nil {
			return nil, err
		}
		r.mu.Lock()
		r.mem[id] = s
		r.mu.Unlock()
		return s, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*Schema), nil
}

func (r *Registry) load(ctx context.Context, id int) (*Schema, error) {
	if r.l2 != nil {
		src, found, err := r.l2.GetSchema(ctx, id)
		switch {
		case err != nil:
			r.log.Warn("schema cache read failed; asking the registry", "schema_id", id, "err", err)
		case found:
			src.ID = id
			s, err := Compile(src)
			if err == nil {
				return s, nil
			}
			r.log.Warn("cached schema does not compile; asking the registry", "schema_id", id, "err", err)
		}
	}
	src, err := r.fetchSource(ctx, id)
	if err != nil {
		return nil, err
	}
	s, err := Compile(src)
	if err != nil {
		return nil, err
	}
	if r.l2 != nil {
		if err := r.l2.PutSchema(ctx, src); err != nil {
			r.log.Warn("schema cache write failed", "schema_id", id, "err", err)
		}
	}
	return s, nil
}

// fetchSource asks the registry for schema id and everything it
// references, within the MaxReferences/MaxReferenceDepth bounds.
func (r *Registry) fetchSource(ctx context.Context, id int) (Source, error) {
	var sch sr.Schema
	err := r.call(ctx, "schema", func(ctx context.Context) (err error) {
		sch, err = r.cl.SchemaByID(ctx, id)
		return err
	})
	if err != nil {
		return Source{}, fmt.Errorf("fetch schema %d: %w", id, err)
	}
	src := Source{ID: id, Format: formatOf(sch.Type), Text: sch.Schema}
	// The subject is for display only: a registry that will not say is fine.
	var versions []sr.SubjectVersion
	if r.call(ctx, "subjects", func(ctx context.Context) (err error) {
		versions, err = r.cl.SchemaVersionsByID(ctx, id)
		return err
	}) == nil && len(versions) > 0 {
		src.Subject = versions[0].Subject
	}
	count := 0
	var resolve func(refs []sr.SchemaReference, depth int) ([]Reference, error)
	resolve = func(refs []sr.SchemaReference, depth int) ([]Reference, error) {
		if len(refs) == 0 {
			return nil, nil
		}
		if depth > MaxReferenceDepth {
			return nil, fmt.Errorf("%w: schema %d: references nest deeper than %d", ErrInvalidSchema, id, MaxReferenceDepth)
		}
		out := make([]Reference, 0, len(refs))
		for _, ref := range refs {
			if count++; count > MaxReferences {
				return nil, fmt.Errorf("%w: schema %d: more than %d references", ErrInvalidSchema, id, MaxReferences)
			}
			var ss sr.SubjectSchema
			err := r.call(ctx, "reference", func(ctx context.Context) (err error) {
				ss, err = r.cl.SchemaByVersion(ctx, ref.Subject, ref.Version)
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("fetch schema %d: reference %q (subject %q version %d): %w", id, ref.Name, ref.Subject, ref.Version, err)
			}
			sub, err := resolve(ss.References, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, Reference{Name: ref.Name, Subject: ref.Subject, Version: ref.Version,
				Format: formatOf(ss.Type), Text: ss.Schema.Schema, References: sub})
		}
		return out, nil
	}
	if src.References, err = resolve(sch.References, 1); err != nil {
		return Source{}, err
	}
	return src, nil
}

// call runs one registry request, observes it and classifies its error.
func (r *Registry) call(ctx context.Context, op string, fn func(context.Context) error) error {
	start := time.Now()
	err := fn(ctx)
	if r.observe != nil {
		r.observe(op, time.Since(start), err)
	}
	if err == nil {
		return nil
	}
	var re *sr.ResponseError
	if errors.As(err, &re) {
		switch {
		case re.StatusCode == http.StatusNotFound:
			return fmt.Errorf("%w: %s", ErrUnknownSchema, re.Message)
		case re.StatusCode >= 500 || re.StatusCode == http.StatusTooManyRequests:
			return fmt.Errorf("%w: %d %s", ErrRegistryUnavailable, re.StatusCode, re.Message)
		default:
			// 401/403 and other refusals: a configuration problem that may
			// be fixed; retrying later is right.
			return fmt.Errorf("%w: %d %s", ErrRegistryUnavailable, re.StatusCode, re.Message)
		}
	}
	if errors.Is(err, errResponseTooLarge) {
		return fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	return fmt.Errorf("%w: %v", ErrRegistryUnavailable, err)
}

func formatOf(t sr.SchemaType) Format {
	switch t {
	case sr.TypeProtobuf:
		return FormatProtobuf
	case sr.TypeJSON:
		return FormatJSON
	}
	return FormatAvro // the registry's default type
}

// ---- bounded responses ----

var errResponseTooLarge = fmt.Errorf("registry response larger than %d bytes", MaxSchemaBytes+64<<10)

// limitTransport caps every response body: the sr client reads bodies
// whole, and a registry (or something posing as one) is not trusted to
// keep them small.
type limitTransport struct{ base http.RoundTripper }

func (t limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{rc: resp.Body, left: MaxSchemaBytes + 64<<10}
	return resp, nil
}

type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly the limit from a longer one.
		var one [1]byte
		if n, _ := b.rc.Read(one[:]); n > 0 {
			return 0, errResponseTooLarge
		}
		return b.rc.Read(p)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
