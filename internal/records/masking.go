package records

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/mask"
)

// keepMasked puts back, in an operator's edit of cur, what masking hid
// from the operator (docs/security.md, "Data masking"): a masked value of
// the payload, of a raw value or of a header sent back as it was shown is
// the record's own, never the marker. The base is what the operator was
// shown: the pending edit when there is one, else the original.
//
// Errors: *PayloadError naming the value that holds the marker but is not
// as shown (half an edit of what the operator could not see).
func keepMasked(rules *mask.Rules, cur *dlq.Record, p *RetryParams) error {
	if !rules.Active() {
		return nil
	}
	base := cur.Value
	if cur.ValueSchema != nil && cur.Payload != nil {
		base = cur.Payload
	}
	if rd := cur.Redelivery; rd != nil && rd.ValueSet {
		base = rd.Value
		if rd.Payload != nil {
			base = rd.Payload
		}
	}
	if p.Payload != nil && json.Valid(p.Payload) {
		restored, err := rules.Restore(p.Payload, base)
		if err != nil {
			return maskedEditError(err)
		}
		p.Payload = restored
	}
	if rd := p.Redelivery; rd != nil {
		if rd.ValueSet && rd.Value != nil {
			switch {
			case json.Valid(rd.Value) && json.Valid(base):
				restored, err := rules.Restore(rd.Value, base)
				if err != nil {
					return maskedEditError(err)
				}
				rd.Value = restored
			case bytes.Equal(rd.Value, rules.Value(base)):
				rd.Value = base
			}
		}
		for i, h := range rd.Headers {
			if string(h.Value) != mask.Marker || !rules.HeaderMasked(h.Key) {
				continue
			}
			if v, ok := headerValue(cur, h.Key); ok {
				rd.Headers[i].Value = v
			}
		}
	}
	return nil
}

// headerValue is the value of header key as the operator saw it: the
// pending edit's, else the original's.
func headerValue(cur *dlq.Record, key string) ([]byte, bool) {
	if rd := cur.Redelivery; rd != nil {
		for _, h := range rd.Headers {
			if h.Key == key {
				return h.Value, true
			}
		}
	}
	for _, h := range cur.Headers {
		if h.Key == key {
			return h.Value, true
		}
	}
	return nil, false
}

func maskedEditError(err error) error {
	var ee *mask.EditError
	if errors.As(err, &ee) {
		return &PayloadError{Pointer: ee.Pointer, Message: "is masked (" + mask.Marker + "): send it back as shown to keep it, " +
			"or replace it whole with a value without " + mask.Marker}
	}
	return &PayloadError{Message: "expected valid JSON, got " + err.Error()}
}
