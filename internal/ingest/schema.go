package ingest

import (
	"errors"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/metrics"
	"github.com/redrive/redrive/internal/schema"
	"github.com/redrive/redrive/internal/store"
)

// decodeSchemas decodes a new record's value and key when they are in the
// Schema Registry wire format, with the schemas held in memory only: ingest
// never waits on the registry. Decoded, the value's natural JSON becomes
// its payload (searched by path and value); a schema not held yet leaves
// the record raw and pending, for the background decoder; any other
// failure is kept in DecodeError, the bytes untouched either way.
func (in *Ingester) decodeSchemas(r *dlq.Record, b *batch) {
	reg := in.cfg.Schemas
	if reg == nil {
		return
	}
	var errs []string
	if ref, payload, pending, err := in.decodeOne(reg, r.Value); ref != nil {
		r.ValueSchema, r.Payload = ref, payload
	} else if pending {
		r.DecodePending = true
	} else if err != nil {
		errs = append(errs, "value: "+err.Error())
	}
	if ref, payload, pending, err := in.decodeOne(reg, r.Key); ref != nil {
		r.KeySchema, r.KeyPayload = ref, payload
	} else if pending {
		r.DecodePending = true
	} else if err != nil {
		errs = append(errs, "key: "+err.Error())
	}
	r.DecodeError = joinDecodeErrors(errs)
	if r.DecodePending {
		b.pending = true
	}
}

// decodeOne decodes b if it is in the wire format: ref is nil when it was
// not decoded, pending says its schema is not held yet.
func (in *Ingester) decodeOne(reg *schema.Registry, b []byte) (ref *dlq.SchemaRef, payload []byte, pending bool, err error) {
	if _, _, err := schema.SplitHeader(b); err != nil {
		return nil, nil, false, nil // not in the wire format: the bytes as they are
	}
	d, err := reg.Decode(b)
	switch {
	case err == nil:
		in.cfg.Metrics.Schema.Decoded(string(d.Format), metrics.DecodeDecoded)
		return store.SchemaRefOf(d), d.Payload, false, nil
	case errors.Is(err, schema.ErrSchemaNotCached):
		in.cfg.Metrics.Schema.Decoded("", metrics.DecodePending)
		return nil, nil, true, nil
	}
	format := ""
	if id, _ := schema.SchemaIDOf(b); id > 0 {
		if s, ok := reg.Cached(id); ok {
			format = string(s.Source.Format)
		}
	}
	in.cfg.Metrics.Schema.Decoded(format, metrics.DecodeError)
	return nil, nil, false, err
}

func joinDecodeErrors(errs []string) string {
	switch len(errs) {
	case 0:
		return ""
	case 1:
		return errs[0]
	}
	return errs[0] + "; " + errs[1]
}
