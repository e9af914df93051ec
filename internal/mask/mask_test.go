package mask

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
)

func builtin(t testing.TB, name string) *Pattern {
	p, ok := Builtin(name)
	if !ok {
		t.Fatalf("no built-in %q", name)
	}
	return p
}

func rules(t testing.TB) *Rules {
	ssn, err := Compile("ssn", `\b[0-9]{3}-[0-9]{2}-[0-9]{4}\b`)
	if err != nil {
		t.Fatal(err)
	}
	return &Rules{
		Paths:    [][]string{{"card", "number"}, {"customer", "email"}, {"items", "secret"}},
		Headers:  []string{"x-customer-*", "Authorization"},
		Keys:     []string{"cust-*"},
		Patterns: []*Pattern{builtin(t, "card_number"), builtin(t, "email"), ssn},
	}
}

func TestJSONMasksPathsAndPatternsKeepingTheRestExact(t *testing.T) {
	r := rules(t)
	in := `{"id": 12345678901234567890123, "amount": 1.50e+2,
  "card": {"number": 4111111111111111, "brand": "visa"},
  "customer": {"email": {"nested": [1, 2]}, "name": "Ann"},
  "note": "paid with 4111 1111 1111 1111 by ann@example.com, ssn 123-45-6789",
  "items": [{"secret": "a", "n": 1}, {"secret": null}],
  "order": "1234567812345678"}`
	got, err := r.JSON([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id": 12345678901234567890123, "amount": 1.50e+2,
  "card": {"number": "***", "brand": "visa"},
  "customer": {"email": "***", "name": "Ann"},
  "note": "paid with *** by ***, ssn ***",
  "items": [{"secret": "***", "n": 1}, {"secret": "***"}],
  "order": "1234567812345678"}`
	if string(got) != want {
		t.Errorf("masked:\n%s\nwant:\n%s", got, want)
	}
}

func TestCardNumbers(t *testing.T) {
	p := builtin(t, "card_number")
	for in, want := range map[string]string{
		"4111111111111111":                      "***",
		"4111-1111-1111-1111":                   "***",
		"card 4111 1111 1111 1111 ok":           "card *** ok",
		"12 4111111111111111":                   "12 ***",           // a number before it does not hide it
		"1234567812345678":                      "1234567812345678", // fails Luhn: an order number
		"378282246310005":                       "***",              // Amex, 15 digits
		"411111111111":                          "411111111111",     // 12 digits
		"6011111111111117 and 5555555555554444": "*** and ***",
		"ts 1764147600123456789":                "ts 1764147600123456789",
	} {
		if got := string(p.replace([]byte(in))); got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}

func TestValueOfOtherEncodings(t *testing.T) {
	r := rules(t)
	if got := string(r.Value([]byte("not json: 4111111111111111"))); got != Marker {
		t.Errorf("text under path rules: got %q, want the marker", got)
	}
	r.Paths = nil
	if got := string(r.Value([]byte("text 4111111111111111 \xff\x00"))); got != "text *** \xff\x00" {
		t.Errorf("text: got %q", got)
	}
	if r.Value(nil) != nil {
		t.Error("a tombstone must stay null")
	}
}

func TestValuePrefixStopsBeforeACutToken(t *testing.T) {
	r := rules(t)
	for in, want := range map[string]string{
		`{"note": "a", "n": 41111111`:                 `{"note": "a", "n": `,
		`{"note": "4111 1111 11`:                      `{"note": `,
		`{"card": {"number": "4111111111111111"}, "x`: `{"card": {"number": "***"}, `,
		`{"card": {"number": "41111`:                  `{"card": {"number": `,
		`[tru`:                                        `[`,
		`plain text 4111 1111 1111 11`:                Marker,
	} {
		if got := string(r.ValuePrefix([]byte(in))); got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}

func TestRecord(t *testing.T) {
	r := rules(t)
	rec := &dlq.Record{Key: []byte("cust-42"), Value: []byte(`{"card":{"number":"4111111111111111"}}`),
		Headers: []dlq.Header{{Key: "X-Customer-Email", Value: []byte("ann@example.com")}, {Key: "trace", Value: []byte("t")}},
		Errors:  []dlq.ErrorEntry{{Message: "bad email ann@example.com", Details: json.RawMessage(`{"email":"ann@example.com"}`)}},
		Redelivery: &dlq.Redelivery{ValueSet: true, Payload: []byte(`{"card":{"number":"4111111111111111"},"x":1}`),
			Value: []byte(`{"card":{"number":"4111111111111111"},"x":1}`)}}
	got := r.Record(rec)
	for _, c := range []struct{ what, got, want string }{
		{"key", string(got.Key), Marker},
		{"value", string(got.Value), `{"card":{"number":"***"}}`},
		{"header", string(got.Headers[0].Value), Marker},
		{"other header", string(got.Headers[1].Value), "t"},
		{"error message", got.Errors[0].Message, "bad email ***"},
		{"error details", string(got.Errors[0].Details), `{"email":"***"}`},
		{"redelivery payload", string(got.Redelivery.Payload), `{"card":{"number":"***"},"x":1}`},
		{"redelivery value", string(got.Redelivery.Value), `{"card":{"number":"***"},"x":1}`},
		{"original kept", string(rec.Value), `{"card":{"number":"4111111111111111"}}`},
		{"original header kept", string(rec.Headers[0].Value), "ann@example.com"},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.what, c.got, c.want)
		}
	}
	var none *Rules
	if none.Record(rec) != rec {
		t.Error("nil rules must return the record itself")
	}
}

func TestRestore(t *testing.T) {
	r := rules(t)
	base := []byte(`{"card":{"number":4111111111111111,"brand":"visa"},"note":"by ann@example.com","items":[{"secret":{"a":1}},{"secret":"s"}]}`)
	shown, err := r.JSON(base)
	if err != nil {
		t.Fatal(err)
	}
	// The editor changes the brand and sends the rest back as shown.
	edited := bytes.Replace(shown, []byte(`"visa"`), []byte(`"VISA"`), 1)
	got, err := r.Restore(edited, base)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"card":{"number":4111111111111111,"brand":"VISA"},"note":"by ann@example.com","items":[{"secret":{"a":1}},{"secret":"s"}]}`
	if string(got) != want {
		t.Errorf("restored:\n%s\nwant:\n%s", got, want)
	}
	// A masked value replaced whole is the editor's.
	got, err = r.Restore([]byte(`{"card":{"number":"5555555555554444"},"note":"none"}`), base)
	if err != nil || string(got) != `{"card":{"number":"5555555555554444"},"note":"none"}` {
		t.Errorf("replaced: %s, %v", got, err)
	}
	// Half an edit of masked content cannot be told apart.
	_, err = r.Restore([]byte(`{"note":"by *** (checked)"}`), base)
	var ee *EditError
	if !errors.As(err, &ee) || ee.Pointer != "/note" {
		t.Errorf("partial edit: %v", err)
	}
}

func TestHides(t *testing.T) {
	r := rules(t)
	for _, c := range []struct {
		f    filter.Filter
		want bool
	}{
		{filter.Filter{Q: "timeout"}, true},
		{filter.Filter{Path: []string{"card", "number"}, Value: "4111111111111111"}, true},
		{filter.Filter{Path: []string{"card", "number", "x"}, Value: "1"}, true},
		{filter.Filter{Path: []string{"card", "brand"}, Value: "visa"}, false},
		{filter.Filter{Path: []string{"note"}, Value: "ann@example.com"}, true},
		{filter.Filter{Key: []byte("cust-1")}, true},
		{filter.Filter{Key: []byte("order-1")}, false},
		{filter.Filter{Headers: []filter.Header{{Key: "x-customer-email", Value: "a", ValueSet: true}}}, true},
		{filter.Filter{Headers: []filter.Header{{Key: "x-customer-email"}}}, false},
		{filter.Filter{Queue: "orders", ErrorType: "x"}, false},
	} {
		if got := r.Hides(&c.f); got != c.want {
			t.Errorf("%s: Hides = %v, want %v", c.f.String(), got, c.want)
		}
	}
	if (&Rules{Keys: []string{"*"}}).Hides(&filter.Filter{Q: "x"}) {
		t.Error("q must be searchable when nothing in the value is masked")
	}
}

func TestCompileRefusesEmptyMatches(t *testing.T) {
	if _, err := Compile("x", `a*`); err == nil || !strings.Contains(err.Error(), "empty string") {
		t.Errorf("a* : %v", err)
	}
	if _, err := Compile("x", `(`); err == nil {
		t.Error("( compiled")
	}
}

func TestGlob(t *testing.T) {
	for _, c := range []struct {
		g, s string
		want bool
	}{{"*", "", true}, {"a*c", "abbbc", true}, {"a*c", "abbb", false}, {"*@*.com", "ann@x.com", true}, {"x-*", "x-", true}, {"ab", "abc", false}} {
		if Glob(c.g, c.s) != c.want {
			t.Errorf("Glob(%q, %q) != %v", c.g, c.s, c.want)
		}
	}
}

// FuzzJSON feeds hostile documents: whatever the input, masking returns
// JSON (or an error) that no longer holds a masked card number, in time
// linear in its size.
func FuzzJSON(f *testing.F) {
	for _, s := range []string{
		`{"card":{"number":"4111111111111111"}}`, `[` + strings.Repeat(`[`, 300) + `1` + strings.Repeat(`]`, 301),
		`{"n": 1e99999999, "m": -0.0000000000000000000000001}`, "{\"a\":\"\xff\xfe 4111111111111111\"}",
		`"\u0034111111111111111"`, `{"card":{"number":[4111111111111111]}}`, `{"a":tru`, `{"x":"a\ud800"}`,
	} {
		f.Add([]byte(s))
	}
	r := rules(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := r.JSON(in)
		if err == nil {
			if !json.Valid(out) {
				t.Fatalf("masked %q into invalid JSON %q", in, out)
			}
			if bytes.Contains(out, []byte("4111111111111111")) && utf8.Valid(in) {
				t.Fatalf("card number left in %q", out)
			}
		} else if json.Valid(in) && !errors.Is(err, errDepth) {
			t.Fatalf("valid JSON %q refused: %v", in, err)
		}
		v := r.Value(in)
		if bytes.Contains(v, []byte("4111111111111111")) {
			t.Fatalf("Value left a card number in %q", v)
		}
		p := r.ValuePrefix(in)
		if bytes.Contains(p, []byte("4111111111111111")) {
			t.Fatalf("ValuePrefix left a card number in %q", p)
		}
		if restored, err := r.Restore(out, in); err == nil && json.Valid(in) && out != nil {
			if !bytes.Equal(restored, in) {
				t.Fatalf("restoring what was shown changed %q into %q", in, restored)
			}
		}
	})
}

func TestTextPrefixDropsWhatACutMayHaveSplit(t *testing.T) {
	r := &Rules{Patterns: []*Pattern{builtin(t, "card_number"), builtin(t, "email")}}
	for in, want := range map[string]string{
		"declined: card 4111 1111 1111 11":        "declined: card",
		"declined: 4111111111111111, mail ann@ex": "declined: ***, mail",
		"no match here.":                          "no match here.",
	} {
		if got := string(r.TextPrefix([]byte(in))); !strings.HasPrefix(want, strings.TrimSpace(got)) || strings.Contains(got, "1111") || strings.Contains(got, "ann") {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
	if got := string(r.ValuePrefix([]byte("plain 4111 1111 11"))); got != "plain" && got != "plain " {
		t.Errorf("text value prefix: %q", got)
	}
}

// Hostile values of a megabyte each go through every entry point: nesting
// past MaxDepth is masked whole, long digit and address runs are scanned
// once. (Their cost is linear by construction; this proves they end.)
func TestHostileValues(t *testing.T) {
	r := rules(t)
	const n = 1 << 20
	for name, in := range map[string][]byte{
		"deep arrays":  bytes.Repeat([]byte("["), n),
		"deep objects": bytes.Repeat([]byte(`{"a":`), n/5),
		"digit groups": bytes.Repeat([]byte("1 "), n/2),
		"one number":   append(append([]byte(`{"n":`), bytes.Repeat([]byte("9"), n)...), '}'),
		"at signs":     bytes.Repeat([]byte("a@b."), n/4),
		"escapes":      append(append([]byte(`"`), bytes.Repeat([]byte(`\u0034`), n/6)...), '"'),
		"invalid utf8": bytes.Repeat([]byte{0xff, 0xfe, '4'}, n/3),
	} {
		v := r.Value(in)
		p := r.ValuePrefix(in[:len(in)/2])
		if _, err := r.Restore(in, in); err != nil && json.Valid(in) {
			t.Errorf("%s: Restore: %v", name, err)
		}
		if len(v) > len(in)+16 || len(p) > len(in) {
			t.Errorf("%s: masked to %d and %d bytes from %d", name, len(v), len(p), len(in))
		}
	}
	deep := bytes.Repeat([]byte("["), MaxDepth+1)
	deep = append(deep, bytes.Repeat([]byte("]"), MaxDepth+1)...)
	if _, err := r.JSON(deep); !errors.Is(err, errDepth) {
		t.Errorf("nested past MaxDepth: %v", err)
	}
	if got := string(r.Value(deep)); got != `"***"` {
		t.Errorf("Value of a document nested past MaxDepth: %q", got)
	}
}
