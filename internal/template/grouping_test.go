package template_test

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/fingerprint"
	"github.com/redrive/redrive/internal/template"
)

// Grouping Accuracy of the corpus before (fingerprint.Of, what incidents
// are today) and after (fingerprint.Normalize, Tokenize and the miner, per
// queue and error type), on the tuning corpus and on the held-out one,
// which nothing was tuned on.
func TestGroupingAccuracy(t *testing.T) {
	for _, kind := range []corpusKind{tuning, heldout, fresh} {
		t.Run(kind.String(), func(t *testing.T) {
			msgs := corpus(t, kind)
			truth := labels(msgs)
			beforeGroups, beforeTexts := byFingerprint(msgs)
			afterGroups, texts := byTemplate(t, msgs, template.Config{})
			before := template.GroupingAccuracy(truth, beforeGroups)
			after := template.GroupingAccuracy(truth, afterGroups)
			t.Logf("%s corpus: %d messages, %d problems", kind, after.Messages, after.Problems)
			t.Logf("  before (fingerprint.Of):           GA %.3f, %3d groups, %d mixing problems", before.GA, before.Groups, before.Mixed)
			t.Logf("  after (Normalize + template miner): GA %.3f, %3d groups, %d mixing problems", after.GA, after.Groups, after.Mixed)
			if testing.Verbose() {
				t.Log("before:")
				for _, l := range explain(truth, beforeGroups, beforeTexts) {
					t.Log(l)
				}
			}
			if after.GA < 0.95 || after.Mixed > 0 || testing.Verbose() {
				t.Log("after:")
				for _, l := range explain(truth, afterGroups, texts) {
					t.Log(l)
				}
			}
			if after.GA < 0.95 {
				t.Errorf("after: GA %.3f, want at least 0.95", after.GA)
			}
			if after.Mixed > 0 {
				t.Errorf("after: %d groups mix problems, want none", after.Mixed)
			}
		})
	}
}

// TestThresholds shows how the threshold was chosen: GA and mixing on the
// tuning corpus for a range of thresholds.
func TestThresholds(t *testing.T) {
	msgs := corpus(t, tuning)
	truth := labels(msgs)
	for _, st := range []float64{0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9} {
		groups, _ := byTemplate(t, msgs, template.Config{SimilarityThreshold: st})
		a := template.GroupingAccuracy(truth, groups)
		t.Logf("threshold %.1f: GA %.3f, %d groups for %d problems, %d mixing", st, a.GA, a.Groups, a.Problems, a.Mixed)
	}
}

func labels(msgs []message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.label
	}
	return out
}

// byFingerprint returns each message's fingerprint, and the signatures
// (error type and normalized message) by fingerprint.
func byFingerprint(msgs []message) ([]string, map[string]string) {
	out := make([]string, len(msgs))
	texts := map[string]string{}
	for i, m := range msgs {
		out[i] = fingerprint.Of(m.errorType, m.text, nil)
		texts[out[i]] = m.errorType + ": " + fingerprint.Normalize(m.text)
	}
	return out, texts
}

// byTemplate mines the messages in order and returns each one's template
// ID, as ingest would assign it, and the final templates' text by ID.
func byTemplate(t testing.TB, msgs []message, cfg template.Config) ([]string, map[string]string) {
	t.Helper()
	m, err := template.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(msgs))
	for i, msg := range msgs {
		tpl, _ := m.Add(msg.queue+"\x00"+msg.errorType, template.Tokenize(fingerprint.Normalize(msg.text)))
		out[i] = tpl.ID
	}
	texts := map[string]string{}
	for _, tpl := range m.Snapshot() {
		texts[tpl.ID] = strings.Join(tpl.Tokens, " ")
	}
	return out, texts
}

// explain lists the problems split over several groups and the groups that
// mix problems.
func explain(truth, predicted []string, texts map[string]string) []string {
	groupsOf := map[string]map[string]int{}
	labelsOf := map[string]map[string]int{}
	for i := range truth {
		if groupsOf[truth[i]] == nil {
			groupsOf[truth[i]] = map[string]int{}
		}
		groupsOf[truth[i]][predicted[i]]++
		if labelsOf[predicted[i]] == nil {
			labelsOf[predicted[i]] = map[string]int{}
		}
		labelsOf[predicted[i]][truth[i]]++
	}
	var out []string
	for _, l := range sortedKeys(groupsOf) {
		if len(groupsOf[l]) > 1 {
			out = append(out, fmt.Sprintf("split: %s into %d groups:", l, len(groupsOf[l])))
			for _, g := range sortedKeys(groupsOf[l]) {
				out = append(out, fmt.Sprintf("    %d× %s", groupsOf[l][g], texts[g]))
			}
		}
	}
	for _, g := range sortedKeys(labelsOf) {
		if len(labelsOf[g]) > 1 {
			out = append(out, fmt.Sprintf("mixed: %v in %s", labelsOf[g], texts[g]))
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return slices.Clip(keys)
}
