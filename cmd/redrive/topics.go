package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"

	"github.com/spf13/cobra"
)

func topicsCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "topics",
		Short: "List topics (OJS queues) with live stats; show, configure, pause, resume or drain one",
		Args:  cobra.NoArgs,
		RunE:  cf.runE(func(cmd *cobra.Command, c *apiClient, _ []string) error { return listTopics(cmd, c) }),
	}
	cf.register(cmd.PersistentFlags())
	list := &cobra.Command{Use: "list", Short: "List topics", Args: cobra.NoArgs,
		RunE: cf.runE(func(cmd *cobra.Command, c *apiClient, _ []string) error { return listTopics(cmd, c) })}
	show := &cobra.Command{
		Use:   "show NAME",
		Short: "Show a topic's state, stats, and every field of its effective config with the layer it comes from",
		Args:  cobra.ExactArgs(1),
		RunE: cf.runE(func(cmd *cobra.Command, c *apiClient, args []string) error {
			return showTopic(cmd, c, args[0])
		}),
	}
	var file string
	set := &cobra.Command{
		Use:   "set NAME --file CONFIG.json",
		Short: "Replace a topic's API config (a partial policy in JSON, as in policies/*.yaml); _default for the default",
		Args:  cobra.ExactArgs(1),
		RunE: cf.runE(func(cmd *cobra.Command, c *apiClient, args []string) error {
			data, err := os.ReadFile(file)
			if err != nil {
				return err
			}
			var body any
			if err := json.Unmarshal(data, &body); err != nil {
				return fmt.Errorf("--file %s: not JSON: %w", file, err)
			}
			raw, err := c.do(cmd.Context(), http.MethodPut, "/ojs/v1/queues/"+url.PathEscape(args[0])+"/config", body, nil)
			if err != nil {
				return err
			}
			return c.printJSON(raw)
		}),
	}
	set.Flags().StringVar(&file, "file", "", "JSON file with the config (required)")
	_ = set.MarkFlagRequired("file")
	cmd.AddCommand(list, show, set, topicStateCmd(&cf, "pause", "Pause redelivery (failures are still stored)"),
		topicStateCmd(&cf, "resume", "Resume redelivery"), topicStateCmd(&cf, "drain", "Drain: scheduled retries go out, no new replays"))
	return cmd
}

func topicStateCmd(cf *clientFlags, verb, short string) *cobra.Command {
	return &cobra.Command{
		Use:   verb + " NAME",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: cf.runE(func(cmd *cobra.Command, c *apiClient, args []string) error {
			var q topicView
			raw, err := c.do(cmd.Context(), http.MethodPost, "/ojs/v1/queues/"+url.PathEscape(args[0])+"/"+verb, nil, &q)
			if err != nil {
				return err
			}
			return c.printLine(raw, "topic %s is %s", q.Name, q.State)
		}),
	}
}

type topicView struct {
	Name       string           `json:"name"`
	State      string           `json:"state"`
	Source     string           `json:"source"`
	DeclaredIn *string          `json:"declared_in"`
	Stats      map[string]int64 `json:"stats"`
	Delivery   struct {
		State          string  `json:"state"`
		BlockedRecords int64   `json:"blocked_records"`
		Reason         *string `json:"reason"`
	} `json:"delivery"`
}

// delivery shows a topic's redelivery health: ok, or blocked with how many
// records and the latest reason.
func (q *topicView) delivery() string {
	d := q.Delivery
	if d.State != "blocked" {
		return orDash(d.State)
	}
	reason := ""
	if d.Reason != nil {
		reason = ", " + *d.Reason
	}
	return fmt.Sprintf("blocked (%d%s)", d.BlockedRecords, reason)
}

// topicsPage is how many topics listTopics asks for at a time (the API's
// largest page).
const topicsPage = 1000

// listTopics lists every topic, following the API's pages by name.
func listTopics(cmd *cobra.Command, c *apiClient) error {
	var all []json.RawMessage
	cursor := ""
	for {
		q := url.Values{"limit": {strconv.Itoa(topicsPage)}, "sort": {"name"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Items      []json.RawMessage `json:"items"`
			Pagination struct {
				HasMore    bool   `json:"has_more"`
				NextCursor string `json:"next_cursor"`
			} `json:"pagination"`
		}
		if _, err := c.do(cmd.Context(), http.MethodGet, "/ojs/v1/queues?"+q.Encode(), nil, &page); err != nil {
			return err
		}
		all = append(all, page.Items...)
		if !page.Pagination.HasMore || page.Pagination.NextCursor == "" {
			break
		}
		cursor = page.Pagination.NextCursor
	}
	if all == nil {
		all = []json.RawMessage{}
	}
	if c.output == "json" {
		// One list of every topic, shaped as a single page of the API.
		raw, err := json.Marshal(map[string]any{"items": all,
			"pagination": map[string]any{"total": len(all), "limit": len(all), "has_more": false}})
		if err != nil {
			return err
		}
		return c.printJSON(raw)
	}
	rows := make([][]string, len(all))
	for i, raw := range all {
		var q topicView
		if err := json.Unmarshal(raw, &q); err != nil {
			return fmt.Errorf("decode topic: %w", err)
		}
		src := q.Source
		if q.DeclaredIn != nil {
			src += " (" + *q.DeclaredIn + ")"
		}
		n := func(k string) string { return strconv.FormatInt(q.Stats[k], 10) }
		rows[i] = []string{q.Name, q.State, src, n("retryable"), n("available"), n("dead_letter"), n("discard"), n("completed"), q.delivery()}
	}
	return c.table([]string{"TOPIC", "STATE", "CONFIG", "RETRYABLE", "AVAILABLE", "DEAD LETTERS", "DISCARDS", "COMPLETED", "DELIVERY"}, rows)
}

// topicConfigView is GET /queues/{name}/config.
type topicConfigView struct {
	Config     json.RawMessage `json:"config"`
	DeclaredIn *string         `json:"declared_in"`
	Sources    map[string]struct {
		Layer string `json:"layer"`
		File  string `json:"file"`
		Entry string `json:"entry"`
	} `json:"sources"`
}

// showTopic prints a topic (the default layer for _default): its state,
// where its config comes from and its counts, then every field of its
// effective config with its value and the layer it comes from. With -o
// json, the topic's JSON with the config's sources added.
func showTopic(cmd *cobra.Command, c *apiClient, name string) error {
	base := "/ojs/v1/queues/" + url.PathEscape(name)
	raw, err := c.do(cmd.Context(), http.MethodGet, base, nil, nil)
	if err != nil {
		return err
	}
	var cfg topicConfigView
	cfgRaw, err := c.do(cmd.Context(), http.MethodGet, base+"/config", nil, &cfg)
	if err != nil {
		return err
	}
	if c.output == "json" {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("decode topic: %w", err)
		}
		var cm map[string]json.RawMessage
		if err := json.Unmarshal(cfgRaw, &cm); err != nil {
			return fmt.Errorf("decode topic config: %w", err)
		}
		m["sources"] = cm["sources"]
		out, err := json.Marshal(m)
		if err != nil {
			return err
		}
		return c.printJSON(out)
	}
	var q topicView
	if err := json.Unmarshal(raw, &q); err != nil {
		return fmt.Errorf("decode topic: %w", err)
	}
	src := q.Source
	if q.DeclaredIn != nil {
		src += " (" + *q.DeclaredIn + ")"
	}
	n := func(k string) int64 { return q.Stats[k] }
	fmt.Fprintf(c.out, "topic     %s\nstate     %s\nconfig    %s\nrecords   %d waiting (%d retryable, %d available), %d dead letters, %d discards, %d cancelled, %d completed\ndelivery  %s\n\n",
		q.Name, q.State, src, n("depth"), n("retryable"), n("available"), n("dead_letter"), n("discard"), n("cancelled"), n("completed"), q.delivery())
	values := map[string]string{}
	flattenJSON("", cfg.Config, values)
	rows := make([][]string, 0, len(values))
	for _, p := range slices.Sorted(maps.Keys(values)) {
		s, ok := cfg.Sources[p]
		from := "-"
		if ok {
			from = s.Layer
			switch {
			case s.File != "":
				from += " " + s.File + " (" + s.Entry + ")"
			case s.Entry != "":
				from += " (" + s.Entry + ")"
			}
		}
		rows = append(rows, []string{p, values[p], from})
	}
	return c.table([]string{"FIELD", "VALUE", "SOURCE"}, rows)
}

// flattenJSON puts the leaves of a JSON object into out by dotted path:
// strings as they are, lists and other values as compact JSON.
func flattenJSON(prefix string, raw json.RawMessage, out map[string]string) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return
	}
	{
		for k, v := range m {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			var sub map[string]json.RawMessage
			if json.Unmarshal(v, &sub) == nil && sub != nil {
				flattenJSON(p, v, out)
				continue
			}
			var str string
			if json.Unmarshal(v, &str) == nil {
				out[p] = str
				continue
			}
			var b bytes.Buffer
			if json.Compact(&b, v) != nil {
				out[p] = string(v)
				continue
			}
			out[p] = b.String()
		}
	}
}
