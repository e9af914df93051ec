package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"
)

func tasksCmd() *cobra.Command {
	var cf clientFlags
	var state string
	cmd := &cobra.Command{
		Use:   "tasks",
		Short: "List background bulk tasks (retry/purge by filter); show, follow or cancel one",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return listTasks(cmd, &cf, state) },
	}
	cf.register(cmd.PersistentFlags())
	cmd.Flags().StringVar(&state, "state", "", "only tasks in this state: pending, running, completed, cancelled, failed")
	list := &cobra.Command{
		Use:   "list",
		Short: "List tasks, newest first",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return listTasks(cmd, &cf, state) },
	}
	list.Flags().StringVar(&state, "state", "", "only tasks in this state")
	var wait bool
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show a task's progress; --wait follows it with a progress bar until it finishes",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			if wait {
				return waitTask(cmd, c, args[0])
			}
			var t taskView
			raw, err := c.do(cmd.Context(), http.MethodGet, "/ojs/v1/tasks/"+url.PathEscape(args[0]), nil, &t)
			if err != nil {
				return err
			}
			if c.output == "json" {
				return c.printJSON(raw)
			}
			return c.table(taskHeader, [][]string{taskRow(t)})
		},
	}
	show.Flags().BoolVar(&wait, "wait", false, "follow the task until it finishes")
	cancel := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a task; a running one stops after its current batch",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			var t taskView
			raw, err := c.do(cmd.Context(), http.MethodPost, "/ojs/v1/tasks/"+url.PathEscape(args[0])+"/cancel", nil, &t)
			if err != nil {
				return err
			}
			if c.output == "json" {
				return c.printJSON(raw)
			}
			fmt.Fprintf(c.out, "task %s: cancellation requested (%d of %s done)\n", t.ID, t.Processed, count(t.Total, "record"))
			return nil
		},
	}
	cmd.AddCommand(list, show, cancel)
	return cmd
}

var taskHeader = []string{"ID", "KIND", "STATE", "PROGRESS", "RATE", "BY", "CREATED"}

func taskRow(t taskView) []string {
	rate := "unlimited"
	if t.RateLimit > 0 {
		rate = strconv.FormatFloat(t.RateLimit, 'f', -1, 64) + "/s"
	}
	return []string{t.ID, t.Kind, t.State, fmt.Sprintf("%d/%d (%.0f%%)", t.Processed, t.Total, t.Progress*100), rate, t.CreatedBy, t.CreatedAt}
}

func listTasks(cmd *cobra.Command, cf *clientFlags, state string) error {
	c, err := cf.client(cmd)
	if err != nil {
		return err
	}
	path := "/ojs/v1/tasks"
	if state != "" {
		path += "?state=" + url.QueryEscape(state)
	}
	var page struct {
		Items []taskView `json:"items"`
	}
	raw, err := c.do(cmd.Context(), http.MethodGet, path, nil, &page)
	if err != nil {
		return err
	}
	if c.output == "json" {
		return c.printJSON(raw)
	}
	rows := make([][]string, len(page.Items))
	for i, t := range page.Items {
		rows[i] = taskRow(t)
	}
	return c.table(taskHeader, rows)
}
