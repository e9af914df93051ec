package httpapi

import (
	"maps"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/auth"
	"github.com/redrive/redrive/internal/records"
)

// The OJS admin API (admin spec, urn:ojs:ext:admin-api; docs/api.md#admin):
// aggregate statistics, queues with their jobs counted by OJS state, the
// job list and a job's envelope, and a bulk retry. Every count is read from
// the statistics table and the lifecycle's small indexes
// (store/admin.go says how Redrive's states map onto the OJS ones), and
// narrowed to the queues the caller's roles read.

// adminRoutes are the OJS admin API's own routes (admin spec §5), under
// BasePath+AdminPath; the routes it shares with the rest of the API are
// adminAliased. GET /queues/{name}/stats (HTTP binding §11.2) is here too:
// it reads the same counts.
func (s *Server) adminRoutes() []route {
	started := s.cfg.Now() // the server's start, for uptime_seconds
	return []route{
		{method: http.MethodGet, path: AdminPath + "/stats", handler: func(c echo.Context) error { return s.adminStats(c, started) },
			perm: needSome(auth.ActionRead)},
		{method: http.MethodGet, path: AdminPath + "/queues", handler: s.adminQueues, perm: needSome(auth.ActionRead)},
		{method: http.MethodGet, path: AdminPath + "/queues/:name", handler: s.adminQueue, perm: needParam(auth.ActionRead, "name")},
		{method: http.MethodGet, path: AdminPath + "/jobs", handler: s.adminJobs, perm: needSome(auth.ActionRead)},
		{method: http.MethodGet, path: AdminPath + "/jobs/:id", handler: s.adminJob, perm: needSome(auth.ActionRead)},
		// Audited as the bulk retry it runs (POST /dead-letter/retry).
		{method: http.MethodPost, path: AdminPath + "/jobs/bulk/retry", handler: s.adminBulkRetry, action: "dead_letter.bulk_retry",
			perm: needSome(auth.ActionRetry)},
		{method: http.MethodGet, path: "/queues/:name/stats", handler: s.queueStats, perm: needParam(auth.ActionRead, "name")},
	}
}

// throughputWindow is the window the admin stats' rates are counted over.
const throughputWindow = 5 * time.Minute

// jobCountsJSON are jobs counted by OJS state (admin spec §6.1, §10.1).
type jobCountsJSON struct {
	Available int64 `json:"available"`
	Active    int64 `json:"active"`
	Scheduled int64 `json:"scheduled"`
	Retryable int64 `json:"retryable"`
	Completed int64 `json:"completed"`
	Discarded int64 `json:"discarded"`
	Cancelled int64 `json:"cancelled"`
}

func toJobCountsJSON(c records.JobCounts) jobCountsJSON {
	return jobCountsJSON{Available: c.Available, Active: c.Active, Scheduled: c.Scheduled, Retryable: c.Retryable,
		Completed: c.Completed, Discarded: c.Discarded, Cancelled: c.Cancelled}
}

// throughputJSON is a rate of records completed (processed) and failed per
// minute, over the last window_seconds.
type throughputJSON struct {
	ProcessedPerMinute float64 `json:"processed_per_minute"`
	FailedPerMinute    float64 `json:"failed_per_minute"`
	WindowSeconds      int     `json:"window_seconds"`
}

func toThroughputJSON(t records.Throughput, window time.Duration) throughputJSON {
	per := func(n int64) float64 {
		return float64(int64(float64(n)/window.Minutes()*100+0.5)) / 100 // two decimals
	}
	return throughputJSON{ProcessedPerMinute: per(t.Completed), FailedPerMinute: per(t.Failed), WindowSeconds: int(window.Seconds())}
}

// adminStatsJSON is GET /admin/stats (admin spec §10.1).
type adminStatsJSON struct {
	Queues        int            `json:"queues"`
	Workers       int64          `json:"workers"`
	Jobs          jobCountsJSON  `json:"jobs"`
	Throughput    throughputJSON `json:"throughput"`
	UptimeSeconds int64          `json:"uptime_seconds"`
}

// adminStats answers the aggregate statistics of the queues the caller
// reads: how many queues there are, the workers registered, the jobs by
// state, the rates of the last throughputWindow, and how long the server
// has run.
func (s *Server) adminStats(c echo.Context, started time.Time) error {
	if err := checkParams(c.QueryParams(), nil); err != nil {
		return err
	}
	ctx := c.Request().Context()
	if err := s.queues.Refresh(ctx); err != nil {
		return err
	}
	now := s.cfg.Now()
	counts, err := s.rec.JobCounts(ctx, "", queueGlobs(c, auth.ActionRead), now)
	if err != nil {
		return err
	}
	var total records.JobCounts
	var withRecords []string
	for q, n := range counts {
		if readable(c, q) {
			total.Add(n)
			withRecords = append(withRecords, q)
		}
	}
	queues := 0
	for q := range s.knownQueues(maps.Keys(counts)) {
		if readable(c, q) {
			queues++
		}
	}
	tp, err := s.rec.QueueThroughput(ctx, withRecords, now.Add(-throughputWindow))
	if err != nil {
		return err
	}
	var sum records.Throughput
	for _, t := range tp {
		sum.Completed += t.Completed
		sum.Failed += t.Failed
	}
	workers, err := s.rec.ListWorkers(ctx, &records.WorkerListParams{QueueGlobs: queueGlobs(c, auth.ActionRead), Page: 1, PerPage: 1, Now: now})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, adminStatsJSON{Queues: queues, Workers: workers.Summary.Total, Jobs: toJobCountsJSON(total),
		Throughput: toThroughputJSON(sum, throughputWindow), UptimeSeconds: int64(now.Sub(started) / time.Second)})
}

// Pages of the admin lists (admin spec §7.1: page from 1, per_page default
// 20, at most 100).
const (
	adminDefaultPerPage = 20
	adminMaxPerPage     = 100
)

// adminPaginationJSON is an admin list's pagination (admin spec §6.1,
// §7.1), with has_more (HTTP binding §17.2) and, for the job list, the
// record list's flags on a total that is not exact.
type adminPaginationJSON struct {
	Total          int64 `json:"total"`
	TotalCapped    bool  `json:"total_capped,omitempty"`
	TotalEstimated bool  `json:"total_estimated,omitempty"`
	Page           int   `json:"page"`
	PerPage        int   `json:"per_page"`
	HasMore        bool  `json:"has_more"`
}

// parsePage reads page and per_page; deeper than maxOffset records is
// refused, as the record list's offset is.
func parsePage(c echo.Context) (page, perPage int, err error) {
	q := c.QueryParams()
	page, perPage = 1, adminDefaultPerPage
	if v := q.Get("page"); v != "" {
		if page, err = strconv.Atoi(v); err != nil || page < 1 {
			return 0, 0, invalidParam("page", "must be an integer from 1")
		}
	}
	if v := q.Get("per_page"); v != "" {
		if perPage, err = strconv.Atoi(v); err != nil || perPage < 1 || perPage > adminMaxPerPage {
			return 0, 0, invalidParam("per_page", "must be an integer from 1 to 100")
		}
	}
	if (page-1)*perPage >= maxOffset {
		return 0, 0, invalidParam("page", "pages end at the 10,000th item: narrow the filter")
	}
	return page, perPage, nil
}
