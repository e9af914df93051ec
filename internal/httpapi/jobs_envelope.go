package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Publishing an OJS job envelope (POST /jobs, docs/api.md#workers): the
// attributes of OJS core §5 at the top level, the enqueue options of the HTTP
// binding §9.1 in "options", and whatever else the envelope carries kept as
// it was sent and returned on the job (core §5.5 constraint 4: "Implementations
// MUST preserve any attributes not defined by this specification when
// storing and returning job data. Implementations MUST NOT reject a job
// envelope because it contains unknown attributes").

// CodeInvalidPayload is the error code (400) of a POST /jobs body that is
// not JSON (OJS errors §4.1: INVALID_PAYLOAD, "Malformed JSON").
const CodeInvalidPayload = "invalid_payload"

// maxJobAttributesBytes bounds the attributes a job keeps without acting on
// them (unknown ones, schema, tags), as compact JSON.
const maxJobAttributesBytes = 64 << 10

// jobSystemAttributes are OJS core §5.3's system-managed attributes: "If a
// client includes system-managed attributes in a PUSH operation, the
// implementation MUST ignore the client-provided values and use its own."
var jobSystemAttributes = []string{"id", "state", "attempt", "created_at", "enqueued_at", "started_at",
	"completed_at", "error", "result"}

// jobViewKeys are the keys of Redrive's job view (jobJSON). A published
// attribute of one of these names is Redrive's to set: it is ignored as a
// system-managed one is, never kept (it would shadow Redrive's own value).
var jobViewKeys = func() map[string]bool {
	keys := map[string]bool{}
	t := reflect.TypeFor[jobJSON]()
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			keys[name] = true
		}
	}
	for _, k := range jobSystemAttributes {
		keys[k] = true
	}
	return keys
}()

// envelope is a published job as Redrive acts on it.
type envelope struct {
	Type  string
	Queue *string
	// QueueField names where Queue came from: queue or options.queue.
	QueueField string
	Args       json.RawMessage
	Meta       json.RawMessage
	Retry      json.RawMessage
	// ID is the id the client chose ("": Redrive makes one).
	ID string
	// Priority (core §5.2), DelayUntil (core scheduled_at, options
	// delay_until), VisibilityMs (worker protocol §5.3, options
	// visibility_timeout_ms) and TimeoutMs (core timeout, options
	// timeout_ms), each nil when not sent; fields names what sent each.
	Priority                *int64
	DelayUntil              *time.Time
	VisibilityMs, TimeoutMs *int64
	fields                  map[string]string
	// Unique is the unique policy as sent (core §5.2, unique jobs spec).
	Unique json.RawMessage
	// Kept are the attributes kept and returned as sent.
	Kept map[string]json.RawMessage
}

// Bounds of a job's options.
const (
	// minJobPriority and maxJobPriority bound priority (core §5.2: "implementations
	// MUST support at least the range -100 to 100"; Redrive supports that range).
	minJobPriority, maxJobPriority = -100, 100
	// maxJobTimeoutMs bounds an execution timeout and a job's own visibility
	// timeout: as the longest lease a fetch may ask for.
	maxJobTimeoutMs = maxVisibilitySecs * 1000
)

// setOnce records that field set option name to v, refusing a second field
// (top level and options) that disagrees.
func (e *envelope) setOnce(name, field string, same bool) error {
	if prev, ok := e.fields[name]; ok && !same {
		return invalidParam(field, "is sent as well as "+prev+" with another value: send one of the two")
	}
	e.fields[name] = field
	return nil
}

// priority reads a priority (core §5.2).
func (e *envelope) priority(raw json.RawMessage, field string) error {
	var p *int64
	if err := decodeField(raw, field, fmt.Sprintf("an integer from %d to %d", minJobPriority, maxJobPriority), &p); err != nil || p == nil {
		return err
	}
	if *p < minJobPriority || *p > maxJobPriority {
		return invalidParam(field, fmt.Sprintf("must be an integer from %d to %d (higher is fetched first), got %d", minJobPriority, maxJobPriority, *p))
	}
	if err := e.setOnce("priority", field, e.Priority == nil || *e.Priority == *p); err != nil {
		return err
	}
	e.Priority = p
	return nil
}

// millis reads a positive duration sent in unit (1000 for seconds, 1 for
// milliseconds) into *dst, as milliseconds; name is the option's, for a
// field sent twice.
func (e *envelope) millis(raw json.RawMessage, field, name string, unit int64, dst **int64) error {
	what := "milliseconds"
	if unit == 1000 {
		what = "seconds"
	}
	want := fmt.Sprintf("a positive integer number of %s, at most %d", what, maxJobTimeoutMs/unit)
	var n *int64
	if err := decodeField(raw, field, want, &n); err != nil || n == nil {
		return err
	}
	if *n < 1 || *n > maxJobTimeoutMs/unit {
		return invalidParam(field, "must be "+want+fmt.Sprintf(", got %d", *n))
	}
	ms := *n * unit
	if err := e.setOnce(name, field, *dst == nil || **dst == ms); err != nil {
		return err
	}
	*dst = &ms
	return nil
}

// delayUntil reads when a job is due (core scheduled_at: RFC 3339 with a
// time zone).
func (e *envelope) delayUntil(raw json.RawMessage, field string) error {
	var v *string
	if err := decodeField(raw, field, "an RFC 3339 time with a time zone, such as \"2026-03-15T09:30:00Z\"", &v); err != nil || v == nil {
		return err
	}
	t, err := time.Parse(time.RFC3339Nano, *v)
	if err != nil {
		return invalidParam(field, "must be an RFC 3339 time with a time zone, such as \"2026-03-15T09:30:00Z\", got "+jsonString(*v))
	}
	if err := e.setOnce("delay_until", field, e.DelayUntil == nil || e.DelayUntil.Equal(t)); err != nil {
		return err
	}
	e.DelayUntil = &t
	return nil
}

// jobIDProblem says what is wrong with a client's job id (core §5.1: "MUST
// be a UUIDv7 formatted as a lowercase hexadecimal string with hyphens ...
// The standard 8-4-4-4-12 format MUST be used"), or "".
func jobIDProblem(id string) string {
	const want = "must be a UUIDv7 in lowercase 8-4-4-4-12 form, such as \"019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f\", or be left out"
	u, err := uuid.Parse(id)
	if err != nil || len(id) != 36 || u.String() != id {
		return want + ", got " + jsonString(id)
	}
	if u.Version() != 7 || u.Variant() != uuid.RFC4122 {
		return want + fmt.Sprintf(", got a version %d UUID", u.Version())
	}
	return ""
}

// unsupportedAttr is the 422 of an attribute or option Redrive does not
// implement, sent with a value other than its default.
func unsupportedAttr(field, what string) *APIError {
	return &APIError{Status: http.StatusUnprocessableEntity, Code: CodeUnsupported,
		Message: field + ": " + what + " is not supported by Redrive (OJS level 1); leave it out, or send its default",
		Details: map[string]any{"parameter": field}}
}

// isNull says whether a raw JSON value is absent or null.
func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// decodeField decodes raw into v, or a 400 naming field that says what was
// expected.
func decodeField(raw json.RawMessage, field, want string, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return invalidParam(field, "must be "+want)
	}
	return nil
}

// unsupportedUnlessDefault refuses an attribute Redrive does not implement
// unless it is null or equal to def (its documented default; "" for none).
func unsupportedUnlessDefault(raw json.RawMessage, field, what, def string) error {
	if isNull(raw) || (def != "" && string(bytes.TrimSpace(raw)) == def) {
		return nil
	}
	return unsupportedAttr(field, what)
}

// decodeEnvelope reads a POST /jobs body.
func decodeEnvelope(body []byte) (*envelope, error) {
	var raw map[string]json.RawMessage
	if !json.Valid(body) {
		// OJS errors §4.1: INVALID_PAYLOAD, "Job envelope fails structural
		// validation", such as "Malformed JSON".
		return nil, &APIError{Status: http.StatusBadRequest, Code: CodeInvalidPayload,
			Message: "body: must be a JSON object, an OJS job envelope; it is empty or not valid JSON",
			Details: map[string]any{"parameter": "body"}}
	}
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' {
		return nil, invalidParam("body", "must be a JSON object: an OJS job envelope")
	}
	if err := decodeStrict(body, &raw); err != nil {
		return nil, err
	}
	e := &envelope{Kept: map[string]json.RawMessage{}, QueueField: "queue", fields: map[string]string{}}
	var opts json.RawMessage
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		v := raw[k]
		switch k {
		case "specversion":
			var sv *string
			if err := decodeField(v, k, `the string "1.0"`, &sv); err != nil {
				return nil, err
			}
			if sv != nil && *sv != "1.0" {
				return nil, invalidParam(k, "must be \"1.0\" when present, got "+jsonString(*sv))
			}
		case "type":
			var s *string
			if err := decodeField(v, k, `a string such as "email.send"`, &s); err != nil {
				return nil, err
			}
			if s != nil {
				e.Type = *s
			}
		case "queue":
			if err := decodeField(v, k, "a string: the queue's name", &e.Queue); err != nil {
				return nil, err
			}
		case "args":
			e.Args = v
		case "meta":
			e.Meta = v
		case "retry":
			e.Retry = v
		case "options":
			opts = v // after queue and retry: the two may not disagree
		case "id":
			var id *string
			if err := decodeField(v, k, "a string: a UUIDv7", &id); err != nil {
				return nil, err
			}
			if id != nil {
				if msg := jobIDProblem(*id); msg != "" {
					return nil, invalidParam(k, msg)
				}
				e.ID = *id
			}
		case "priority":
			if err := e.priority(v, k); err != nil {
				return nil, err
			}
		case "timeout":
			// Core §5.2: "A value of 0 means no timeout".
			if string(bytes.TrimSpace(v)) == "0" {
				continue
			}
			if err := e.millis(v, k, "timeout", 1000, &e.TimeoutMs); err != nil {
				return nil, err
			}
		case "visibility_timeout":
			if err := e.millis(v, k, "visibility_timeout", 1000, &e.VisibilityMs); err != nil {
				return nil, err
			}
		case "scheduled_at":
			if err := e.delayUntil(v, k); err != nil {
				return nil, err
			}
		case "expires_at":
			if err := unsupportedUnlessDefault(v, k, "job expiry", ""); err != nil {
				return nil, err
			}
		case "unique":
			if !isNull(v) {
				e.Unique = v
			}
		case "schema":
			// Core §5.2: "Implementations that do not support schema
			// validation MUST preserve the field without rejecting it."
			var s *string
			if err := decodeField(v, k, "a string: the URI of the args' schema", &s); err != nil {
				return nil, err
			}
			if s != nil {
				e.Kept[k] = v
			}
		default:
			if !jobViewKeys[k] {
				e.Kept[k] = v
			}
		}
	}
	if err := e.options(opts); err != nil {
		return nil, err
	}
	return e, nil
}

// options reads the enqueue options of HTTP binding §9.1.
func (e *envelope) options(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var o map[string]json.RawMessage
	if t := bytes.TrimSpace(raw); t[0] != '{' {
		return invalidParam("options", "must be a JSON object of enqueue options")
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return invalidParam("options", "must be a JSON object of enqueue options")
	}
	for _, k := range slices.Sorted(maps.Keys(o)) {
		v, field := o[k], "options."+k
		var err error
		switch k {
		case "queue":
			var q *string
			if err = decodeField(v, field, "a string: the queue's name", &q); err == nil && q != nil {
				if e.Queue != nil && *e.Queue != *q {
					return invalidParam(field, fmt.Sprintf("is %s, but queue is %s: send one, or the same in both",
						jsonString(*q), jsonString(*e.Queue)))
				}
				e.Queue, e.QueueField = q, field
			}
		case "retry":
			if !isNull(v) {
				if !isNull(e.Retry) && !bytes.Equal(bytes.TrimSpace(v), bytes.TrimSpace(e.Retry)) {
					return invalidParam(field, "is sent as well as retry: send one of the two")
				}
				e.Retry = v
			}
		case "tags":
			var tags []string
			if err = decodeField(v, field, "an array of strings", &tags); err == nil && len(tags) > 0 {
				e.Kept["tags"] = v
			}
		case "priority":
			err = e.priority(v, field)
		case "pending":
			err = unsupportedUnlessDefault(v, field, "pending jobs (ACTIVATE)", "false")
		case "timeout_ms":
			err = e.millis(v, field, "timeout", 1, &e.TimeoutMs)
		case "delay_until":
			err = e.delayUntil(v, field)
		case "expires_at":
			err = unsupportedUnlessDefault(v, field, "job expiry", "")
		case "unique":
			if !isNull(v) {
				if !isNull(e.Unique) && !bytes.Equal(bytes.TrimSpace(v), bytes.TrimSpace(e.Unique)) {
					return invalidParam(field, "is sent as well as unique: send one of the two")
				}
				e.Unique = v
			}
		case "visibility_timeout_ms":
			err = e.millis(v, field, "visibility_timeout", 1, &e.VisibilityMs)
		default:
			return invalidParam(field, "unknown enqueue option; the options are queue, retry, tags, priority, timeout_ms, delay_until, unique, visibility_timeout_ms, and (at their defaults) pending, expires_at")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// keptAttributes encodes the attributes a job keeps as one compact JSON
// object, nil when there are none; at most maxJobAttributesBytes.
func (e *envelope) keptAttributes() (json.RawMessage, error) {
	if len(e.Kept) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(e.Kept)
	if err != nil {
		return nil, invalidParam("body", "must hold valid JSON attributes")
	}
	if len(b) > maxJobAttributesBytes {
		keys := slices.Sorted(maps.Keys(e.Kept))
		return nil, &APIError{Status: http.StatusRequestEntityTooLarge, Code: CodeInvalidRequest,
			Message: fmt.Sprintf("attributes: the attributes kept as sent (%s) take %d bytes, at most %d",
				strings.Join(keys, ", "), len(b), maxJobAttributesBytes),
			Details: map[string]any{"parameter": "attributes", "fields": keys}}
	}
	return b, nil
}

// withAttributes returns the encoded job view base with the kept attributes
// attrs added at its top level; a key the view has is never overwritten.
func withAttributes(base []byte, attrs json.RawMessage) ([]byte, error) {
	if isNull(attrs) {
		return base, nil
	}
	var kept map[string]json.RawMessage
	if err := json.Unmarshal(attrs, &kept); err != nil {
		return nil, fmt.Errorf("decode job attributes: %w", err)
	}
	for k := range kept {
		if jobViewKeys[k] {
			delete(kept, k)
		}
	}
	if len(kept) == 0 {
		return base, nil
	}
	extra, err := json.Marshal(kept)
	if err != nil {
		return nil, fmt.Errorf("encode job attributes: %w", err)
	}
	out := make([]byte, 0, len(base)+len(extra))
	out = append(out, base[:len(base)-1]...)
	out = append(out, ',')
	return append(out, extra[1:]...), nil
}
