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
	return []string{t.ID, t.Kind, t.State, fmt.Sprintf("%d/%d (%.0f%%)", t.Processed, t.Total, t.Progress*100), rate, t.CreatedBy, t.CreatedAt, canary}
}

func listTasks(cmd *cobra.Command, c *apiClient, state string) error {
	path := "/ojs/v1/tasks"
	if state != "" {
		path += "?state=" + url.QueryEscape(state)
	}
	return getTable(cmd.Context(), c, path, taskHeader, taskRow)
}
