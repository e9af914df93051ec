package template

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzMiner feeds any bytes as messages: tokenized, and also split on
// spaces as raw tokens (empty ones, NULs, invalid UTF-8 and all). Nothing
// panics, every template keeps within the Config's limits, the accounted
// memory stays under MaxBytes, and a restored snapshot behaves alike.
func FuzzMiner(f *testing.F) {
	f.Add([]byte("context deadline exceeded after 30s calling inventory-7f9c4 (10.2.3.44:8443)\ncontext deadline exceeded after 30s calling inventory-x2k9p (10.2.3.45:8443)"))
	f.Add([]byte("a b c\na b d\n\x00\xff b\n<*> <*>\n\"q\" 'r' `s`\nkey=value=x ( [ { } ] )"))
	f.Add([]byte(strings.Repeat("w ", 300)))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := Config{MaxDepth: 3 + len(data)%3, MaxChildren: 3, MaxTemplates: 4, MaxTokens: 6, MaxTokenBytes: 12, MaxBytes: 6 << 10}
		m, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			group := string(rune('a' + i%3))
			for _, tokens := range [][]string{Tokenize(line), strings.Split(line, " ")} {
				tpl, _ := m.Add(group, tokens)
				checkTemplate(t, cfg, tpl)
			}
		}
		s := m.Stats()
		if s.Bytes > cfg.MaxBytes {
			t.Fatalf("accounted %d bytes, more than MaxBytes %d", s.Bytes, cfg.MaxBytes)
		}
		perGroup := map[string]int{}
		snap := m.Snapshot()
		for _, tpl := range snap {
			checkTemplate(t, cfg, tpl)
			if !tpl.Overflow {
				perGroup[tpl.Group]++
			}
		}
		for g, n := range perGroup {
			if n > cfg.MaxTemplates {
				t.Fatalf("group %q: %d templates, more than MaxTemplates %d", g, n, cfg.MaxTemplates)
			}
		}
		restored, _ := New(cfg)
		if err := restored.Restore(snap); err != nil {
			t.Fatalf("Restore(Snapshot()): %v", err)
		}
		probe := Tokenize(string(data))
		a, ac := m.Add("a", probe)
		b, bc := restored.Add("a", probe)
		if !reflect.DeepEqual(a, b) || ac != bc || m.Stats().Bytes != restored.Stats().Bytes {
			t.Fatalf("restored miner differs: %+v %v / %+v %v", a, ac, b, bc)
		}
	})
}

func checkTemplate(t *testing.T, cfg Config, tpl Template) {
	t.Helper()
	if len(tpl.Tokens) > cfg.MaxTokens || len(tpl.ID) != 16 {
		t.Fatalf("template %+v: %d tokens (MaxTokens %d), ID %q", tpl, len(tpl.Tokens), cfg.MaxTokens, tpl.ID)
	}
	for _, tok := range tpl.Tokens {
		if len(tok) > cfg.MaxTokenBytes || !utf8.ValidString(tok) || strings.IndexByte(tok, 0) >= 0 {
			t.Fatalf("token %q: over MaxTokenBytes %d, invalid UTF-8 or NUL", tok, cfg.MaxTokenBytes)
		}
	}
}
