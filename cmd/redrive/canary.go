package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// canaryFlags are a bulk retry's canary flags.
type canaryFlags struct {
	sample, watch string
	abort         float64
}

func (f *canaryFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.sample, "canary-sample", "", `with --all: redeliver this many records first (a number, or a percentage such as "5%")`)
	fs.StringVar(&f.watch, "canary-watch", "", "with --canary-sample: watch the sample this long once redelivered (ISO 8601, e.g. PT10M)")
	fs.Float64Var(&f.abort, "canary-abort-if-refail", 0.1, "with --canary-sample: abort when this share of the sample (0 to 1) fails again the same way")
}

// canary is the canary object the flags describe; nil without --canary-sample.
func (f *canaryFlags) canary(cmd *cobra.Command, prefix string) (map[string]any, error) {
	if f.sample == "" {
		for _, name := range []string{prefix + "watch", prefix + "abort-if-refail"} {
			if fl := cmd.Flags().Lookup(name); fl != nil && fl.Changed {
				return nil, fmt.Errorf("--%s: needs --%ssample", name, prefix)
			}
		}
		return nil, nil
	}
	c := map[string]any{"abort_if_refail": f.abort}
	// A count is sent as a JSON number, anything else as given: the API
	// says what it expects.
	if n, err := strconv.ParseInt(f.sample, 10, 64); err == nil {
		c["sample"] = n
	} else {
		c["sample"] = f.sample
	}
	if f.watch != "" {
		c["watch"] = f.watch
	}
	return c, nil
}

// body is the extra members of a bulk retry's body: its canary, if any.
func (f *canaryFlags) body(cmd *cobra.Command) (map[string]any, error) {
	c, err := f.canary(cmd, "canary-")
	if c == nil || err != nil {
		return nil, err
	}
	return map[string]any{"canary": c}, nil
}

// canaryView is a task's canary as the CLI shows it.
type canaryView struct {
	SampleSize int64   `json:"sample_size"`
	Watch      string  `json:"watch"`
	Abort      float64 `json:"abort_if_refail"`
	Phase      string  `json:"phase"`
	Sampled    int64   `json:"sampled"`
	WatchUntil *string `json:"watch_until"`
	Report     struct {
		Sample          int64 `json:"sample"`
		Delivered       int64 `json:"delivered"`
		Completed       int64 `json:"completed"`
		FailedSame      int64 `json:"failed_same"`
		FailedDifferent int64 `json:"failed_different"`
		Pending         int64 `json:"pending"`
		Deleted         int64 `json:"deleted"`
	} `json:"report"`
}

// summary is the canary in a few words: its phase and the sample's outcomes.
func (c *canaryView) summary() string {
	r := c.Report
	switch c.Phase {
	case "sample":
		if c.Sampled < c.SampleSize && r.Delivered == 0 {
			return fmt.Sprintf("sampling %d/%d", c.Sampled, c.SampleSize)
		}
		return fmt.Sprintf("delivering %d/%d", r.Delivered, r.Sample)
	case "watch":
		until := ""
		if c.WatchUntil != nil {
			until = " until " + *c.WatchUntil
		}
		return fmt.Sprintf("watching%s: %s", until, c.outcomes())
	}
	return c.Phase + ": " + c.outcomes()
}

func (c *canaryView) outcomes() string {
	r := c.Report
	parts := []string{fmt.Sprintf("%d completed", r.Completed), fmt.Sprintf("%d failed the same way", r.FailedSame),
		fmt.Sprintf("%d differently", r.FailedDifferent), fmt.Sprintf("%d pending", r.Pending)}
	if r.Deleted > 0 {
		parts = append(parts, fmt.Sprintf("%d deleted", r.Deleted))
	}
	return fmt.Sprintf("%s of %d", strings.Join(parts, ", "), r.Sample)
}

// quietCmd is `redrive incidents redrive-when-quiet ID`.
func quietCmd(cf *clientFlags) *cobra.Command {
	var quiet string
	var rate float64
	var withdraw bool
	var canary canaryFlags
	cmd := &cobra.Command{
		Use:   "redrive-when-quiet ID --quiet PT15M",
		Short: "Mark an incident resolved: retry it with a canary once no failure of it has arrived for --quiet",
		Long: `redrive-when-quiet marks an incident resolved (a fix is deployed). Once no failure
of it has arrived for --quiet (counted from now, or from its latest failure if
one arrives later), Redrive retries its records with a canary, in your name:
--sample records first (default 100), watched --watch (default PT10M), the rest
only if less than --abort-if-refail of them (default 0.1) failed again the same
way. --withdraw takes the request back while it waits.`,
		Args: cobra.ExactArgs(1),
		RunE: cf.runE(func(cmd *cobra.Command, c *apiClient, args []string) error {
			path := "/ojs/v1/incidents/" + url.PathEscape(args[0]) + "/redrive-when-quiet"
			if withdraw {
				raw, err := c.do(cmd.Context(), http.MethodDelete, path, nil, nil)
				if err != nil {
					return err
				}
				return c.printLine(raw, "incident %s: redrive-when-quiet withdrawn", args[0])
			}
			if quiet == "" {
				return errors.New("--quiet: required (an ISO 8601 duration such as PT15M), or --withdraw")
			}
			body := map[string]any{"quiet": quiet}
			if rate > 0 {
				body["rate_limit"] = rate
			}
			cn, err := canary.canary(cmd, "")
			if err != nil {
				return err
			}
			if cn != nil {
				body["canary"] = cn
			}
			var q quietView
			raw, err := c.do(cmd.Context(), http.MethodPost, path, body, &q)
			if err != nil {
				return err
			}
			return c.printLine(raw, "incident %s: %s", args[0], q.summary())
		}),
	}
	fs := cmd.Flags()
	fs.StringVar(&quiet, "quiet", "", "how long no failure of the incident may arrive before its retry starts (ISO 8601, PT1M to P7D)")
	fs.StringVar(&canary.sample, "sample", "", `the canary's sample: a number of records or a percentage such as "5%" (default 100)`)
	fs.StringVar(&canary.watch, "watch", "", "how long the sample is watched once redelivered (ISO 8601, default PT10M)")
	fs.Float64Var(&canary.abort, "abort-if-refail", 0.1, "abort when this share of the sample (0 to 1) fails again the same way")
	fs.Float64Var(&rate, "rate-limit", 0, "the retry's records per second (0: unlimited)")
	fs.BoolVar(&withdraw, "withdraw", false, "withdraw the request while it waits")
	return cmd
}

// quietView is an incident's redrive-when-quiet request.
type quietView struct {
	State       string  `json:"state"`
	Quiet       string  `json:"quiet"`
	RequestedBy string  `json:"requested_by"`
	QuietUntil  string  `json:"quiet_until"`
	TaskID      *string `json:"task_id"`
	Canary      struct {
		Sample     json.RawMessage `json:"sample"`
		Watch      string          `json:"watch"`
		Abort      float64         `json:"abort_if_refail"`
		SampleSize int64           `json:"sample_size"`
	} `json:"canary"`
}

func (q *quietView) summary() string {
	if q.State == "started" && q.TaskID != nil {
		return fmt.Sprintf("quiet for %s; canary retry started as task %s (by %s)", q.Quiet, *q.TaskID, q.RequestedBy)
	}
	return fmt.Sprintf("redrive when quiet for %s (by %s): a canary retry (sample %s, watch %s, abort at %v) starts at %s unless a failure arrives before",
		q.Quiet, q.RequestedBy, q.Canary.Sample, q.Canary.Watch, q.Canary.Abort, q.QuietUntil)
}
