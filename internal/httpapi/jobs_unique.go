package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/records"
)

// uniqueJSON is a job's unique policy as sent (OJS unique jobs spec §2.1).
type uniqueJSON struct {
	Keys       []string `json:"keys"`
	ArgsKeys   []string `json:"args_keys"`
	MetaKeys   []string `json:"meta_keys"`
	Period     *string  `json:"period"`
	States     []string `json:"states"`
	OnConflict *string  `json:"on_conflict"`
}

// Bounds and values of a unique policy.
var (
	uniqueDimensions = []string{"type", "queue", "args", "meta"}
	// uniqueStates are the eight OJS lifecycle states (unique jobs §6.2).
	uniqueStates = []string{"scheduled", "available", "pending", "active", "completed", "retryable", "cancelled", "discarded"}
	// uniqueDefaultStates are the non-terminal ones (§6.1).
	uniqueDefaultStates = []string{"available", "active", "scheduled", "retryable", "pending"}
)

const maxUniqueKeys = 32

// decodeUnique checks a unique policy (unique jobs §2.2: "MUST validate the
// UniquePolicy structure at enqueue time and reject invalid policies with an
// invalid_request error"). on_conflict replace and replace_except_schedule
// answer 422 unsupported rather than acting as reject: replacing the holder
// means cancelling a job a worker may hold and storing the new one in one
// transaction, which Redrive does not do (docs/api.md, Workers).
func decodeUnique(raw json.RawMessage, field string) (*records.UniquePolicy, error) {
	var u uniqueJSON
	if err := decodeStrict(raw, &u); err != nil {
		return nil, invalidParam(field, "must be a unique policy: {keys, args_keys, meta_keys, period, states, on_conflict}")
	}
	out := &records.UniquePolicy{ArgsKeys: u.ArgsKeys, MetaKeys: u.MetaKeys, States: uniqueDefaultStates}
	for _, k := range u.Keys {
		if !slices.Contains(uniqueDimensions, k) {
			return nil, invalidParam(field+".keys", "each must be one of "+strings.Join(uniqueDimensions, ", ")+", got "+jsonString(k))
		}
		if k != "type" && !slices.Contains(out.Keys, k) {
			out.Keys = append(out.Keys, k)
		}
	}
	for name, keys := range map[string][]string{"args_keys": u.ArgsKeys, "meta_keys": u.MetaKeys} {
		if len(keys) > maxUniqueKeys {
			return nil, invalidParam(field+"."+name, fmt.Sprintf("at most %d keys", maxUniqueKeys))
		}
		for _, k := range keys {
			if k == "" || len(k) > maxWorkerIDBytes {
				return nil, invalidParam(field+"."+name, fmt.Sprintf("each key must be 1 to %d bytes", maxWorkerIDBytes))
			}
		}
	}
	if u.ArgsKeys != nil && !slices.Contains(out.Keys, "args") {
		return nil, invalidParam(field+".args_keys", `applies to args: add "args" to keys, or leave args_keys out`)
	}
	if slices.Contains(out.Keys, "meta") && len(u.MetaKeys) == 0 {
		// §2.2: "MUST reject a UniquePolicy where keys contains "meta" but
		// meta_keys is null or empty".
		return nil, invalidParam(field+".meta_keys", `required when keys has "meta": the keys of meta that make a job unique`)
	}
	if u.Period != nil {
		d, err := policy.ParseDuration(*u.Period)
		if err != nil || d <= 0 {
			return nil, invalidParam(field+".period", "must be a positive ISO 8601 duration such as PT1H, got "+jsonString(*u.Period))
		}
		out.Period = d
	}
	if u.States != nil {
		if len(u.States) == 0 {
			return nil, invalidParam(field+".states", "must name at least one state, or be left out")
		}
		for _, st := range u.States {
			if !slices.Contains(uniqueStates, st) {
				return nil, invalidParam(field+".states", "each must be one of "+strings.Join(uniqueStates, ", ")+", got "+jsonString(st))
			}
		}
		out.States = u.States
	}
	if c := u.OnConflict; c != nil {
		switch *c {
		case "reject":
		case "ignore":
			out.Ignore = true
		case "replace", "replace_except_schedule":
			return nil, &APIError{Status: http.StatusUnprocessableEntity, Code: CodeUnsupported,
				Message: field + ".on_conflict: " + *c + " is not supported by Redrive; send reject or ignore",
				Details: map[string]any{"parameter": field + ".on_conflict"}}
		default:
			return nil, invalidParam(field+".on_conflict", "must be reject, ignore, replace or replace_except_schedule, got "+jsonString(*c))
		}
	}
	return out, nil
}
