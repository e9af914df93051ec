package main

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

func tasksCmd() *cobra.Command {
	var cf clientFlags
	var state string
	cmd := &cobra.Command{
		Use:   "tasks",
		Short: "List background bulk tasks (retry/purge by filter); show, follow or cancel one",
		Args:  cobra.NoArgs,
		RunE:  cf.runE(func(cmd *cobra.Command, c *apiClient, _ []string) error { return listTasks(cmd, c, state) }),
	}
	cf.register(cmd.PersistentFlags())
	cmd.Flags().StringVar(&state, "state", "", "only tasks in this state: pending, running, completed, cancelled, failed, aborted")
	list := &cobra.Command{
		Use:   "list",
		Short: "List tasks, newest first",
		Args:  cobra.NoArgs,
		RunE:  cf.runE(func(cmd *cobra.Command, c *apiClient, _ []string) error { return listTasks(cmd, c, state) }),
	}
	list.Flags().StringVar(&state, "state", "", "only tasks in this state")
	var wait bool
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show a task's progress; --wait follows it with a progress bar until it finishes",
		Args:  cobra.ExactArgs(1),
		RunE: cf.runE(func(cmd *cobra.Command, c *apiClient, args []string) error {
			if wait {
				return waitTask(cmd, c, args[0])
			}
			return getRow(cmd.Context(), c, "/ojs/v1/tasks/"+url.PathEscape(args[0]), taskHeader, taskRow)
		}),
	}
	show.Flags().BoolVar(&wait, "wait", false, "follow the task until it finishes")
	cancel := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a task; a running one stops after its current batch",
		Args:  cobra.ExactArgs(1),
		RunE: cf.runE(func(cmd *cobra.Command, c *apiClient, args []string) error {
			var t taskView
			raw, err := c.do(cmd.Context(), http.MethodPost, "/ojs/v1/tasks/"+url.PathEscape(args[0])+"/cancel", nil, &t)
			if err != nil {
				return err
			}
			return c.printLine(raw, "task %s: cancellation requested (%d of %s done)", t.ID, t.Processed, count(t.Total, "record"))
		}),
	}
	cmd.AddCommand(list, show, cancel)
	return cmd
}

var taskHeader = []string{"ID", "KIND", "STATE", "PROGRESS", "RATE", "BY", "CREATED", "CANARY"}

func taskRow(t taskView) []string {
	rate := "unlimited"
	if t.RateLimit > 0 {
		rate = strconv.FormatFloat(t.RateLimit, 'f', -1, 64) + "/s"
	}
	canary := "-"
	if t.Canary != nil {
		canary = t.Canary.summary()
	}
	progress := fmt.Sprintf("%d/%d", t.Processed, t.Total)
	if t.Skipped.Count > 0 {
		progress += fmt.Sprintf(", %d skipped", t.Skipped.Count)
	}
	return []string{t.ID, t.Kind, t.State, fmt.Sprintf("%s (%.0f%%)", progress, t.Progress*100), rate, t.CreatedBy, t.CreatedAt, canary}
}

// skipReasons says why a task skipped records, in the order they are listed.
var skipReasons = []struct{ key, text string }{
	{"no_longer_matches", "no longer matched the filter: retried, changed or deleted since the task was created"},
	{"in_flight", "were being redelivered when the task got to them"},
	{"patch", "failed the patch or, patched, their schema"},
}

// doneLine is what a finished task did: "P of N records", and what it
// skipped, by reason, and left when it ended early, so that the numbers add
// up to its total.
func (t taskView) doneLine() string {
	return fmt.Sprintf("task %s %s: %d of %s%s", t.ID, t.State, t.Processed, count(t.Total, "record"), t.accounts())
}

// accounts is the rest of a finished task's count after "P of N records"
// ("" when it processed every record).
func (t taskView) accounts() string {
	var s string
	if t.Skipped.Count > 0 {
		s = fmt.Sprintf(" processed, %d skipped", t.Skipped.Count)
		var why []string
		for _, r := range skipReasons {
			if n := t.Skipped.Reasons[r.key]; n > 0 {
				why = append(why, fmt.Sprintf("%d %s", n, r.text))
			}
		}
		for _, k := range slices.Sorted(maps.Keys(t.Skipped.Reasons)) { // a newer server's reasons, as named
			if n := t.Skipped.Reasons[k]; n > 0 && !slices.ContainsFunc(skipReasons, func(r struct{ key, text string }) bool { return r.key == k }) {
				why = append(why, fmt.Sprintf("%d %s", n, k))
			}
		}
		if len(why) > 0 {
			s += " (" + strings.Join(why, "; ") + ")"
		}
	}
	if t.Remaining > 0 {
		if s == "" {
			s = " processed"
		}
		s += fmt.Sprintf(", %d left as they were (%s before the task got to them)", t.Remaining, t.State)
	}
	return s
}

func listTasks(cmd *cobra.Command, c *apiClient, state string) error {
	path := "/ojs/v1/tasks"
	if state != "" {
		path += "?state=" + url.QueryEscape(state)
	}
	return getTable(cmd.Context(), c, path, taskHeader, taskRow)
}
