package template_test

import (
	"testing"

	"github.com/redrive/redrive/internal/fingerprint"
	"github.com/redrive/redrive/internal/template"
)

type tokenized struct {
	group  string
	tokens []string
}

func tokenizedCorpus(b *testing.B) []tokenized {
	b.Helper()
	var out []tokenized
	for _, m := range corpus(b, heldout) {
		out = append(out, tokenized{m.queue + "\x00" + m.errorType, template.Tokenize(fingerprint.Normalize(m.text))})
	}
	return out
}

// BenchmarkMinerAdd: one Add of a tokenized message, in steady state (the
// corpus's templates mined), as ingest would call it.
func BenchmarkMinerAdd(b *testing.B) {
	msgs := tokenizedCorpus(b)
	m, err := template.New(template.Config{})
	if err != nil {
		b.Fatal(err)
	}
	for _, msg := range msgs {
		m.Add(msg.group, msg.tokens)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		msg := msgs[i%len(msgs)]
		m.Add(msg.group, msg.tokens)
		i++
	}
}

// BenchmarkMinerAddCold: Adds into a fresh miner, templates being created.
func BenchmarkMinerAddCold(b *testing.B) {
	msgs := tokenizedCorpus(b)
	b.ReportAllocs()
	for b.Loop() {
		m, _ := template.New(template.Config{})
		for _, msg := range msgs {
			m.Add(msg.group, msg.tokens)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/add")
}

// BenchmarkTokenize: Tokenize of a normalized message (Normalize's cost is
// internal/fingerprint's).
func BenchmarkTokenize(b *testing.B) {
	var normalized []string
	for _, m := range corpus(b, heldout) {
		normalized = append(normalized, fingerprint.Normalize(m.text))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		template.Tokenize(normalized[i%len(normalized)])
		i++
	}
}
