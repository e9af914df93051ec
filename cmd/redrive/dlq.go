package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/redrive/redrive/internal/filter"
)

// dlqFilter is the filter flags of a command: one per key of the filter
// package's table that src takes (dlq list: the list's; retry --all and
// purge: the bulk operations'), named as the key with "-" for "_"
// (--error-type).
type dlqFilter struct {
	src filter.Source
	fs  *pflag.FlagSet
}

func newDLQFilter(src filter.Source) *dlqFilter { return &dlqFilter{src: src} }

// flagName is a filter key's flag.
func flagName(key string) string { return strings.ReplaceAll(key, "_", "-") }

func (f *dlqFilter) register(fs *pflag.FlagSet) {
	f.fs = fs
	for _, k := range filter.Keys(f.src) {
		usage := k.Doc
		if k.Kind == filter.Enum {
			usage += ": " + strings.Join(k.Enum, ", ")
		}
		switch {
		case k.Repeatable:
			fs.StringArray(flagName(k.Name), nil, usage+" (repeatable)")
		case k.Kind == filter.Bool:
			fs.Bool(flagName(k.Name), false, usage+" (--"+flagName(k.Name)+"=false for the others)")
		default:
			fs.String(flagName(k.Name), "", usage)
		}
	}
}

// query renders the flags given as query parameters.
func (f *dlqFilter) query() url.Values {
	q := url.Values{}
	for _, k := range filter.Keys(f.src) {
		name := flagName(k.Name)
		if !f.fs.Changed(name) {
			continue
		}
		switch {
		case k.Repeatable:
			q[k.Name], _ = f.fs.GetStringArray(name)
		case k.Kind == filter.Bool:
			b, _ := f.fs.GetBool(name)
			q.Set(k.Name, strconv.FormatBool(b))
		default:
			v, _ := f.fs.GetString(name)
			q.Set(k.Name, v)
		}
	}
	return q
}

// body reads the flags given as the filter of the bulk operations, as the API
// stores it (filter.Canonical); a bad one is an error naming its flag.
func (f *dlqFilter) body() (json.RawMessage, error) {
	parsed, err := filter.ParseQuery(f.query(), f.src)
	var fe *filter.Error
	if errors.As(err, &fe) {
		return nil, fmt.Errorf("--%s: %s", flagName(fe.Field), fe.Msg)
	}
	if err != nil {
		return nil, err
	}
	return parsed.Canonical(), nil
}

func dlqCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Inspect, retry and purge dead-letter records through the API",
		Long: `dlq talks to a running Redrive's API (REDRIVE_API_URL, default http://localhost:8080)
with the key in REDRIVE_API_KEY (or --api-key). Output is a table, or JSON with -o json.`,
	}
	cf.register(cmd.PersistentFlags())
	cmd.AddCommand(dlqListCmd(&cf), dlqShowCmd(&cf), dlqRawCmd(&cf), dlqRetryCmd(&cf), dlqPurgeCmd(&cf), dlqStatsCmd(&cf),
		dlqExportCmd(&cf), dlqImportCmd(&cf))
	return cmd
}

type recordRow struct {
	ID         string  `json:"id"`
	Queue      string  `json:"queue"`
	Type       string  `json:"type"`
	State      string  `json:"state"`
	Exhaustion *string `json:"exhaustion"`
	Attempt    int     `json:"attempt"`
	MaxAttempt int     `json:"max_attempts"`
	ErrorType  string  `json:"error_type"`
	CreatedAt  string  `json:"created_at"`
	// In a list, key and value are previews (the API cuts them).
	Key            *string `json:"key"`
	KeyEncoding    *string `json:"key_encoding"`
	KeyTruncated   bool    `json:"key_truncated"`
	Value          *string `json:"value"`
	ValueEncoding  *string `json:"value_encoding"`
	ValueSize      *int    `json:"value_size"`
	ValueTruncated bool    `json:"value_truncated"`
	// A value decoded from the Schema Registry wire format is previewed as
	// its JSON (payload), not as the bytes it arrived as.
	Payload     json.RawMessage `json:"payload"`
	ValueSchema *struct {
		Type string `json:"type"`
	} `json:"value_schema"`
}

// valuePreview is a list row's value cell: a decoded value's JSON, marked
// with its format (avro:{…}), or the value's own preview.
func (r *recordRow) valuePreview(n int) string {
	if r.ValueSchema != nil && len(r.Payload) > 0 {
		text := strings.ToLower(r.ValueSchema.Type) + ":" + string(r.Payload)
		return preview(&text, nil, false, n)
	}
	return preview(r.Value, r.ValueEncoding, r.ValueTruncated, n)
}

// preview shortens a list's key or value preview to a table cell of at most
// n characters, on one line: "-" for null, "…" where it was cut, base64
// text marked as such.
func preview(s, enc *string, truncated bool, n int) string {
	if s == nil {
		return "-"
	}
	v := strings.Join(strings.Fields(*s), " ")
	if enc != nil && *enc == "base64" {
		v = "base64:" + v
	}
	if r := []rune(v); len(r) > n {
		v, truncated = string(r[:n]), true
	}
	if truncated {
		v += "…"
	}
	return v
}

// byteSize says n bytes as 512 B, 4.0 KiB, 1.0 MiB.
func byteSize(n *int) string {
	switch {
	case n == nil:
		return "-"
	case *n < 1<<10:
		return fmt.Sprintf("%d B", *n)
	case *n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(*n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(*n)/(1<<20))
}

func dlqListCmd(cf *clientFlags) *cobra.Command {
	f := newDLQFilter(filter.List)
	var limit int
	var cursor string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List records, newest first, with a preview of each key and value",
		Long: `list shows records newest first. Keys and values are previews, as the API
lists them (at most 1 KiB of key and 4 KiB of value; -o json shows key_truncated,
value_truncated and the whole sizes): "dlq get ID" shows a whole record, and
"dlq raw ID" downloads its value or key as bytes.`,
		Args: cobra.NoArgs,
		RunE: cf.runE(func(cmd *cobra.Command, c *apiClient, _ []string) error {
			q := f.query()
			q.Set("limit", strconv.Itoa(limit))
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			var page struct {
				Items      []recordRow `json:"items"`
				Pagination struct {
					Total          int64  `json:"total"`
					TotalCapped    bool   `json:"total_capped"`
					TotalEstimated bool   `json:"total_estimated"`
					NextCursor     string `json:"next_cursor"`
				} `json:"pagination"`
			}
			raw, err := c.do(cmd.Context(), http.MethodGet, "/ojs/v1/dead-letter?"+q.Encode(), nil, &page)
			if err != nil {
				return err
			}
			if c.output == "json" {
				return c.printJSON(raw)
			}
			rows := make([][]string, len(page.Items))
			for i, r := range page.Items {
				state := r.State
				if r.Exhaustion != nil {
					state += "/" + *r.Exhaustion
				}
				rows[i] = []string{r.ID, r.Queue, orDash(r.Type), state, fmt.Sprintf("%d/%d", r.Attempt, r.MaxAttempt), r.ErrorType, r.CreatedAt,
					preview(r.Key, r.KeyEncoding, r.KeyTruncated, 24), byteSize(r.ValueSize), r.valuePreview(40)}
			}
			if err := c.table([]string{"ID", "QUEUE", "TYPE", "STATE", "ATTEMPT", "ERROR TYPE", "CREATED", "KEY", "SIZE", "VALUE"}, rows); err != nil {
				return err
			}
			about, more := "", ""
			if page.Pagination.TotalCapped {
				more = "+"
			}
			if page.Pagination.TotalEstimated {
				about = "~"
			}
			fmt.Fprintf(c.errOut, "%d of %s%d%s records", len(page.Items), about, page.Pagination.Total, more)
			if page.Pagination.NextCursor != "" {
				fmt.Fprintf(c.errOut, "; next page: --cursor %s", page.Pagination.NextCursor)
			}
			fmt.Fprintln(c.errOut)
			return nil
		}),
	}
	f.register(cmd.Flags())
	cmd.Flags().IntVar(&limit, "limit", 50, "records per page (1-1000)")
	cmd.Flags().StringVar(&cursor, "cursor", "", "next_cursor of the previous page")
	return cmd
}

func dlqShowCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "get ID",
		Aliases: []string{"show"},
		Short:   "Show one whole record with its error history (JSON)",
		Args:    cobra.ExactArgs(1),
		RunE: cf.runE(func(cmd *cobra.Command, c *apiClient, args []string) error {
			raw, err := c.do(cmd.Context(), http.MethodGet, "/ojs/v1/dead-letter/"+url.PathEscape(args[0]), nil, nil)
			if err != nil {
				return err
			}
			return c.printJSON(raw) // a record is nested: JSON is its table
		}),
	}
}

func dlqRawCmd(cf *clientFlags) *cobra.Command {
	var part, file string
	cmd := &cobra.Command{
		Use:   "raw ID",
		Short: "Download a record's whole value (or key) as bytes, to stdout or a file",
		Long: `raw writes the record's value (or, with --part key, its key) exactly as it
was received, whatever its size or encoding, to stdout or to the file named by
--file. A null key or value (a tombstone) is an error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if part != "value" && part != "key" {
				return fmt.Errorf("--part: must be value or key, got %q", part)
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			out := c.out
			var f *os.File
			if file != "" && file != "-" {
				if f, err = os.Create(file); err != nil {
					return err
				}
				out = f
			}
			n, err := c.download(cmd.Context(), "/ojs/v1/dead-letter/"+url.PathEscape(args[0])+"/raw?part="+part, out)
			if f != nil {
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					_ = os.Remove(file)
				}
			}
			if err != nil {
				return err
			}
			if f != nil {
				fmt.Fprintf(c.errOut, "wrote %d bytes of the %s of %s to %s\n", n, part, args[0], file)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&part, "part", "value", "value or key")
	cmd.Flags().StringVarP(&file, "file", "f", "", "write to this file instead of stdout")
	return cmd
}

func dlqRetryCmd(cf *clientFlags) *cobra.Command {
	f := newDLQFilter(filter.Bulk)
	var all, yes, wait bool
	var rateLimit float64
	var canary canaryFlags
	var target, deliverTo, value, valueFile, valueEncoding, meta, retry string
	var headers []string
	cmd := &cobra.Command{
		Use:   "retry [ID]",
		Short: "Retry one record (with optional edits), or every record matching a filter with --all",
		Long: `retry ID redelivers one record at once, optionally to another topic (--target) or
to every consumer group rather than the one that failed it (--deliver-to topic),
with an edited value (--new-value or --new-value-file), extra headers, merged meta or a
retry policy. The original value stays recorded next to the edit.

retry --all [filters] shows how many records would be retried; add --yes to
start a background task (optionally --rate-limit records/s) and --wait to
follow its progress. --canary-sample N (or P%) and --canary-watch D make it a
canary: the task redelivers the sample first, watches it for D, and aborts
(leaving the rest alone) when --canary-abort-if-refail of it (default 0.1)
fails again the same way.`,
		Args: cobra.MaximumNArgs(1),
		RunE: cf.runE(func(cmd *cobra.Command, c *apiClient, args []string) error {
			if all == (len(args) == 1) {
				return errors.New("give a record ID, or --all with filters")
			}
			if all {
				body, err := f.body()
				if err != nil {
					return err
				}
				extra, err := canary.body(cmd)
				if err != nil {
					return err
				}
				if deliverTo != "" {
					if extra == nil {
						extra = map[string]any{}
					}
					extra["target"] = deliverTo
				}
				return bulk(cmd, c, http.MethodPost, "/ojs/v1/dead-letter/retry", body, yes, wait, rateLimit, "retry", extra)
			}
			override := map[string]any{}
			if target != "" {
				override["queue"] = target
			}
			if deliverTo != "" {
				override["target"] = deliverTo
			}
			editValue := cmd.Flags().Changed("new-value")
			if valueFile != "" {
				b, err := os.ReadFile(valueFile)
				if err != nil {
					return err
				}
				value, editValue = string(b), true
			}
			if editValue {
				override["value"] = value
				if valueEncoding != "" {
					override["value_encoding"] = valueEncoding
				}
			}
			var hs []map[string]string
			for _, h := range headers {
				k, v, ok := strings.Cut(h, "=")
				if !ok {
					return fmt.Errorf("--set-header %q: want key=value", h)
				}
				hs = append(hs, map[string]string{"key": k, "value": v})
			}
			if hs != nil {
				override["headers"] = hs
			}
			for name, s := range map[string]string{"meta": meta, "retry": retry} {
				if s != "" {
					var v any
					if err := json.Unmarshal([]byte(s), &v); err != nil {
						return fmt.Errorf("--%s: not JSON: %w", name, err)
					}
					override[name] = v
				}
			}
			var body any
			if len(override) > 0 {
				body = map[string]any{"override": override}
			}
			var rec recordRow
			raw, err := c.do(cmd.Context(), http.MethodPost, "/ojs/v1/dead-letter/"+url.PathEscape(args[0])+"/retry", body, &rec)
			if err != nil {
				return err
			}
			return c.printLine(raw, "retried %s (%s): state %s, attempt %d", rec.ID, rec.Queue, rec.State, rec.Attempt)
		}),
	}
	f.register(cmd.Flags())
	fl := cmd.Flags()
	fl.BoolVar(&all, "all", false, "retry every record matching the filter flags")
	fl.BoolVar(&yes, "yes", false, "with --all: really do it (without it, only count)")
	fl.BoolVar(&wait, "wait", false, "with --all --yes: follow the task with a progress bar")
	fl.Float64Var(&rateLimit, "rate-limit", 0, "with --all: records per second (0: unlimited)")
	canary.register(fl)
	fl.StringVar(&target, "target", "", "redeliver to this topic instead")
	fl.StringVar(&deliverTo, "deliver-to", "", "who the redelivery is for: group (only the consumer group that failed it) or topic (every group); default: the policy's redelivery.target")
	fl.StringVar(&value, "new-value", "", "redeliver this value instead (the original stays recorded)")
	fl.StringVar(&valueFile, "new-value-file", "", "redeliver this file's content as the value")
	fl.StringVar(&valueEncoding, "new-value-encoding", "", "encoding of the edited value: utf8 or base64")
	fl.StringArrayVar(&headers, "set-header", nil, "header key=value set on the redelivery (repeatable)")
	fl.StringVar(&meta, "meta", "", "JSON object merged into the record's meta")
	fl.StringVar(&retry, "retry", "", `JSON retry policy for the record, e.g. '{"max_attempts":1}'`)
	return cmd
}

func dlqPurgeCmd(cf *clientFlags) *cobra.Command {
	f := newDLQFilter(filter.Bulk)
	var yes, wait bool
	var rateLimit float64
	cmd := &cobra.Command{
		Use:   "purge [ID]",
		Short: "Delete one record, or every record matching the filter flags",
		Long: `purge ID deletes one record. purge [filters] shows how many records would be
deleted; add --yes to start a background task and --wait to follow it.`,
		Args: cobra.MaximumNArgs(1),
		RunE: cf.runE(func(cmd *cobra.Command, c *apiClient, args []string) error {
			if len(args) == 1 {
				raw, err := c.do(cmd.Context(), http.MethodDelete, "/ojs/v1/dead-letter/"+url.PathEscape(args[0]), nil, nil)
				if err != nil {
					return err
				}
				return c.printLine(raw, "deleted %s", args[0])
			}
			body, err := f.body()
			if err != nil {
				return err
			}
			return bulk(cmd, c, http.MethodDelete, "/ojs/v1/dead-letter", body, yes, wait, rateLimit, "delete", nil)
		}),
	}
	f.register(cmd.Flags())
	cmd.Flags().BoolVar(&yes, "yes", false, "really delete (without it, only count)")
	cmd.Flags().BoolVar(&wait, "wait", false, "with --yes: follow the task with a progress bar")
	cmd.Flags().Float64Var(&rateLimit, "rate-limit", 0, "records per second (0: unlimited)")
	return cmd
}

// bulk runs a bulk operation: a dry run, or a task (followed with --wait).
func bulk(cmd *cobra.Command, c *apiClient, method, path string, f json.RawMessage, yes, wait bool, rate float64, verb string,
	extra map[string]any) error {
	body := map[string]any{"filter": f, "confirm": yes}
	if rate > 0 {
		body["rate_limit"] = rate
	}
	maps.Copy(body, extra)
	var ans struct {
		DryRun      bool     `json:"dry_run"`
		WouldAffect int64    `json:"would_affect"`
		Task        taskView `json:"task"`
		Canary      *struct {
			SampleSize int64 `json:"sample_size"`
		} `json:"canary"`
	}
	raw, err := c.do(cmd.Context(), method, path, body, &ans)
	if err != nil {
		return err
	}
	if ans.DryRun {
		if ans.Canary != nil {
			return c.printLine(raw, "would %s %s, a canary of %s first; nothing changed (add --yes to %s them)", verb,
				count(ans.WouldAffect, "record"), count(ans.Canary.SampleSize, "record"), verb)
		}
		return c.printLine(raw, "would %s %s; nothing changed (add --yes to %s them)", verb, count(ans.WouldAffect, "record"), verb)
	}
	if !wait {
		return c.printLine(raw, "task %s started: %s %s (follow: redrive tasks show %s --wait)", ans.Task.ID, verb, count(ans.WouldAffect, "record"), ans.Task.ID)
	}
	return waitTask(cmd, c, ans.Task.ID)
}

func dlqStatsCmd(cf *clientFlags) *cobra.Command {
	var queue string
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Record counts by queue, error type and state; oldest and newest; retention",
		Args:  cobra.NoArgs,
		RunE: cf.runE(func(cmd *cobra.Command, c *apiClient, _ []string) error {
			path := "/ojs/v1/dead-letter/stats"
			if queue != "" {
				path += "?queue=" + url.QueryEscape(queue)
			}
			var st struct {
				Total       int64            `json:"total"`
				ByQueue     map[string]int64 `json:"by_queue"`
				ByErrorType map[string]int64 `json:"by_error_type"`
				ByState     map[string]int64 `json:"by_state"`
				OldestAt    *string          `json:"oldest_at"`
				NewestAt    *string          `json:"newest_at"`
				Retention   map[string]any   `json:"retention"`
			}
			raw, err := c.do(cmd.Context(), http.MethodGet, path, nil, &st)
			if err != nil {
				return err
			}
			if c.output == "json" {
				return c.printJSON(raw)
			}
			var rows [][]string
			add := func(group string, m map[string]int64) {
				for k, v := range m {
					rows = append(rows, []string{group, k, strconv.FormatInt(v, 10)})
				}
			}
			add("queue", st.ByQueue)
			add("error_type", st.ByErrorType)
			add("state", st.ByState)
			rows = append(rows, []string{"total", "", strconv.FormatInt(st.Total, 10)})
			if err := c.table([]string{"BY", "NAME", "RECORDS"}, rows); err != nil {
				return err
			}
			deref := func(s *string) string {
				if s == nil {
					return "-"
				}
				return *s
			}
			fmt.Fprintf(c.out, "oldest %s, newest %s; retention max_age %v, max_count %v\n",
				deref(st.OldestAt), deref(st.NewestAt), st.Retention["max_age"], st.Retention["max_count"])
			return nil
		}),
	}
	cmd.Flags().StringVar(&queue, "queue", "", "only this source topic")
	return cmd
}

// taskView is a task as the CLI reads it.
type taskView struct {
	ID        string  `json:"id"`
	Kind      string  `json:"kind"`
	State     string  `json:"state"`
	Total     int64   `json:"total"`
	Processed int64   `json:"processed"`
	Remaining int64   `json:"remaining"`
	Progress  float64 `json:"progress"`
	Skipped   struct {
		Count   int64            `json:"count"`
		Reasons map[string]int64 `json:"reasons"`
	} `json:"skipped"`
	RateLimit float64 `json:"rate_limit"`
	CreatedBy string  `json:"created_by"`
	CreatedAt string  `json:"created_at"`
	Errors    []struct {
		Message string `json:"message"`
	} `json:"errors"`
	Canary *canaryView `json:"canary"`
}

func (t taskView) finished() bool {
	return t.State == "completed" || t.State == "cancelled" || t.State == "failed" || t.State == "aborted"
}

// waitTask follows a task with a progress bar on stderr until it finishes.
func waitTask(cmd *cobra.Command, c *apiClient, id string) error {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		var t taskView
		raw, err := c.do(cmd.Context(), http.MethodGet, "/ojs/v1/tasks/"+url.PathEscape(id), nil, &t)
		if err != nil {
			return err
		}
		state := t.State
		if t.Canary != nil && (t.Canary.Phase == "sample" || t.Canary.Phase == "watch") && !t.finished() {
			state += ", canary " + t.Canary.summary()
		}
		fmt.Fprint(c.errOut, progressBar(t.Processed+t.Skipped.Count, t.Total, state))
		if t.finished() {
			fmt.Fprintln(c.errOut)
			if c.output == "json" {
				return c.printJSON(raw)
			}
			fmt.Fprintln(c.out, t.doneLine())
			if t.Canary != nil {
				fmt.Fprintf(c.out, "canary %s\n", t.Canary.summary())
			}
			switch t.State {
			case "failed":
				return fmt.Errorf("task %s failed: %d errors", t.ID, len(t.Errors))
			case "aborted":
				return fmt.Errorf("task %s aborted by its canary: %d of %d records of the sample failed again the same way",
					t.ID, t.Canary.Report.FailedSame, t.Canary.Report.Sample)
			}
			return nil
		}
		select {
		case <-cmd.Context().Done():
			fmt.Fprintln(c.errOut)
			return cmd.Context().Err()
		case <-tick.C:
		}
	}
}
