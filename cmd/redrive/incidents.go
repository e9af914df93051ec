package main

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

func incidentsCmd() *cobra.Command {
	var cf clientFlags
	var queue, state, since, sort string
	var limit int
	cmd := &cobra.Command{
		Use:   "incidents",
		Short: "List incidents: failures grouped by error fingerprint, with their live records",
		Long: `incidents lists what is broken: each incident is one error fingerprint (the
error type and its message with ids, numbers, hosts and times taken out), with
how many stored records have it, in which queues and states. Retry or purge an
incident's records with: redrive dlq retry --incident ID (dry run first).`,
		Args: cobra.NoArgs,
		RunE: cf.runE(func(cmd *cobra.Command, c *apiClient, _ []string) error {
			q := url.Values{}
			for k, v := range map[string]string{"queue": queue, "state": state, "since": since, "sort": sort} {
				if v != "" {
					q.Set(k, v)
				}
			}
			if limit > 0 {
				q.Set("limit", fmt.Sprint(limit))
			}
			path := "/ojs/v1/incidents"
			if len(q) > 0 {
				path += "?" + q.Encode()
			}
			return getTable(cmd.Context(), c, path, incidentHeader, incidentRow)
		}),
	}
	cf.register(cmd.PersistentFlags())
	cmd.Flags().StringVar(&queue, "queue", "", "only records of this queue")
	cmd.Flags().StringVar(&state, "state", "", "only records in this state: retryable, available, completed, discarded")
	cmd.Flags().StringVar(&since, "since", "", "only incidents last seen at or after this time (RFC 3339)")
	cmd.Flags().StringVar(&sort, "sort", "count", "count (most records first) or last_seen (newest first)")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many incidents (default 50)")
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show one incident",
		Args:  cobra.ExactArgs(1),
		RunE: cf.runE(func(cmd *cobra.Command, c *apiClient, args []string) error {
			var in incidentView
			raw, err := c.do(cmd.Context(), http.MethodGet, "/ojs/v1/incidents/"+url.PathEscape(args[0]), nil, &in)
			if err != nil {
				return err
			}
			if err := c.printTable(raw, incidentHeader, [][]string{incidentRow(in)}); err != nil || c.output == "json" {
				return err
			}
			if q := in.RedriveWhenQuiet; q != nil {
				fmt.Fprintln(c.out, q.summary())
			}
			return nil
		}),
	}
	cmd.AddCommand(show, quietCmd(&cf))
	return cmd
}

type incidentView struct {
	ID        string           `json:"id"`
	ErrorType string           `json:"error_type"`
	Signature string           `json:"signature"`
	Count     int64            `json:"count"`
	Queues    []string         `json:"queues"`
	States    map[string]int64 `json:"states"`
	LastSeen  string           `json:"last_seen"`
	// RedriveWhenQuiet is its request (GET of one incident only).
	RedriveWhenQuiet *quietView `json:"redrive_when_quiet"`
}

var incidentHeader = []string{"ID", "RECORDS", "ERROR TYPE", "SIGNATURE", "QUEUES", "STATES", "LAST SEEN"}

func incidentRow(in incidentView) []string {
	states := make([]string, 0, len(in.States))
	for _, s := range slices.Sorted(maps.Keys(in.States)) {
		states = append(states, fmt.Sprintf("%s=%d", s, in.States[s]))
	}
	sig := in.Signature
	if len(sig) > 60 {
		sig = sig[:57] + "..."
	}
	return []string{in.ID, fmt.Sprint(in.Count), in.ErrorType, sig, strings.Join(in.Queues, ","), strings.Join(states, " "), in.LastSeen}
}
