package template_test

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/fingerprint"
	"github.com/redrive/redrive/internal/template"
)

// A miner restored from a snapshot behaves as the one snapshotted: the
// rest of the corpus joins the same templates, with the same IDs and
// changes, and ends in the same state; with the default limits and with
// limits small enough to overflow.
func TestRestoreBehavesAlike(t *testing.T) {
	msgs := corpus(t, heldout)
	for _, cfg := range []template.Config{{}, {MaxTemplates: 3, MaxChildren: 3, MaxBytes: 24 << 10}} {
		orig, err := template.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		half := len(msgs) / 2
		for _, m := range msgs[:half] {
			orig.Add(m.queue+"\x00"+m.errorType, template.Tokenize(fingerprint.Normalize(m.text)))
		}
		snap := orig.Snapshot()
		// Restore takes the templates in any order (a database's).
		shuffled := append([]template.Template(nil), snap...)
		rand.New(rand.NewPCG(7, 7)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		restored, err := template.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := restored.Restore(shuffled); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(restored.Snapshot(), snap) {
			t.Fatalf("%+v: the restored snapshot differs", cfg)
		}
		if a, b := orig.Stats(), restored.Stats(); a.Bytes != b.Bytes || a.Templates != b.Templates {
			t.Fatalf("%+v: stats %+v, restored %+v", cfg, a, b)
		}
		for _, m := range msgs[half:] {
			group, tokens := m.queue+"\x00"+m.errorType, template.Tokenize(fingerprint.Normalize(m.text))
			a, aChanged := orig.Add(group, tokens)
			b, bChanged := restored.Add(group, tokens)
			if !reflect.DeepEqual(a, b) || aChanged != bChanged {
				t.Fatalf("%+v: %q\n  original %+v %v\n  restored %+v %v", cfg, m.text, a, aChanged, b, bChanged)
			}
		}
		if !reflect.DeepEqual(orig.Snapshot(), restored.Snapshot()) {
			t.Errorf("%+v: the final snapshots differ", cfg)
		}
		if a, b := orig.Stats(), restored.Stats(); a.Bytes != b.Bytes {
			t.Errorf("%+v: accounted bytes %d, restored %d", cfg, a.Bytes, b.Bytes)
		}
		if s := orig.Stats(); cfg.MaxTemplates == 3 && s.Overflowed == 0 {
			t.Errorf("%+v: nothing overflowed (%+v)", cfg, s)
		}
	}
}

func TestRestoreRejectsBadSnapshots(t *testing.T) {
	m, err := template.New(template.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range []string{"connection refused by <ip>:<port>", "dial tcp <ip>:<port>: i/o timeout"} {
		m.Add("g", template.Tokenize(msg))
	}
	good := m.Snapshot()
	for _, tc := range []struct {
		name, field string
		edit        func([]template.Template) []template.Template
	}{
		{"a gap in Seq", "Seq", func(ts []template.Template) []template.Template { ts[1].Seq = 5; return ts }},
		{"an ID twice", "ID", func(ts []template.Template) []template.Template { ts[1].ID = ts[0].ID; return ts }},
		{"no ID", "ID", func(ts []template.Template) []template.Template { ts[0].ID = ""; return ts }},
		{"a short Path", "Path", func(ts []template.Template) []template.Template { ts[0].Path = ts[0].Path[:1]; return ts }},
		{"a negative Count", "Count", func(ts []template.Template) []template.Template { ts[0].Count = -1; return ts }},
		{"a foreign overflow", "ID", func(ts []template.Template) []template.Template {
			return append(ts, template.Template{Group: "g", ID: "0000000000000000", Overflow: true, Count: 1})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := tc.edit(cloneTemplates(good))
			err := m.Restore(bad)
			if err == nil || !strings.Contains(err.Error(), ": "+tc.field+": ") {
				t.Errorf("Restore: %v, want an error naming %s", err, tc.field)
			}
			if !reflect.DeepEqual(m.Snapshot(), good) {
				t.Error("a failed Restore changed the miner")
			}
		})
	}
}

func cloneTemplates(ts []template.Template) []template.Template {
	out := make([]template.Template, len(ts))
	for i, t := range ts {
		t.Tokens = append([]string(nil), t.Tokens...)
		t.Path = append([]string(nil), t.Path...)
		out[i] = t
	}
	return out
}
