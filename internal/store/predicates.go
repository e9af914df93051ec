package store

import (
	"encoding/json"
	"path"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/filter"
)

// The dynamic part of the statements over a filter: the WHERE that selects
// the records of a filter.Filter narrowed by a filter.Scope. It is compiled
// here, and only here, from one predicate table, to a condition with named
// arguments (pgx.NamedArgs, @name placeholders) that holds only the
// predicates a filter sets — never "(@x = ” OR col = @x)": each statement's
// plan is made for the predicates it has.

// binder binds a value to a named argument and returns its placeholder.
type binder func(name string, v any) string

// predicate is one condition a filter or a scope can set.
type predicate struct {
	// keys are the filter keys (filter.Keys names) and Scope fields it
	// answers for: a key or field without a predicate fails
	// TestEveryFilterKeyHasAPredicate.
	keys []string
	// on says whether f narrowed by sc sets it.
	on func(f *filter.Filter, sc *filter.Scope) bool
	// sql is its condition over redrive_record, with unqualified columns.
	sql func(f *filter.Filter, sc *filter.Scope, bind binder) string
	// lifecycle says the condition reads a column only the lifecycle holds
	// (lifecycleHeld): a filter without one is answered from the wide rows
	// alone (recordsFrom).
	lifecycle bool
	// counted says the same condition holds over the statistics table
	// redrive_record_count, whose dimension columns have the same names
	// and meaning: a filter of counted predicates only is counted there.
	counted bool
}

// predicates is every predicate, in the order a condition lists them.
var predicates = []predicate{
	{keys: []string{"queue"}, counted: true,
		on: func(f *filter.Filter, _ *filter.Scope) bool { return f.Queue != "" },
		sql: func(f *filter.Filter, _ *filter.Scope, bind binder) string {
			return "queue = " + bind("queue", f.Queue)
		}},
	{keys: []string{"type"}, counted: true,
		on:  func(f *filter.Filter, _ *filter.Scope) bool { return f.Type != "" },
		sql: func(f *filter.Filter, _ *filter.Scope, bind binder) string { return "type = " + bind("type", f.Type) }},
	{keys: []string{"error_type"}, counted: true,
		on: func(f *filter.Filter, _ *filter.Scope) bool { return f.ErrorType != "" },
		sql: func(f *filter.Filter, _ *filter.Scope, bind binder) string {
			return "error_type = " + bind("error_type", f.ErrorType)
		}},
	{keys: []string{"incident"}, counted: true,
		on: func(f *filter.Filter, _ *filter.Scope) bool { return f.Incident != "" },
		sql: func(f *filter.Filter, _ *filter.Scope, bind binder) string {
			return "fingerprint = " + bind("incident", f.Incident)
		}},
	{keys: []string{"NotQueues"}, counted: true,
		on: func(_ *filter.Filter, sc *filter.Scope) bool { return len(sc.NotQueues) > 0 },
		sql: func(_ *filter.Filter, sc *filter.Scope, bind binder) string {
			return "queue <> ALL(" + bind("not_queues", sc.NotQueues) + ")"
		}},
	{keys: []string{"NotErrorTypes"}, counted: true,
		on: func(_ *filter.Filter, sc *filter.Scope) bool { return len(sc.NotErrorTypes) > 0 },
		sql: func(_ *filter.Filter, sc *filter.Scope, bind binder) string {
			return "error_type <> ALL(" + bind("not_error_types", sc.NotErrorTypes) + ")"
		}},
	{keys: []string{"OnlyQueues"}, counted: true,
		on: func(_ *filter.Filter, sc *filter.Scope) bool { return sc.OnlyQueues != nil },
		sql: func(_ *filter.Filter, sc *filter.Scope, bind binder) string {
			return "queue = ANY(" + bind("only_queues", sc.OnlyQueues) + "::text[])"
		}},
	{keys: []string{"NotInternal"}, counted: true,
		on:  func(_ *filter.Filter, sc *filter.Scope) bool { return sc.NotInternal },
		sql: func(*filter.Filter, *filter.Scope, binder) string { return "left(queue, 2) <> '__'" }},
	{keys: []string{"state"}, lifecycle: true, counted: true,
		on: func(f *filter.Filter, _ *filter.Scope) bool { return f.State != "" },
		sql: func(f *filter.Filter, _ *filter.Scope, bind binder) string {
			return "state = " + bind("state", string(f.State))
		}},
	{keys: []string{"States"}, lifecycle: true, counted: true,
		on: func(_ *filter.Filter, sc *filter.Scope) bool { return len(sc.States) > 0 },
		sql: func(_ *filter.Filter, sc *filter.Scope, bind binder) string {
			return "state = ANY(" + bind("states", stateStrings(sc.States)) + ")"
		}},
	{keys: []string{"exhaustion"}, lifecycle: true, counted: true,
		on: func(f *filter.Filter, _ *filter.Scope) bool { return f.Exhaustion != "" },
		sql: func(f *filter.Filter, _ *filter.Scope, bind binder) string {
			return "exhaustion = " + bind("exhaustion", string(f.Exhaustion))
		}},
	{keys: []string{"since"},
		on: func(f *filter.Filter, _ *filter.Scope) bool { return !f.Since.IsZero() },
		sql: func(f *filter.Filter, _ *filter.Scope, bind binder) string {
			return "created_at >= " + bind("since", f.Since)
		}},
	{keys: []string{"until"},
		on: func(f *filter.Filter, _ *filter.Scope) bool { return !f.Until.IsZero() },
		sql: func(f *filter.Filter, _ *filter.Scope, bind binder) string {
			return "created_at < " + bind("until", f.Until)
		}},
	// The index holds the key's first 1,024 bytes (a key may be longer than
	// an index entry): the prefix finds the rows, the key itself confirms them.
	{keys: []string{"key"},
		on: func(f *filter.Filter, _ *filter.Scope) bool { return f.Key != nil },
		sql: func(f *filter.Filter, _ *filter.Scope, bind binder) string {
			k := bind("key", f.Key)
			return "substring(key from 1 for 1024) = substring(" + k + "::bytea from 1 for 1024) AND key = " + k + "::bytea"
		}},
	{keys: []string{"q"},
		on: func(f *filter.Filter, _ *filter.Scope) bool { return f.Q != "" },
		sql: func(f *filter.Filter, _ *filter.Scope, bind binder) string {
			return "position(" + bind("q", []byte(f.Q)) + "::bytea in value) > 0"
		}},
	{keys: []string{"path", "value"},
		on: func(f *filter.Filter, _ *filter.Scope) bool { return len(f.Path) > 0 },
		sql: func(f *filter.Filter, _ *filter.Scope, bind binder) string {
			docs, _ := containment(f.Path, f.Value)
			ors := make([]string, len(docs))
			for i, d := range docs {
				ors[i] = "payload @> " + bind("path"+suffix(i), string(d)) + "::jsonb"
			}
			return "(" + strings.Join(ors, " OR ") + ")"
		}},
	{keys: []string{"header"},
		on: func(f *filter.Filter, _ *filter.Scope) bool { return len(f.Headers) > 0 },
		sql: func(f *filter.Filter, _ *filter.Scope, bind binder) string {
			conds := make([]string, len(f.Headers))
			for i, h := range f.Headers {
				doc := map[string]string{"key": h.Key}
				if h.ValueSet {
					doc["value"] = h.Value
				}
				b, _ := json.Marshal([]any{doc})
				conds[i] = "headers @> " + bind("header"+suffix(i), string(b)) + "::jsonb"
			}
			return strings.Join(conds, " AND ")
		}},
	{keys: []string{"MaxID"},
		on: func(_ *filter.Filter, sc *filter.Scope) bool { return sc.MaxID != "" },
		sql: func(_ *filter.Filter, sc *filter.Scope, bind binder) string {
			return "id <= " + bind("max_id", sc.MaxID)
		}},
	{keys: []string{"ids"},
		on: func(f *filter.Filter, _ *filter.Scope) bool { return len(f.IDs) > 0 },
		sql: func(f *filter.Filter, _ *filter.Scope, bind binder) string {
			return "id = ANY(" + bind("ids", f.IDs) + "::uuid[])"
		}},
	{keys: []string{"unacknowledged"}, lifecycle: true,
		on: func(f *filter.Filter, _ *filter.Scope) bool { return f.Unacknowledged != nil },
		sql: func(f *filter.Filter, _ *filter.Scope, _ binder) string {
			if *f.Unacknowledged {
				return "(state = 'available' AND unacknowledged_at IS NOT NULL)"
			}
			return "(state <> 'available' OR unacknowledged_at IS NULL)"
		}},
	{keys: []string{"QueueGlobs"}, counted: true,
		on: func(_ *filter.Filter, sc *filter.Scope) bool { return sc.QueueGlobs != nil },
		sql: func(_ *filter.Filter, sc *filter.Scope, bind binder) string {
			return "queue LIKE ANY(" + bind("queue_globs", LikePatterns(sc.QueueGlobs)) + "::text[])"
		}},
	{keys: []string{"InFlight"}, lifecycle: true,
		on: func(_ *filter.Filter, sc *filter.Scope) bool { return sc.InFlight != nil },
		sql: func(_ *filter.Filter, sc *filter.Scope, _ binder) string {
			if *sc.InFlight {
				return inFlightIDsSQL
			}
			return "NOT " + inFlightSQL
		}},
}

// LikePatterns turns queue globs ('*' any run of characters, '?' one, as
// auth validates them) into SQL LIKE patterns, escaping LIKE's own '%',
// '_' and '\\' (a topic name may hold '_'). Never nil.
func LikePatterns(globs []string) []string {
	out := make([]string, 0, len(globs))
	for _, g := range globs {
		var b strings.Builder
		for _, c := range g {
			switch c {
			case '*':
				b.WriteByte('%')
			case '?':
				b.WriteByte('_')
			case '%', '_', '\\':
				b.WriteByte('\\')
				b.WriteRune(c)
			default:
				b.WriteRune(c)
			}
		}
		out = append(out, b.String())
	}
	return out
}

// inGlobs reports whether queue matches one of globs (nil: every queue),
// as the QueueGlobs predicate does: for statements that read rows per
// queue (statistics, activity), whose rows are kept or left whole.
func inGlobs(globs []string, queue string) bool {
	if globs == nil {
		return true
	}
	for _, g := range globs {
		if ok, _ := path.Match(g, queue); ok {
			return true
		}
	}
	return false
}

// suffix numbers the values of a repeated predicate.
func suffix(i int) string { return "_" + strconv.Itoa(i) }

// bindTo binds into args, each name prefixed with prefix: two uses of one
// predicate in a statement (with different prefixes) never share an
// argument. A name bound twice is a bug in the caller, and panics.
func bindTo(args pgx.NamedArgs, prefix string) binder {
	return func(name string, v any) string {
		name = prefix + name
		if _, dup := args[name]; dup {
			panic("store: named argument " + name + " bound twice")
		}
		args[name] = v
		return "@" + name
	}
}

// where renders f, narrowed by sc (nil: not narrowed), as a condition over
// redrive_record, binding its values into args under names prefixed with
// prefix. No predicate set is TRUE.
func where(f *filter.Filter, sc *filter.Scope, prefix string, args pgx.NamedArgs) string {
	return render(f, sc, prefix, args, renderOpts{})
}

// renderOpts say how a condition is rendered.
type renderOpts struct {
	// counting renders it over the statistics table.
	counting bool
	// lifecycleQueue matches the queue on the lifecycle's copy
	// (redrive_record.lifecycle_queue), for statements whose plan reads an
	// index of the lifecycle that starts with the queue (a listing sorted
	// by attempt or next_retry_at). The planner cannot carry "queue = …"
	// from one table to the other, and both conditions at once would be
	// counted as independent (a queue's selectivity squared).
	lifecycleQueue bool
	// wideOnly renders only the predicates on the wide row's columns, for
	// a statement over redrive_record_data alone that finds candidates
	// (payloadMatchIDs); the full condition is checked on the view after.
	wideOnly bool
}

// recordsFrom is the relation a statement over f narrowed by sc reads:
// the view redrive_record, or the wide rows alone (redrive_record_data, no
// join) when no predicate reads a column only the lifecycle holds.
func recordsFrom(f *filter.Filter, sc *filter.Scope) string {
	if sc == nil {
		sc = &filter.Scope{}
	}
	for i := range predicates {
		if p := &predicates[i]; p.lifecycle && p.on(f, sc) {
			return "redrive_record"
		}
	}
	return "redrive_record_data"
}

// countable reports whether every predicate f narrowed by sc sets can be
// answered by the statistics table.
func countable(f *filter.Filter, sc *filter.Scope) bool {
	if sc == nil {
		sc = &filter.Scope{}
	}
	for i := range predicates {
		if p := &predicates[i]; !p.counted && p.on(f, sc) {
			return false
		}
	}
	return true
}

// countWhere renders f narrowed by sc over redrive_record_count; it must be
// countable.
func countWhere(f *filter.Filter, sc *filter.Scope, args pgx.NamedArgs) string {
	return render(f, sc, "c_", args, renderOpts{counting: true})
}

func render(f *filter.Filter, sc *filter.Scope, prefix string, args pgx.NamedArgs, opts renderOpts) string {
	if sc == nil {
		sc = &filter.Scope{}
	}
	bind := bindTo(args, prefix)
	var conds []string
	for i := range predicates {
		p := &predicates[i]
		if !p.on(f, sc) || opts.wideOnly && p.lifecycle {
			continue
		}
		if opts.counting && !p.counted {
			panic("store: counting a filter the count table cannot answer")
		}
		if opts.lifecycleQueue && p.keys[0] == "queue" {
			conds = append(conds, "lifecycle_queue = "+bind("queue", f.Queue))
			continue
		}
		conds = append(conds, p.sql(f, sc, bind))
	}
	if len(conds) == 0 {
		return "TRUE"
	}
	return strings.Join(conds, " AND ")
}

// containment builds the jsonb documents whose containment (@>) in the payload
// means "the value at path equals v": v as JSON when it is a JSON scalar, and
// always v as a JSON string, so that ?path=id&value=17 finds 17 and "17".
func containment(path []string, value string) ([][]byte, error) {
	var vals []any
	var scalar any
	if err := json.Unmarshal([]byte(value), &scalar); err == nil {
		switch scalar.(type) {
		case float64, bool, nil:
			vals = append(vals, json.RawMessage(value))
		}
	}
	vals = append(vals, value)
	out := make([][]byte, 0, len(vals))
	for _, v := range vals {
		doc := v
		for i := len(path) - 1; i >= 0; i-- {
			doc = map[string]any{path[i]: doc}
		}
		b, err := json.Marshal(doc)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// Where is the SQL condition that selects the records of f narrowed by sc
// (nil: not narrowed), with its arguments (one pgx.NamedArgs): what every
// statement over a filter runs. For EXPLAINs, and for tests that compare what
// the sources of one filter (a query string, a task, a replay rule) select.
func Where(f *filter.Filter, sc *filter.Scope) (string, []any) {
	args := pgx.NamedArgs{}
	return where(f, sc, "", args), []any{args}
}
