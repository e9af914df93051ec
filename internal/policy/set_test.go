package policy

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
)

// Each testdata/*.good.yaml (and .yml) loads on its own.
func TestGoodFiles(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("testdata/*.good.y*ml")
	if len(files) < 5 {
		t.Fatalf("only %d good files", len(files))
	}
	for _, f := range files {
		if _, err := LoadFiles(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// badFiles maps each testdata/*.bad.yaml to the error text it must produce: file,
// YAML path and what was expected.
var badFiles = map[string][]string{
	"unknown_field":                 {"testdata/unknown_field.bad.yaml: topics.orders.retry.max_atempts: unknown field (did you mean max_attempts?) (line 4)"},
	"unknown_top":                   {"unknown_top.bad.yaml: defaults: unknown field (did you mean _default?) (line 1)"},
	"unknown_section_field":         {"_default.redelivery.keep_partitions: unknown field (did you mean keep_partition?)"},
	"bad_duration":                  {`_default.retry.initial_interval: invalid ISO 8601 duration "5m": must start with "P"`},
	"duration_number":               {"topics.orders.max_age: must be an ISO 8601 duration string such as PT30S or P7D, got integer 3600 (line 3)"},
	"months":                        {`_default.dead_letter.retention.max_age: invalid ISO 8601 duration "P6M": P6M means 6 months`},
	"negative_attempts":             {"topics.orders.retry.max_attempts: must be >= 0, got -1"},
	"string_attempts":               {`_default.retry.max_attempts: must be an integer, got string "five"`},
	"float_attempts":                {"_default.retry.max_attempts: must be an integer, got number 3.5"},
	"null_attempts":                 {"_default.retry.max_attempts: must be an integer, got null"},
	"low_coefficient":               {"_default.retry.backoff_coefficient: must be >= 1.0, got 0.5"},
	"inf_coefficient":               {"_default.retry.backoff_coefficient: must be a finite number, got .inf"},
	"zero_initial":                  {"_default.retry.initial_interval: must be greater than zero, got PT0S"},
	"max_below_initial":             {"_default.retry.max_interval: must be >= initial_interval (PT1M), got PT30S"},
	"merged_max_below_initial":      {"topics.orders.retry.initial_interval: merged policy has max_interval PT1M < initial_interval PT5M; max_interval must be >= initial_interval (merged: system defaults ← _default (testdata/merged_max_below_initial.bad.yaml) ← topics.orders (testdata/merged_max_below_initial.bad.yaml)) (line 5)"},
	"merged_type_max_below_initial": {`topics.orders.types."order.refund".retry.initial_interval: merged policy has max_interval PT1H < initial_interval PT2H`},
	"merged_glob_exact":             {`topics."orders.eu".retry.initial_interval: merged policy has max_interval PT10S < initial_interval PT20S`},
	"on_exhaustion":                 {`_default.retry.on_exhaustion: must be one of discard, dead_letter, got "archive"`},
	"strategy":                      {`_default.retry.backoff_strategy: must be one of exponential, polynomial, linear, none (or constant, the same as none), got "fibonacci"`},
	"jitter_yes":                    {`_default.retry.jitter: must be a boolean (true or false), got string "yes"`},
	"wildcard_middle":               {`_default.retry.non_retryable_errors[0]: "auth.*.expired": a wildcard is only allowed at the end`},
	"empty_error_type":              {"_default.retry.non_retryable_errors[1]: must not be empty"},
	"errors_not_list":               {`_default.retry.non_retryable_errors: must be a list, got string "auth.*"`},
	"pruning":                       {`_default.pruning_policy: must be one of delete, archive, got "shred"`},
	"state":                         {`topics.orders.state: must be one of active, paused, draining, got "stopped"`},
	"dl_count":                      {"_default.dead_letter.retention.max_count: must be >= 0 (0: no limit on the count; max_age still applies), got -1"},
	"redelivery_target":             {`topics.orders.redelivery.target: must be one of group, topic, got "groups" (line 3)`},
	"completion": {`topics.payments.completion: must be one of redelivered, ack, got "acked" (line 2)`,
		"topics.payments.ack_timeout: must be greater than zero, got PT0S (line 2)",
		`topics.orders.ack_timeout: invalid ISO 8601 duration "10m": must start with "P"`,
		`topics.orders.types."order.refund".completion: is set per topic, not per type: a topic's redeliveries are settled together; set it in the topics entry`,
		`topics.orders.types."order.refund".ack_timeout: is set per topic, not per type`},
	"dl_age":           {"_default.dead_letter.retention.max_age: must be greater than zero"},
	"retention_zero":   {"_default.retention.discarded: must be greater than zero, got PT0S"},
	"rate_negative":    {"_default.redelivery.rate_limit: must be 0 (unlimited) or at least 0.001 records per second, got -1"},
	"rate_tiny":        {"_default.redelivery.rate_limit: must be 0 (unlimited) or at least 0.001 records per second, got 1e-300"},
	"attempts_ceiling": {"topics.orders.retry.max_attempts: must be at most 100 (REDRIVE_RETRY_MAX_ATTEMPTS), got 2000000000 (line 2)"},
	"interval_floor": {"_default.retry.initial_interval: must be at least PT1S (REDRIVE_RETRY_MIN_INTERVAL), got PT0.001S (line 1)",
		"_default.retry.max_interval: must be at least PT1S (REDRIVE_RETRY_MIN_INTERVAL), got PT0.001S (line 1)"},
	"target_topic":          {`topics.orders.redelivery.target_topic: "orders retry" may only contain letters, digits`},
	"topic_name":            {`topics."orders/eu": topic may only contain letters, digits, '.', '_', '-' and the wildcard '*' (line 2)`},
	"topic_reserved":        {"topics._default: the name _default is reserved"},
	"default_types":         {"_default.types: per-type overrides are only allowed in a topics entry (line 3)"},
	"nested_types":          {`topics.orders.types."order.refund".types: per-type overrides are only allowed in a topics entry`},
	"type_glob":             {`topics.orders.types."order.*": type names are matched exactly`},
	"duplicate_key":         {"topics.orders: duplicate key (line 3)"},
	"syntax":                {"syntax.bad.yaml: invalid YAML: line"},
	"multi_doc":             {"multi_doc.bad.yaml: invalid YAML: line 2: only one YAML document per file is supported"},
	"top_list":              {"top_list.bad.yaml: must be a mapping, got a list"},
	"key_not_string":        {"topics: keys must be strings, got a list"},
	"rule_no_name":          {"replay_rules[0].name: required: every replay rule needs a name"},
	"rule_dup_name":         {`replay_rules[1].name: duplicate replay rule name "r"`},
	"rule_incomplete":       {`replay_rules[0]: replay rule "r" is incomplete: filter, max_replays required, here or in an inherited rule of the same name (line 2)`},
	"rule_override_unknown": {`topics.orders.replay_rules[0]: replay rule "not-inherited" is incomplete: filter, delay, max_replays required`},
	"rule_max_replays":      {"replay_rules[0].max_replays: must be >= 1, got 0"},
	"rule_window": {"replay_rules[0].rate_limit: must be 0 (unlimited) or at least 0.001 replays per second, got -1", `replay_rules[0].window: window.start: "25:00" is not a time of day`,
		`replay_rules[1].window: window.time_zone: unknown time zone "Mars/Olympus"`},
	"rule_filter":    {`replay_rules[0].filter: must be a mapping, got string "ConnectionError"`},
	"rules_not_list": {"_default.replay_rules: must be a list, got a mapping"},
	"filter_nan":     {"replay_rules[0].filter: must be a mapping of JSON values: unsupported value: NaN"},
	"filter_keys":    {"replay_rules[0].filter: must be a mapping of JSON values: unsupported type: map[interface {}]interface {}"},
	"rule_filter_bounds": {"replay_rules[0].filter.path: must have at most 32 dot-separated keys, got 33",
		"topics.orders.replay_rules[0].filter.header: must be at most 4096 bytes, got 4097",
		"topics.orders.replay_rules[0].filter.q: must be at most 1024 bytes, got 1025"},
	"rule_filter_keys": {"replay_rules[0].filter.error_typ: unknown filter key (known: queue, type, error_type, state,",
		"replay_rules[0].filter.state: must be a string, got 7",
		"topics.orders.replay_rules[0].filter.ids: not a filter key of replay rules (only of bulk operations)",
		"topics.orders.replay_rules[1].filter.since: must be an RFC 3339 timestamp like 2026-02-13T10:00:00Z",
		`topics.orders.replay_rules[1].filter.unacknowledged: must be a boolean (true or false), got "yes"`},
	"bad_merge_key": {"_default.retry: a merge key (<<) must refer to a mapping"},
	"alias_bomb":    {"alias_bomb.bad.yaml: document too large once aliases and merge keys are expanded (over 100000 nodes)"},
	"many": {
		"_default.retry.max_attempts: must be >= 0, got -1",
		`_default.retry.jitter: must be a boolean (true or false), got string "maybe"`,
		"topics.orders.max_agee: unknown field (did you mean max_age?)",
		`topics.orders.state: must be one of active, paused, draining, got "off"`,
	},
}

func TestBadFiles(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("testdata/*.bad.yaml")
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".bad.yaml")
		if _, ok := badFiles[name]; !ok {
			t.Errorf("%s has no entry in badFiles", f)
		}
	}
	for name, wants := range badFiles {
		f := "testdata/" + name + ".bad.yaml"
		set, err := LoadFiles(f)
		if err == nil {
			t.Errorf("%s: loaded, want errors %q", f, wants)
			continue
		}
		if set != nil {
			t.Errorf("%s: got a Set along with the error", f)
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: errors.Is(err, ErrInvalid) = false: %v", f, err)
		}
		for _, w := range wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error\n  %s\nwant it to contain\n  %s", f, strings.ReplaceAll(err.Error(), "\n", "\n  "), w)
			}
		}
		var es Errors
		if !errors.As(err, &es) || len(es) != len(wants) {
			t.Errorf("%s: got %d errors, want %d:\n%v", f, len(es), len(wants), err)
		}
	}
}

func TestLoadDirSplitAcrossFiles(t *testing.T) {
	t.Parallel()
	set, err := LoadDir("testdata/dirs/split")
	if err != nil {
		t.Fatal(err)
	}
	if got := set.Files(); !slices.Equal(got, []string{"testdata/dirs/split/00-default.yaml", "testdata/dirs/split/orders.yaml", "testdata/dirs/split/payments.yml"}) {
		t.Errorf("Files() = %q", got)
	}
	want := map[string]string{"orders.*": "orders.yaml", "orders.eu.*": "orders.yaml", "orders.eu.archive": "orders.yaml", "*": "orders.yaml", "payment.charge": "payments.yml"}
	topics := set.Topics()
	if len(topics) != len(want) {
		t.Errorf("Topics() = %v", topics)
	}
	for k, f := range want {
		if filepath.Base(topics[k]) != f {
			t.Errorf("Topics()[%q] = %q, want %s", k, topics[k], f)
		}
	}

	tests := []struct {
		topic, typ  string
		declaredIn  string
		pattern     string
		maxAttempts int
		initial     time.Duration
		maxAge      time.Duration
		exhaustion  dlq.Exhaustion
		state       TopicState
		rate        float64
		target      string
		rules       []string // enabled rule names
	}{
		// Only _default: a topic no glob but "*" matches takes "*".
		{"clicks", "", "orders.yaml", "*", 2, time.Minute, 7 * day, dlq.ExhaustionDeadLetter, TopicActive, 0, "", []string{"retry-connection-errors"}},
		// "orders.*" is more specific than "*".
		{"orders.us", "", "orders.yaml", "orders.*", 4, time.Minute, 2 * day, dlq.ExhaustionDeadLetter, TopicActive, 50, "", []string{"retry-connection-errors"}},
		// Type overrides of the glob apply.
		{"orders.us", "order.refund", "orders.yaml", "orders.*", 10, time.Minute, 2 * day, dlq.ExhaustionDeadLetter, TopicActive, 50, "", []string{"retry-connection-errors"}},
		{"orders.us", "order.cancel", "orders.yaml", "orders.*", 4, time.Minute, 2 * day, dlq.ExhaustionDeadLetter, TopicPaused, 50, "", []string{"retry-connection-errors"}},
		{"orders.us", "order.other", "orders.yaml", "orders.*", 4, time.Minute, 2 * day, dlq.ExhaustionDeadLetter, TopicActive, 50, "", []string{"retry-connection-errors"}},
		// "orders.eu.*" beats "orders.*" and "*": only the most specific glob
		// applies, so neither max_attempts 4 nor 2 is inherited here.
		{"orders.eu.fr", "", "orders.yaml", "orders.eu.*", 5, 2 * time.Minute, 7 * day, dlq.ExhaustionDeadLetter, TopicActive, 0, "", []string{"retry-connection-errors"}},
		// An exact entry layers over its most specific glob, and its own types win.
		{"orders.eu.archive", "", "orders.yaml", "orders.eu.archive", 5, 2 * time.Minute, 7 * day, dlq.ExhaustionDeadLetter, TopicActive, 0, "orders.eu.replay", []string{"eu-only"}},
		{"orders.eu.archive", "order.refund", "orders.yaml", "orders.eu.archive", 5, 2 * time.Minute, 7 * day, dlq.ExhaustionDiscard, TopicActive, 0, "orders.eu.replay", []string{"eu-only"}},
		// Exact beats every glob, including "*", which still lies under it.
		{"payment.charge", "", "payments.yml", "payment.charge", 25, 15 * time.Second, 7 * day, dlq.ExhaustionDeadLetter, TopicActive, 0, "", []string{"retry-connection-errors"}},
		// A glob key resolves to what the topics it matches get.
		{"orders.*", "", "orders.yaml", "orders.*", 4, time.Minute, 2 * day, dlq.ExhaustionDeadLetter, TopicActive, 50, "", []string{"retry-connection-errors"}},
	}
	for _, tt := range tests {
		got := set.Resolve(tt.topic, tt.typ)
		name := tt.topic + "/" + tt.typ
		if got.Name != tt.topic || got.Type != tt.typ {
			t.Errorf("%s: Name/Type = %q/%q", name, got.Name, got.Type)
		}
		if filepath.Base(got.DeclaredIn) != tt.declaredIn || got.Pattern != tt.pattern {
			t.Errorf("%s: declared in %q as %q, want %s as %q", name, got.DeclaredIn, got.Pattern, tt.declaredIn, tt.pattern)
		}
		if got.Retry.MaxAttempts != tt.maxAttempts || got.Retry.InitialInterval != tt.initial || got.MaxAge != tt.maxAge ||
			got.Retry.OnExhaustion != tt.exhaustion || got.State != tt.state || got.Redelivery.RateLimit != tt.rate ||
			got.Redelivery.TargetTopic != tt.target {
			t.Errorf("%s: got max_attempts %d initial %v max_age %v exhaustion %s state %s rate %v target %q\nlayers: %s",
				name, got.Retry.MaxAttempts, got.Retry.InitialInterval, got.MaxAge, got.Retry.OnExhaustion, got.State,
				got.Redelivery.RateLimit, got.Redelivery.TargetTopic, joinLayers(got.Layers))
		}
		var enabled []string
		for _, r := range got.ReplayRules {
			if r.Enabled {
				enabled = append(enabled, r.Name)
			}
		}
		if !slices.Equal(enabled, tt.rules) {
			t.Errorf("%s: enabled rules %q, want %q", name, enabled, tt.rules)
		}
		if got.PruningPolicy != PruneArchive || got.Retry.MaxInterval != time.Hour {
			t.Errorf("%s: _default not inherited: %+v", name, got)
		}
	}

	// Layers say what was merged, in order.
	got := set.Resolve("orders.eu.archive", "order.refund")
	wantLayers := []string{
		"system defaults",
		"replay_rules (testdata/dirs/split/00-default.yaml)",
		"_default (testdata/dirs/split/00-default.yaml)",
		`topics."orders.eu.*" (testdata/dirs/split/orders.yaml)`,
		`topics."orders.eu.archive" (testdata/dirs/split/orders.yaml)`,
		`topics."orders.eu.archive".types."order.refund" (testdata/dirs/split/orders.yaml)`,
	}
	if !slices.Equal(got.Layers, wantLayers) {
		t.Errorf("Layers =\n%s\nwant\n%s", strings.Join(got.Layers, "\n"), strings.Join(wantLayers, "\n"))
	}
	// The rule disabled by name keeps its inherited fields.
	r := got.ReplayRules[0]
	if r.Name != "retry-connection-errors" || r.Enabled || r.MaxReplays != 3 || r.Delay != time.Hour || r.Filter.ErrorType != "ConnectionError" {
		t.Errorf("disabled rule = %+v", r)
	}
}

func TestResolveWithoutEntries(t *testing.T) {
	t.Parallel()
	var nilSet *Set
	empty, err := LoadFiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Set{nilSet, empty} {
		got := s.Resolve("anything", "t")
		want := DefaultTopic()
		want.Name, want.Type = "anything", "t"
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Resolve on an empty set = %+v, want system defaults", got)
		}
		if got.DeclaredIn != "" {
			t.Errorf("DeclaredIn = %q", got.DeclaredIn)
		}
	}
	if nilSet.Files() != nil || len(nilSet.Topics()) != 0 {
		t.Error("nil Set lists something")
	}
}

func TestSystemDefaults(t *testing.T) {
	t.Parallel()
	d := DefaultTopic()
	if !reflect.DeepEqual(d.Retry, Default()) || d.DeadLetter.Retention != (DeadLetterRetention{180 * day, 10000}) ||
		d.Retention != (Retention{30 * day, 7 * day, 7 * day}) || d.PruningPolicy != PruneDelete || d.State != TopicActive ||
		d.MaxAge != 0 || d.Redelivery != (Redelivery{Mode: ModeKafka, Target: TargetGroup}) || len(d.ReplayRules) != 0 {
		t.Errorf("DefaultTopic() = %+v", d)
	}
}

func TestLoadDirErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		dir   string
		wants []string
	}{
		{"dup_topic", []string{`testdata/dirs/dup_topic/b.yaml: topics.orders: topic "orders" is also declared in testdata/dirs/dup_topic/a.yaml; a topic may be declared in one file only (line 2)`}},
		{"dup_default", []string{"testdata/dirs/dup_default/b.yaml: _default: _default is also declared in testdata/dirs/dup_default/a.yaml"}},
		{"dup_rule", []string{`testdata/dirs/dup_rule/b.yaml: replay_rules[0].name: replay rule "nightly" is also declared in testdata/dirs/dup_rule/a.yaml`}},
		{"cross_file", []string{"testdata/dirs/cross_file/b.yaml: topics.orders.retry.initial_interval: merged policy has max_interval PT1M < initial_interval PT5M"}},
		// Every error of every file, nothing half-applied.
		{"many_errors", []string{
			"testdata/dirs/many_errors/b.yaml: topics.payments.retry.max_attempts: must be >= 0, got -5",
			`testdata/dirs/many_errors/c.yaml: topics.clicks.max_age: invalid ISO 8601 duration "1h"`,
			`testdata/dirs/many_errors/c.yaml: topics.orders: topic "orders" is also declared in testdata/dirs/many_errors/a.yaml`,
		}},
	}
	for _, tt := range tests {
		set, err := LoadDir("testdata/dirs/" + tt.dir)
		if err == nil || set != nil {
			t.Errorf("%s: LoadDir = %v, %v; want only an error", tt.dir, set, err)
			continue
		}
		var es Errors
		if !errors.As(err, &es) || len(es) != len(tt.wants) {
			t.Errorf("%s: want %d errors, got:\n%v", tt.dir, len(tt.wants), err)
		}
		for _, w := range tt.wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error\n  %s\nwant it to contain\n  %s", tt.dir, strings.ReplaceAll(err.Error(), "\n", "\n  "), w)
			}
		}
	}

	// Hidden files, other extensions and subdirectories are not read.
	set, err := LoadDir("testdata/dirs/ignored")
	if err != nil {
		t.Fatalf("ignored: %v", err)
	}
	if got := set.Files(); len(got) != 1 || filepath.Base(got[0]) != "policy.yaml" {
		t.Errorf("ignored: Files() = %q", got)
	}

	// A missing directory is an I/O error, not an invalid policy.
	_, err = LoadDir("testdata/no-such-dir")
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrInvalid) {
		t.Errorf("missing dir: %v", err)
	}
	_, err = LoadFiles("testdata/no-such-file.yaml")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// Files that hold no document, or only a null one, declare nothing.
func TestEmptyDocuments(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{"", "\n\n", "# only a comment\n", "---\n", "---\n...\n", "~\n", "null\n", "{}\n"} {
		set, err := load([]source{{"x.yaml", []byte(doc)}})
		if err != nil || len(set.Topics()) != 0 {
			t.Errorf("%q: %v", doc, err)
		}
	}
}

// A filter read from YAML is the filter read from JSON: a YAML timestamp or
// number reads as the JSON string or number would.
func TestReplayFilterIsJSON(t *testing.T) {
	t.Parallel()
	set, err := load([]source{{"x.yaml", []byte(`replay_rules:
  - {name: r, filter: {since: 2026-02-12T00:00:00Z, path: n, value: 3, header: [a, "b:c"], unacknowledged: false}, delay: PT1H, max_replays: 1}
`)}})
	if err != nil {
		t.Fatal(err)
	}
	got := set.Resolve("t", "").ReplayRules[0].Filter
	no := false
	want := filter.Filter{Since: time.Date(2026, 2, 12, 0, 0, 0, 0, time.UTC), Path: []string{"n"}, Value: "3",
		Headers: []filter.Header{{Key: "a"}, {Key: "b", Value: "c", ValueSet: true}}, Unacknowledged: &no}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("filter = %#v", got)
	}
	fromJSON := mustTopicSpec(t, `{"replay_rules":[{"name":"r","filter":{"since":"2026-02-12T00:00:00Z","path":"n","value":3,"header":["a","b:c"],"unacknowledged":false},"delay":"PT1H","max_replays":1}]}`)
	top, err := DefaultTopic().Apply("api", fromJSON)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(top.ReplayRules[0].Filter, want) {
		t.Errorf("JSON filter = %#v", top.ReplayRules[0].Filter)
	}
}

func TestAnchorsAndJSONFiles(t *testing.T) {
	t.Parallel()
	set, err := LoadFiles("testdata/anchors.good.yaml", "testdata/json.good.yml")
	if err != nil {
		t.Fatal(err)
	}
	o := set.Resolve("orders", "").Retry
	if o.MaxAttempts != 7 || o.MaxInterval != 10*time.Second {
		t.Errorf("merge key: %+v", o)
	}
	if p := set.Resolve("payments", "").Retry; p.MaxAttempts != 3 || p.MaxInterval != 10*time.Second {
		t.Errorf("alias: %+v", p)
	}
	if c := set.Resolve("clicks", ""); c.Retry.MaxAttempts != 1 || c.MaxAge != time.Hour {
		t.Errorf("JSON file: %+v", c)
	}
}

func TestTopicDecideMaxAge(t *testing.T) {
	t.Parallel()
	set, err := LoadFiles("testdata/design.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	topic := set.Resolve("orders.eu", "order.refund") // "orders.*": max_age P7D; type: max_attempts 10
	if topic.MaxAge != 7*day || topic.Retry.MaxAttempts != 10 || topic.DeclaredIn != "testdata/design.good.yaml" || topic.Pattern != "orders.*" {
		t.Fatalf("resolved %+v", topic)
	}
	now := time.Date(2026, 2, 13, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		attempt  int
		code     dlq.Code
		failedAt time.Time
		want     Decision
	}{
		{"young failure retries", 2, "", now.Add(-time.Hour),
			Decision{State: dlq.StateRetryable, Delay: topic.Retry.Delay(2, 0.5), Reason: ReasonRetry}},
		{"exactly max_age old still retries", 2, "", now.Add(-7 * day),
			Decision{State: dlq.StateRetryable, Delay: topic.Retry.Delay(2, 0.5), Reason: ReasonRetry}},
		{"older than max_age is not retried", 2, "", now.Add(-7*day - time.Second),
			Decision{State: dlq.StateDiscarded, Exhaustion: dlq.ExhaustionDeadLetter, Reason: ReasonMaxAge}},
		{"unknown failure time never expires", 2, "", time.Time{},
			Decision{State: dlq.StateRetryable, Delay: topic.Retry.Delay(2, 0.5), Reason: ReasonRetry}},
		{"handler code wins over max_age", 2, dlq.CodeDiscard, now.Add(-30 * day),
			Decision{State: dlq.StateDiscarded, Exhaustion: dlq.ExhaustionDiscard, Reason: ReasonHandlerCode}},
		{"exhausted is reported as exhausted", 10, "", now.Add(-30 * day),
			Decision{State: dlq.StateDiscarded, Exhaustion: dlq.ExhaustionDeadLetter, Reason: ReasonExhausted}},
	}
	for _, tt := range tests {
		if got := topic.Decide(tt.attempt, "db.timeout", tt.code, tt.failedAt, now, 0.5); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
	// Without a max_age nothing expires.
	noAge := set.Resolve("payment.charge", "")
	if noAge.MaxAge != 0 || noAge.Expired(now.Add(-1000*day), now) {
		t.Errorf("payment.charge max_age = %v", noAge.MaxAge)
	}
	// payment.charge: the §12.3 policy through a file.
	if d := noAge.Decide(1, "validation.sku", "", now, now, 0.5); d.Reason != ReasonNonRetryable || d.Exhaustion != dlq.ExhaustionDeadLetter {
		t.Errorf("payment.charge validation.*: %+v", d)
	}
	if d := noAge.Retry.BaseDelay(3); d != 1215*time.Second {
		t.Errorf("payment.charge polynomial BaseDelay(3) = %v", d)
	}
}

func TestWithRecordOverride(t *testing.T) {
	t.Parallel()
	set, err := LoadFiles("testdata/design.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	topic := set.Resolve("payment.charge", "")
	got, err := topic.WithRecordOverride(json.RawMessage(`{"max_attempts":2,"non_retryable_errors":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got.Retry.MaxAttempts != 2 || len(got.Retry.NonRetryableErrors) != 0 || got.Retry.BackoffStrategy != StrategyPolynomial ||
		got.Retry.InitialInterval != 15*time.Second || got.Layers[len(got.Layers)-1] != "redrive.retry header" {
		t.Errorf("override: %+v", got)
	}
	if topic.Retry.MaxAttempts != 25 || len(topic.Retry.NonRetryableErrors) != 2 || len(topic.Layers) == len(got.Layers) {
		t.Error("WithRecordOverride changed its receiver")
	}
	for _, empty := range []string{"", "null", " "} {
		if same, err := topic.WithRecordOverride(json.RawMessage(empty)); err != nil || !reflect.DeepEqual(same, topic) {
			t.Errorf("override %q: %v", empty, err)
		}
	}
	for raw, want := range map[string]string{
		`{"max_atempts":2}`:           "record retry override: retry.max_atempts: unknown field (did you mean max_attempts?)",
		`{"initial_interval":"PT2H"}`: "record retry override: retry.max_interval: must be >= initial_interval (PT2H), got PT1H",
		`not json`:                    "record retry override: retry: invalid JSON",
	} {
		same, err := topic.WithRecordOverride(json.RawMessage(raw))
		if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrInvalid) {
			t.Errorf("override %s: %v, want %q", raw, err, want)
		}
		if !reflect.DeepEqual(same, topic) {
			t.Errorf("override %s: on error the topic changed", raw)
		}
	}
}

func TestTopicApplyAndJSON(t *testing.T) {
	t.Parallel()
	set, err := LoadFiles("testdata/full.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	topic := set.Resolve("orders", "order.refund")
	b, err := json.Marshal(topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"retry":{"max_attempts":10,"initial_interval":"PT10S","backoff_coefficient":1.5,"max_interval":"PT20M"`,
		`"max_age":"P2D"`, `"dead_letter":{"retention":{"max_age":"P30D","max_count":100}}`,
		`"retention":{"discarded":"P2D","completed":"PT12H","cancelled":"PT6H"}`, `"pruning_policy":"archive"`,
		`"redelivery":{"rate_limit":1,"target_topic":"refunds","keep_partition":false,"mode":"pull","target":"topic"}`, `"state":"draining"`,
		`{"name":"default-rule","filter":{"error_type":"x"},"delay":"PT1M","max_replays":1,"enabled":true,"rate_limit":1,"window":{"start":"00:00","end":"06:00"}}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON %s\nmissing %s", b, want)
		}
	}
	// The JSON reads back as a complete TopicSpec: applied to the system
	// defaults it gives the same policy.
	spec, err := DecodeTopicSpec(b)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DefaultTopic().Apply("api", spec)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(configOf(back), configOf(topic)) {
		t.Errorf("round trip:\n%+v\n%+v", configOf(back), configOf(topic))
	}
	if !reflect.DeepEqual(topic.Spec(), spec) {
		t.Errorf("Spec() differs from the decoded JSON:\n%+v\n%+v", topic.Spec(), spec)
	}

	// Apply layers an API config on a resolved topic, and validates the merge.
	got, err := set.Resolve("clicks", "").Apply("api", mustTopicSpec(t, `{"state":"paused","retry":{"max_attempts":9}}`))
	if err != nil || got.State != TopicPaused || got.Retry.MaxAttempts != 9 || got.Layers[len(got.Layers)-1] != "api" {
		t.Errorf("Apply: %+v %v", got, err)
	}
	base := set.Resolve("clicks", "")
	same, err := base.Apply("api", mustTopicSpec(t, `{"retry":{"initial_interval":"PT2H"}}`))
	if err == nil || !strings.Contains(err.Error(), "retry.initial_interval: merged policy has max_interval PT1H < initial_interval PT2H") {
		t.Errorf("Apply cross-field: %v", err)
	}
	if !reflect.DeepEqual(same, base) {
		t.Error("Apply changed the topic on error")
	}
	if _, err := base.Apply("api", mustTopicSpec(t, `{"replay_rules":[{"name":"new-rule","enabled":true}]}`)); err == nil ||
		!strings.Contains(err.Error(), `replay_rules[0]: replay rule "new-rule" is incomplete: filter, delay, max_replays required`) {
		t.Errorf("Apply incomplete rule: %v", err)
	}
	// An API override may switch an inherited rule off by name alone.
	off, err := base.Apply("api", mustTopicSpec(t, `{"replay_rules":[{"name":"retry-connection-errors","enabled":false}]}`))
	if err != nil || off.ReplayRules[0].Enabled || off.ReplayRules[0].MaxReplays != 3 {
		t.Errorf("Apply disable rule: %+v %v", off.ReplayRules, err)
	}

	// DecodeTopicSpec is strict and refuses types.
	for body, want := range map[string]string{
		`{"types":{"x":{}}}`:                 "types: per-type overrides are only allowed in a topics entry",
		`{"state":"stopped"}`:                `state: must be one of active, paused, draining, got "stopped"`,
		`{"retry":{"max_attempts":-1}}`:      "retry.max_attempts: must be >= 0, got -1",
		`{"redelivery":{"ratelimit":5}}`:     "redelivery.ratelimit: unknown field (did you mean rate_limit?)",
		`{"max_age":"P1Y"}`:                  "max_age: invalid ISO 8601 duration",
		`{"dead_letter":{"retention":null}}`: "",
	} {
		_, err := DecodeTopicSpec([]byte(body))
		if want == "" {
			if err != nil {
				t.Errorf("DecodeTopicSpec(%s): %v", body, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("DecodeTopicSpec(%s) = %v, want %q", body, err, want)
		}
	}
}

// configOf drops the metadata of a Topic, keeping the policy.
func configOf(t Topic) Topic {
	t.Name, t.Type, t.DeclaredIn, t.Pattern, t.Layers = "", "", "", "", nil
	return t
}

func mustTopicSpec(t *testing.T, js string) *TopicSpec {
	t.Helper()
	s, err := DecodeTopicSpec([]byte(js))
	if err != nil {
		t.Fatalf("DecodeTopicSpec(%s): %v", js, err)
	}
	return s
}

func TestGlobMatching(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"orders.*", "orders.eu", true},
		{"orders.*", "orders.eu.fr", true}, // '*' crosses dots
		{"orders.*", "orders.", true},
		{"orders.*", "orders", false},
		{"orders.*", "xorders.eu", false},
		{"*", "", true},
		{"*", "anything", true},
		{"*.dlq", "orders.dlq", true},
		{"*.dlq", "orders.dlq.x", false},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"a**", "a", true},
		{"orders.eu", "orders.eu", true},
		{"orders.eu", "orders.euro", false},
	}
	for _, tt := range tests {
		if got := matchGlob(tt.pattern, tt.name); got != tt.want {
			t.Errorf("matchGlob(%q, %q) = %v", tt.pattern, tt.name, got)
		}
	}
	keys := []string{"*", "orders.*", "*.eu", "orders.e*", "o*s.*", "orders.eu.*", "ord*.eu"}
	slices.SortFunc(keys, compareSpecificity)
	// Most literal characters first; then fewer '*'; then alphabetical.
	want := []string{"orders.eu.*", "orders.e*", "orders.*", "ord*.eu", "*.eu", "o*s.*", "*"}
	if !slices.Equal(keys, want) {
		t.Errorf("specificity order = %q, want %q", keys, want)
	}
}

// FuzzLoad: any file content loads or fails with ErrInvalid, never panics, and
// whatever loads resolves to valid policies.
func FuzzLoad(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.y*ml")
	for _, name := range files {
		b, _ := os.ReadFile(name)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		set, err := load([]source{{"fuzz.yaml", data}})
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error is not ErrInvalid: %v", err)
			}
			return
		}
		for topic := range set.Topics() {
			for _, typ := range []string{"", "x"} {
				if err := set.Resolve(topic, typ).Retry.Validate(); err != nil {
					t.Fatalf("Resolve(%q, %q) is invalid: %v", topic, typ, err)
				}
			}
		}
		if err := set.Resolve("some.topic", "").Retry.Validate(); err != nil {
			t.Fatalf("Resolve(some.topic) is invalid: %v", err)
		}
	})
}

// Declares names exactly declared topics only (globs match, they do not
// declare); DeclaresType the types some topics entry overrides. Metrics give
// these their own label values.
func TestDeclares(t *testing.T) {
	set, err := LoadDir("testdata/dirs/split")
	if err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]bool{"orders.eu.archive": true, "orders.eu.other": false, "orders.*": false, "elsewhere": false} {
		if got := set.Declares(topic); got != want {
			t.Errorf("Declares(%q) = %v, want %v", topic, got, want)
		}
	}
	for typ, want := range map[string]bool{"order.refund": true, "order.cancel": true, "order.created": false, "": false} {
		if got := set.DeclaresType(typ); got != want {
			t.Errorf("DeclaresType(%q) = %v, want %v", typ, got, want)
		}
	}
	var none *Set
	if none.Declares("orders") || none.DeclaresType("order.refund") {
		t.Error("a nil Set declares something")
	}
}
