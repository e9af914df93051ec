package bench

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/redrive/redrive/internal/ingest"
	"github.com/redrive/redrive/internal/policy"
)

// ingestRulesPolicy is what the ingest suite's topic runs under (unless
// Config.NoIngestRules): a capacity rule the run never reaches, the allowed
// types it produces and a filter none of its records match, so that every
// record pays for the rules' checks (filter, type glob, and the capacity
// check after each batch) and the stored rows stay those of a run without
// rules.
const ingestRulesPolicy = `topics:
  orders:
    max_size: 100000000
    max_size_bytes: 1099511627776
    overflow_policy: reject
    allowed_job_types: ["order.*"]
    filters:
      - name: drop-test-events
        match: {header_equals: {name: x-test-event, value: "true"}}
        action: discard
`

// withIngestRules returns the ingest config change that applies
// ingestRulesPolicy, or nil when cfg turns the rules off.
func withIngestRules(cfg Config) (func(*ingest.Config), error) {
	if cfg.NoIngestRules {
		return nil, nil
	}
	dir, err := os.MkdirTemp("", "redrive-bench-policies")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(ingestRulesPolicy), 0o600); err != nil {
		return nil, err
	}
	set, err := policy.LoadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("bench ingest rules: %w", err)
	}
	return func(c *ingest.Config) { c.Policies = set }, nil
}
