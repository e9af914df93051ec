package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"
)

// workersCmd is `redrive workers list|show|quiet|terminate|deregister`: the
// worker registry of the admin API (docs/api.md#worker-lifecycle).
func workersCmd() *cobra.Command {
	var cf clientFlags
	var state, queue string
	var page, perPage int
	listPath := func() string {
		q := url.Values{}
		for k, v := range map[string]string{"state": state, "queue": queue} {
			if v != "" {
				q.Set(k, v)
			}
		}
		if page > 0 {
			q.Set("page", fmt.Sprint(page))
		}
		if perPage > 0 {
			q.Set("per_page", fmt.Sprint(perPage))
		}
		path := "/ojs/v1/admin/workers"
		if len(q) > 0 {
			path += "?" + q.Encode()
		}
		return path
	}
	list := func(cmd *cobra.Command, c *apiClient, _ []string) error {
		var l workerListView
		raw, err := c.do(cmd.Context(), http.MethodGet, listPath(), nil, &l)
		if err != nil {
			return err
		}
		rows := make([][]string, len(l.Items))
		for i, w := range l.Items {
			rows[i] = workerRow(w)
		}
		if err := c.printTable(raw, workerHeader, rows); err != nil || c.output == "json" {
			return err
		}
		s := l.Summary
		fmt.Fprintf(c.out, "%s: %d running, %d quiet, %d terminating, %d stale\n", count(s.Total, "worker"), s.Running, s.Quiet, s.Terminate, s.Stale)
		return nil
	}
	cmd := &cobra.Command{
		Use:   "workers",
		Short: "List the workers that heartbeat or fetch over HTTP; quiet, terminate or deregister one",
		Long: `workers lists the workers the server knows from their heartbeats and fetches:
their state (running, quiet, terminate, or stale when not seen for 30 s), what
they report about themselves, and how many jobs each holds. quiet and terminate
tell a worker what its next heartbeat answers (stop fetching; shut down);
deregister forgets a stale worker and releases the jobs it held.`,
		Args: cobra.NoArgs,
		RunE: cf.runE(list),
	}
	cf.register(cmd.PersistentFlags())
	listCmd := &cobra.Command{Use: "list", Short: "List the workers", Args: cobra.NoArgs, RunE: cf.runE(list)}
	for _, c := range []*cobra.Command{cmd, listCmd} {
		c.Flags().StringVar(&state, "state", "", "only workers in this state: running, quiet, terminate, stale")
		c.Flags().StringVar(&queue, "queue", "", "only workers that name this queue")
		c.Flags().IntVar(&page, "page", 0, "page number, from 1")
		c.Flags().IntVar(&perPage, "per-page", 0, "workers per page, 1 to 100 (default 20)")
	}
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show one worker and the jobs it holds",
		Args:  cobra.ExactArgs(1),
		RunE: cf.runE(func(cmd *cobra.Command, c *apiClient, args []string) error {
			var w workerView
			raw, err := c.do(cmd.Context(), http.MethodGet, "/ojs/v1/admin/workers/"+url.PathEscape(args[0]), nil, &w)
			if err != nil {
				return err
			}
			if err := c.printTable(raw, workerHeader, [][]string{workerRow(w)}); err != nil || c.output == "json" {
				return err
			}
			for _, l := range w.Leases {
				fmt.Fprintf(c.out, "holds job %s of %s until %s\n", l.JobID, l.Queue, l.ExpiresAt)
			}
			return nil
		}),
	}
	direct := func(verb, short, done string) *cobra.Command {
		return &cobra.Command{
			Use:   verb + " ID",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: cf.runE(func(cmd *cobra.Command, c *apiClient, args []string) error {
				var w workerView
				raw, err := c.do(cmd.Context(), http.MethodPost, "/ojs/v1/admin/workers/"+url.PathEscape(args[0])+"/"+verb, nil, &w)
				if err != nil {
					return err
				}
				return c.printLine(raw, "worker %s: %s (state %s, %s)", w.ID, done, w.State, count(w.ActiveJobs, "job")+" held")
			}),
		}
	}
	deregister := &cobra.Command{
		Use:   "deregister ID",
		Short: "Forget a stale worker and release the jobs it held (each counts as an expired lease)",
		Args:  cobra.ExactArgs(1),
		RunE: cf.runE(func(cmd *cobra.Command, c *apiClient, args []string) error {
			var out struct {
				ID       string   `json:"id"`
				Released []string `json:"released_job_ids"`
			}
			raw, err := c.do(cmd.Context(), http.MethodDelete, "/ojs/v1/admin/workers/"+url.PathEscape(args[0]), nil, &out)
			if err != nil {
				return err
			}
			return c.printLine(raw, "worker %s deregistered; %s released", out.ID, count(len(out.Released), "job"))
		}),
	}
	cmd.AddCommand(listCmd, show,
		direct("quiet", "Tell a worker to stop fetching and finish its jobs (its next heartbeat answers quiet)", "told to quiet"),
		direct("terminate", "Tell a worker to shut down (its next heartbeat answers terminate)", "told to terminate"),
		deregister)
	return cmd
}

// workerView is a worker as GET /ojs/v1/admin/workers shows it.
type workerView struct {
	ID         string   `json:"id"`
	Hostname   *string  `json:"hostname"`
	State      string   `json:"state"`
	Directive  string   `json:"directive"`
	Queues     []string `json:"queues"`
	ActiveJobs int      `json:"active_jobs"`
	LastSeenAt string   `json:"last_seen_at"`
	Leases     []struct {
		JobID     string `json:"job_id"`
		Queue     string `json:"queue"`
		ExpiresAt string `json:"expires_at"`
	} `json:"leases"`
}

type workerListView struct {
	Items   []workerView `json:"items"`
	Summary struct {
		Total     int `json:"total"`
		Running   int `json:"running"`
		Quiet     int `json:"quiet"`
		Terminate int `json:"terminate"`
		Stale     int `json:"stale"`
	} `json:"summary"`
}

var workerHeader = []string{"ID", "HOST", "STATE", "DIRECTIVE", "QUEUES", "JOBS", "LAST SEEN"}

func workerRow(w workerView) []string {
	host := ""
	if w.Hostname != nil {
		host = *w.Hostname
	}
	return []string{w.ID, orDash(host), w.State, w.Directive, orDash(strings.Join(w.Queues, ",")), fmt.Sprint(w.ActiveJobs), w.LastSeenAt}
}
