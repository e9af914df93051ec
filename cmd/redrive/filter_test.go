package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/redrive/redrive/internal/filter"
)

// The filter flags are the key table's: dlq list has one per key the list
// takes, retry --all and purge one per key the bulk operations take, each of
// the key's kind.
func TestFilterFlagsAreTheKeyTable(t *testing.T) {
	var cf clientFlags
	for _, c := range []struct {
		name  string
		flags *pflag.FlagSet
		src   filter.Source
	}{
		{"dlq list", dlqListCmd(&cf).Flags(), filter.List},
		{"dlq retry", dlqRetryCmd(&cf).Flags(), filter.Bulk},
		{"dlq purge", dlqPurgeCmd(&cf).Flags(), filter.Bulk},
	} {
		for _, k := range filter.Keys(0) {
			fl := c.flags.Lookup(flagName(k.Name))
			if !k.Sources.Has(c.src) {
				if fl != nil {
					t.Errorf("%s has --%s, a key it does not take", c.name, fl.Name)
				}
				continue
			}
			want := "string"
			switch {
			case k.Repeatable:
				want = "stringArray"
			case k.Kind == filter.Bool:
				want = "bool"
			}
			if fl == nil || fl.Value.Type() != want || !strings.HasPrefix(fl.Usage, k.Doc) {
				t.Errorf("%s --%s = %+v, want a %s flag documented %q", c.name, flagName(k.Name), fl, want, k.Doc)
			}
		}
	}
	for _, name := range []string{"error-type", "header", "ids", "unacknowledged"} {
		if dlqPurgeCmd(&cf).Flags().Lookup(name) == nil {
			t.Errorf("dlq purge has no --%s", name)
		}
	}
}

// redrive policy validate reads a replay rule's filter as the replay engine
// will: an unknown key or a value of the wrong kind is refused, naming it.
func TestPolicyValidateRefusesABadReplayFilter(t *testing.T) {
	dir := t.TempDir()
	doc := "replay_rules:\n  - {name: r, filter: {error_typ: ConnectionError, state: 7}, delay: PT1H, max_replays: 1}\n"
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, "", "policy", "validate", dir)
	if err == nil {
		t.Fatalf("policy validate accepted it: %s", out)
	}
	for _, want := range []string{"replay_rules[0].filter.error_typ: unknown filter key", "replay_rules[0].filter.state: must be a string, got 7"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("policy validate: %v\nwant it to say %q", err, want)
		}
	}
	good := "replay_rules:\n  - {name: r, filter: {error_type: ConnectionError, state: discarded, since: 2026-02-12T00:00:00Z}, delay: PT1H, max_replays: 1}\n"
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _, err := run(t, "", "policy", "validate", dir); err != nil || !strings.Contains(out, "valid") {
		t.Errorf("policy validate of a good rule: %v %s", err, out)
	}
}
