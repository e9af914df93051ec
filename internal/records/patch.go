package records

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/store"
)

// A bulk retry may carry an RFC 6902 JSON Patch, applied to each selected
// record's payload (a schema-encoded value decoded from its bytes, a JSON
// value itself), the result validated and encoded as a single retry's
// override.payload is (EncodePayload). A record the patch fails on (a test
// op, a missing path), whose result does not conform, or with no payload
// is skipped: never produced half-right.
//
// github.com/evanphx/json-patch/v5 applies the operations: it works on the
// raw JSON bytes (values it does not touch stay byte for byte; a number is
// its text, never a float64), keeps object members in order, and bounds
// copy growth. Its non-standard negative array indexes and HTML escaping
// are turned off.

// MaxPatchOps bounds the operations of one patch.
const MaxPatchOps = 100

// maxPatchCopyBytes bounds how much "copy" operations may add to one payload.
const maxPatchCopyBytes = 1 << 20

// NoPayload is why a record with no payload to patch is skipped.
const NoPayload = "no decoded payload"

// Patch is a parsed RFC 6902 JSON Patch.
type Patch struct {
	// Raw is the patch as given (a JSON array), stored on the task.
	Raw json.RawMessage
	ops jsonpatch.Patch
}

// PatchOpError is a malformed operation of a patch: Field is "op",
// "path", "from" or "value" ("" for the patch as a whole, Index -1).
type PatchOpError struct {
	Index int
	Field string
	Msg   string
}

func (e *PatchOpError) Error() string {
	if e.Index < 0 {
		return "patch: " + e.Msg
	}
	return fmt.Sprintf("patch[%d].%s: %s", e.Index, e.Field, e.Msg)
}

// ParsePatch reads a JSON Patch, checking each operation's shape: op one of
// add, remove, replace, move, copy, test; path (and from for move and
// copy) a JSON Pointer; value given for add, replace and test.
func ParsePatch(raw []byte) (*Patch, error) {
	var items []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || items == nil {
		return nil, &PatchOpError{Index: -1, Msg: "must be an array of operations (RFC 6902)"}
	}
	if len(items) == 0 {
		return nil, &PatchOpError{Index: -1, Msg: "has no operations"}
	}
	if len(items) > MaxPatchOps {
		return nil, &PatchOpError{Index: -1, Msg: "at most " + strconv.Itoa(MaxPatchOps) + " operations"}
	}
	for i, it := range items {
		if it == nil {
			return nil, &PatchOpError{Index: i, Field: "op", Msg: "the operation must be an object"}
		}
		var op string
		if err := json.Unmarshal(it["op"], &op); err != nil {
			return nil, &PatchOpError{Index: i, Field: "op", Msg: "required: one of add, remove, replace, move, copy, test"}
		}
		switch op {
		case "add", "remove", "replace", "move", "copy", "test":
		default:
			return nil, &PatchOpError{Index: i, Field: "op", Msg: strconv.Quote(op) + " is not one of add, remove, replace, move, copy, test"}
		}
		if msg := pointerProblem(it["path"]); msg != "" {
			return nil, &PatchOpError{Index: i, Field: "path", Msg: msg}
		}
		if op == "move" || op == "copy" {
			if msg := pointerProblem(it["from"]); msg != "" {
				return nil, &PatchOpError{Index: i, Field: "from", Msg: msg}
			}
		}
		if _, ok := it["value"]; !ok && (op == "add" || op == "replace" || op == "test") {
			return nil, &PatchOpError{Index: i, Field: "value", Msg: "required for " + op}
		}
	}
	ops, err := jsonpatch.DecodePatch(raw)
	if err != nil {
		return nil, &PatchOpError{Index: -1, Msg: err.Error()}
	}
	var compact bytes.Buffer
	_ = json.Compact(&compact, raw)
	return &Patch{Raw: compact.Bytes(), ops: ops}, nil
}

// pointerProblem says what is wrong with a JSON Pointer, "" if nothing.
func pointerProblem(raw json.RawMessage) string {
	var p string
	if raw == nil || json.Unmarshal(raw, &p) != nil {
		return "required: a JSON Pointer (RFC 6901) such as /amount"
	}
	if p != "" && !strings.HasPrefix(p, "/") {
		return "must be a JSON Pointer (RFC 6901): empty or starting with /"
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 == len(p) || (p[i+1] != '0' && p[i+1] != '1')) {
			return "must be a JSON Pointer (RFC 6901): ~ is written ~0, / in a name ~1"
		}
	}
	return ""
}

// PatchOutcome is what a patch does to one record.
type PatchOutcome struct {
	// Before and After are the payload and the patched one (After nil when
	// the patch failed on it).
	Before, After json.RawMessage
	// Encoded is After encoded as the record's value; nil when it failed.
	Encoded *EncodedPayload
	// Field and Message say why it failed: the JSON Pointer of the failing
	// operation or offending value ("" for the whole payload), and what
	// went wrong. Message is empty when it applies.
	Field, Message string
}

func (o *PatchOutcome) failed() bool { return o.Message != "" }

func patchOptions() *jsonpatch.ApplyOptions {
	o := jsonpatch.NewApplyOptions()
	o.SupportNegativeIndices = false
	o.EscapeHTML = false
	o.AccumulatedCopySizeLimit = maxPatchCopyBytes
	return o
}

// ApplyPatch patches r's payload, validates the result against r's schema
// and encodes it. A failure on the record's side is in the outcome; the
// error is set only when the registry could not be reached (try again).
func (s *Service) ApplyPatch(ctx context.Context, r *dlq.Record, p *Patch) (*PatchOutcome, error) {
	payload, ok, err := s.payloadOf(ctx, r)
	if err != nil {
		return nil, err
	}
	if !ok {
		return &PatchOutcome{Message: NoPayload}, nil
	}
	out := &PatchOutcome{Before: payload}
	doc := []byte(payload)
	opts := patchOptions()
	// One operation at a time, to say which one failed.
	for _, op := range p.ops {
		next, err := jsonpatch.Patch{op}.ApplyWithOptions(doc, opts)
		if err != nil {
			out.Field, _ = op.Path()
			out.Message = patchMessage(op.Kind(), err)
			return out, nil
		}
		doc = next
	}
	out.After = doc
	enc, err := s.EncodePayload(ctx, r, doc)
	var pe *PayloadError
	var unsupported *PayloadUnsupportedError
	switch {
	case errors.As(err, &pe):
		out.Field, out.Message = pe.Pointer, pe.Message
	case errors.As(err, &unsupported):
		out.Message = unsupported.Why
	case err != nil:
		return nil, err
	default:
		out.Encoded, out.After = enc, enc.Payload
	}
	return out, nil
}

// patchMessage says why an operation failed, in the library's words
// without its wrapping.
func patchMessage(op string, err error) string {
	switch {
	case errors.Is(err, jsonpatch.ErrTestFailed):
		return "test failed: the value differs"
	case errors.Is(err, jsonpatch.ErrMissing):
		return op + ": nothing at this path"
	}
	return op + ": " + err.Error()
}

// PatchForTask is the task runner's step for one record of a patched
// retry: the record's redelivery edit (its pending topic and headers
// kept), or why it is skipped. An error (the registry unreachable) fails
// the batch, to be tried again: a record is never skipped for an outage.
func (s *Service) PatchForTask(ctx context.Context, raw json.RawMessage, r *dlq.Record) (*dlq.Redelivery, string, error) {
	p, err := ParsePatch(raw)
	if err != nil {
		return nil, "", fmt.Errorf("stored patch: %w", err)
	}
	o, err := s.ApplyPatch(ctx, r, p)
	if err != nil {
		return nil, "", err
	}
	if o.failed() {
		if o.Field != "" {
			return nil, o.Field + ": " + o.Message, nil
		}
		return nil, o.Message, nil
	}
	return o.Encoded.Redelivery(r.Redelivery), "", nil
}

// PatchDryRun is what a patch would do to the records a bulk retry selects.
type PatchDryRun struct {
	// Applies counts the records whose patched payload validates, Fails
	// the others (of Evaluated).
	Applies, Fails int64
	// Evaluated is how many records were evaluated: at most
	// MaxPatchDryRun, the selection's first in id order.
	Evaluated int64
	// Errors are the first MaxPatchErrors failures, Samples the first
	// MaxPatchSamples records it applies to.
	Errors  []PatchError
	Samples []PatchSample
}

// PatchError is why a patch fails on a record.
type PatchError struct {
	ID      string `json:"id"`
	Field   string `json:"field"`
	Message string `json:"message"`
}

// PatchSample is a record's payload before and after a patch.
type PatchSample struct {
	ID     string          `json:"id"`
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
}

// Bounds of a patch's dry run.
const (
	MaxPatchDryRun  = 10_000
	MaxPatchErrors  = 5
	MaxPatchSamples = 3
	patchReadBatch  = 500
)

// dryRunPatch evaluates p over the first MaxPatchDryRun records a bulk
// retry of f would retry, a group at a time (GroupBytes: a few megabytes of
// records, whatever their sizes), each record dropped once evaluated but
// for the samples kept.
func (s *Service) dryRunPatch(ctx context.Context, f *filter.Filter, queueGlobs []string, p *Patch) (*PatchDryRun, error) {
	out := &PatchDryRun{Errors: []PatchError{}, Samples: []PatchSample{}}
	sc := s.RetryScope()
	sc.QueueGlobs = queueGlobs
	g := groupReader{
		sizes: func(ctx context.Context, after string, limit int) ([]store.RecordSize, error) {
			return s.store.RetryCandidateSizes(ctx, f, sc, after, limit)
		},
		read: func(ctx context.Context, ids []string) ([]dlq.Record, error) {
			return s.store.RetryCandidatesAmong(ctx, f, sc, ids)
		},
		page: patchReadBatch, max: MaxPatchDryRun, maxBytes: GroupBytes,
	}
	for {
		recs, err := g.next(ctx)
		if err != nil {
			return nil, err
		}
		if recs == nil {
			return out, nil
		}
		for i := range recs {
			r := &recs[i]
			o, err := s.ApplyPatch(ctx, r, p)
			if err != nil {
				return nil, err
			}
			out.Evaluated++
			if o.failed() {
				out.Fails++
				if len(out.Errors) < MaxPatchErrors {
					out.Errors = append(out.Errors, PatchError{ID: r.ID, Field: o.Field, Message: o.Message})
				}
				continue
			}
			out.Applies++
			if len(out.Samples) < MaxPatchSamples {
				out.Samples = append(out.Samples, PatchSample{ID: r.ID, Before: o.Before, After: o.After})
			}
		}
	}
}
