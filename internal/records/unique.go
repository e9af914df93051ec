package records

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	"golang.org/x/text/unicode/norm"

	"github.com/redrive/redrive/internal/store"
)

// UniquePolicy is a job's unique policy (OJS unique jobs spec §2): which of
// its dimensions make its uniqueness key, and when a job holding the same
// key makes it a duplicate.
type UniquePolicy struct {
	// Keys are the dimensions besides type, which is always in (§2.2):
	// queue, args, meta.
	Keys []string
	// ArgsKeys narrows args to these keys of its object (nil: all args);
	// MetaKeys are the keys of meta taken (required with meta).
	ArgsKeys, MetaKeys []string
	// Period is how long after its created_at a holder counts; 0: as long
	// as it is in States.
	Period time.Duration
	// States are the OJS states in which a holder counts.
	States []string
	// Ignore answers a duplicate with the holder (on_conflict ignore)
	// instead of refusing it (reject).
	Ignore bool
}

// UniqueDuplicateError is the conflict of a job whose uniqueness key a job
// holds (on_conflict reject).
type UniqueDuplicateError = store.UniqueDuplicateError

// ErrUniqueArgsKeys is why a unique policy's args_keys cannot apply to a
// job's args (unique jobs §2.2: "MUST reject a UniquePolicy where args_keys
// references keys that do not exist in the job's args").
var ErrUniqueArgsKeys = errors.New("args_keys")

// Key is the uniqueness key of a job of type typ on queue with args and
// meta (unique jobs §4.1): the dimensions as a JSON object, canonicalized
// (keys sorted at every level, compact, strings in NFC, numbers as RFC 8785
// writes them — except integers, which keep every digit, so two ids past
// 2^53 never collide), hashed with SHA-256, in lowercase hex.
func (u *UniquePolicy) Key(typ, queue string, args, meta json.RawMessage) (string, error) {
	dims := map[string]json.RawMessage{"type": jsonOf(typ)}
	for _, k := range u.Keys {
		switch k {
		case "queue":
			dims["queue"] = jsonOf(queue)
		case "args":
			a, err := selectArgs(args, u.ArgsKeys)
			if err != nil {
				return "", err
			}
			dims["args"] = a
		case "meta":
			m, err := selectKeys(meta, u.MetaKeys, false)
			if err != nil {
				return "", err
			}
			dims["meta"] = m
		}
	}
	var b bytes.Buffer
	if err := canonical(&b, jsonOf(dims)); err != nil {
		return "", err
	}
	sum := sha256.Sum256(b.Bytes())
	return hex.EncodeToString(sum[:]), nil
}

// claim is the store's claim for a job whose key is key.
func (u *UniquePolicy) claim(key string) *store.UniqueClaim {
	return &store.UniqueClaim{Key: key, States: u.States, Period: u.Period, Ignore: u.Ignore}
}

// selectArgs is args narrowed to keys: OJS args are an array, so the keys
// are those of its one object ([{"user_id": 42, ...}]).
func selectArgs(args json.RawMessage, keys []string) (json.RawMessage, error) {
	if keys == nil {
		return args, nil
	}
	var arr []json.RawMessage
	if json.Unmarshal(args, &arr) != nil || len(arr) != 1 || !bytes.HasPrefix(bytes.TrimSpace(arr[0]), []byte("{")) {
		return nil, fmt.Errorf("%w: selects keys of an object, so args must be an array of one JSON object", ErrUniqueArgsKeys)
	}
	return selectKeys(arr[0], keys, true)
}

// selectKeys is the object obj narrowed to keys; must says each key must be
// in it (ErrUniqueArgsKeys otherwise).
func selectKeys(obj json.RawMessage, keys []string, must bool) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if len(obj) > 0 {
		if err := json.Unmarshal(obj, &m); err != nil {
			return nil, fmt.Errorf("select keys: %w", err)
		}
	}
	out := map[string]json.RawMessage{}
	for _, k := range keys {
		v, ok := m[k]
		switch {
		case ok:
			out[k] = v
		case must:
			return nil, fmt.Errorf("%w: names %q, which the job's args do not have", ErrUniqueArgsKeys, k)
		}
	}
	return jsonOf(out), nil
}

func jsonOf(v any) json.RawMessage {
	b, _ := json.Marshal(v) // strings and maps of raw JSON: never fails
	return b
}

// canonical writes raw (valid JSON) canonicalized (Key) to b.
func canonical(b *bytes.Buffer, raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return errors.New("canonical JSON: empty value")
	}
	switch raw[0] {
	case '{':
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("canonical JSON: %w", err)
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		// RFC 8785 §3.2.3: sorted by UTF-16 code units (of the NFC form).
		slices.SortFunc(keys, func(a, c string) int {
			return slices.Compare(utf16.Encode([]rune(norm.NFC.String(a))), utf16.Encode([]rune(norm.NFC.String(c))))
		})
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k)
			b.WriteByte(':')
			if err := canonical(b, m[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case '[':
		var a []json.RawMessage
		if err := json.Unmarshal(raw, &a); err != nil {
			return fmt.Errorf("canonical JSON: %w", err)
		}
		b.WriteByte('[')
		for i, v := range a {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := canonical(b, v); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("canonical JSON: %w", err)
		}
		writeString(b, s)
	case 't', 'f', 'n':
		b.Write(raw)
	default:
		return writeNumber(b, string(raw))
	}
	return nil
}

// writeString writes s in NFC as a JSON string, escaping only what JSON
// must (RFC 8785 §3.2.2.2).
func writeString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(norm.NFC.String(s)) // a string always encodes
	b.Truncate(b.Len() - 1)            // Encode's newline
}

// writeNumber writes a JSON number: an integer with all its digits (-0 as
// 0), any other as RFC 8785 writes a double.
func writeNumber(b *bytes.Buffer, n string) error {
	if !strings.ContainsAny(n, ".eE") {
		if strings.TrimLeft(n, "-0") == "" {
			n = "0"
		}
		b.WriteString(n)
		return nil
	}
	f, err := strconv.ParseFloat(n, 64)
	if err != nil || math.IsInf(f, 0) {
		return fmt.Errorf("canonical JSON: number %s is out of range", n)
	}
	switch {
	case f == 0:
		b.WriteString("0")
	case math.Abs(f) < 1e21 && math.Abs(f) >= 1e-6:
		b.WriteString(strconv.FormatFloat(f, 'f', -1, 64))
	default:
		s := strconv.FormatFloat(f, 'e', -1, 64) // 1.5e-07 → 1.5e-7, as ECMAScript writes it
		mant, exp, _ := strings.Cut(s, "e")
		sign, digits := exp[:1], strings.TrimLeft(exp[1:], "0")
		b.WriteString(mant + "e" + sign + digits)
	}
	return nil
}
