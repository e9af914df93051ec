package httpapi

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/auth"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/queue"
	"github.com/redrive/redrive/internal/records"
)

// adminQueueJSON is a queue of GET /admin/queues (admin spec §6.1): its
// name, state and jobs counted by OJS state, with its depth (backpressure
// spec §3) and its rates over the last throughputWindow.
type adminQueueJSON struct {
	Name  string            `json:"name"`
	State policy.TopicState `json:"state"`
	// Status repeats state under the name the HTTP binding (§11.1) gives it.
	Status     policy.TopicState `json:"status"`
	Paused     bool              `json:"paused"`
	Counts     jobCountsJSON     `json:"counts"`
	Depth      int64             `json:"depth"`
	Throughput throughputJSON    `json:"throughput"`
	// CreatedAt is when the queue's API config was created or, without
	// one, when its oldest stored record was; null for neither.
	CreatedAt *jsonTime `json:"created_at"`
}

// adminQueueDetailJSON is GET /admin/queues/{name} (admin spec §6.2): the
// queue and its effective configuration (backpressure included).
type adminQueueDetailJSON struct {
	adminQueueJSON
	Configuration policy.Topic `json:"configuration"`
	UpdatedAt     *jsonTime    `json:"updated_at"`
}

// adminQueueJSON shows queue name with its counts, rates and age.
func (s *Server) adminQueueJSON(name string, counts records.JobCounts, tp records.Throughput, oldest *time.Time) adminQueueJSON {
	t := s.queues.Resolve(name, "")
	q := adminQueueJSON{Name: name, State: t.State, Status: t.State, Paused: t.State == policy.TopicPaused,
		Counts: toJobCountsJSON(counts), Depth: counts.Depth(), Throughput: toThroughputJSON(tp, throughputWindow),
		CreatedAt: optTime(oldest)}
	if cfg, _, ok := s.queues.Config(name); ok {
		q.CreatedAt = optTime(&cfg.CreatedAt)
	}
	return q
}

// adminQueueParams are the query parameters of GET /admin/queues.
var adminQueueParams = map[string]bool{"page": true, "per_page": true}

// adminQueues pages through the queues the caller reads, by name (admin
// spec §6.1). Like GET /queues it counts every queue's records once, from
// the statistics table, and reads the rest for the page's queues only.
func (s *Server) adminQueues(c echo.Context) error {
	if err := checkParams(c.QueryParams(), adminQueueParams); err != nil {
		return err
	}
	page, perPage, err := parsePage(c)
	if err != nil {
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
	var names []string
	for n := range s.knownQueues(maps.Keys(counts)) {
		if readable(c, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	from := min((page-1)*perPage, len(names))
	pageNames := names[from:min(from+perPage, len(names))]
	tp, oldest, err := s.queueAges(ctx, pageNames, now)
	if err != nil {
		return err
	}
	items := make([]adminQueueJSON, len(pageNames))
	for i, n := range pageNames {
		items[i] = s.adminQueueJSON(n, counts[n], tp[n], optAt(oldest, n))
	}
	return c.JSON(http.StatusOK, map[string]any{"items": items, "pagination": adminPaginationJSON{Total: int64(len(names)),
		Page: page, PerPage: perPage, HasMore: from+len(pageNames) < len(names)}})
}

// queueAges reads the rates of queues over the last throughputWindow and
// when each one's oldest stored record was created.
func (s *Server) queueAges(ctx context.Context, queues []string, now time.Time) (map[string]records.Throughput, map[string]time.Time, error) {
	tp, err := s.rec.QueueThroughput(ctx, queues, now.Add(-throughputWindow))
	if err != nil {
		return nil, nil, err
	}
	oldest, err := s.rec.OldestRecords(ctx, queues)
	if err != nil {
		return nil, nil, err
	}
	return tp, oldest, nil
}

func optAt(m map[string]time.Time, k string) *time.Time {
	if t, ok := m[k]; ok {
		return &t
	}
	return nil
}

// adminQueue answers one queue (admin spec §6.2); a queue with no records,
// no policy file entry and no API config is not found.
func (s *Server) adminQueue(c echo.Context) error {
	if err := checkParams(c.QueryParams(), nil); err != nil {
		return err
	}
	name, counts, err := s.knownQueue(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	now := s.cfg.Now()
	tp, oldest, err := s.queueAges(ctx, []string{name}, now)
	if err != nil {
		return err
	}
	out := adminQueueDetailJSON{adminQueueJSON: s.adminQueueJSON(name, counts, tp[name], optAt(oldest, name)),
		Configuration: s.queues.Resolve(name, "")}
	if cfg, _, ok := s.queues.Config(name); ok {
		out.UpdatedAt = optTime(&cfg.UpdatedAt)
	}
	return c.JSON(http.StatusOK, out)
}

// knownQueue reads the :name of a queue route and the queue's jobs by
// state: not found for the default layer and for a queue with no records,
// no policy file entry and no API config.
func (s *Server) knownQueue(c echo.Context) (string, records.JobCounts, error) {
	name, err := queueName(c)
	if err != nil {
		return "", records.JobCounts{}, err
	}
	if name == queue.DefaultName {
		return "", records.JobCounts{}, notFound(defaultIsLayer + ": it has no jobs; GET /ojs/v1/queues/_default shows it")
	}
	ctx := c.Request().Context()
	if err := s.queues.Refresh(ctx); err != nil {
		return "", records.JobCounts{}, err
	}
	counts, err := s.rec.JobCounts(ctx, name, nil, s.cfg.Now())
	if err != nil {
		return "", records.JobCounts{}, err
	}
	n := counts[name]
	if _, _, known := s.queues.Config(name); !known && n == (records.JobCounts{}) && s.queues.DeclaredIn(name) == "" {
		return "", records.JobCounts{}, notFound("no queue " + name + ": no records, no policy file entry and no API config")
	}
	return name, n, nil
}

// queueStatsJSON is GET /queues/{name}/stats (HTTP binding §11.2).
type queueStatsAnswerJSON struct {
	Queue      string            `json:"queue"`
	Status     policy.TopicState `json:"status"`
	Stats      ojsQueueStatsJSON `json:"stats"`
	ComputedAt jsonTime          `json:"computed_at"`
}

// ojsQueueStatsJSON are a queue's statistics (HTTP binding §11.2): its jobs
// by OJS state, its last hour, and its depth and bound (backpressure spec
// §3, §6).
type ojsQueueStatsJSON struct {
	// Queue repeats the queue's name (the ext-backpressure conformance
	// case EXT-BP-004 reads it here).
	Queue string `json:"queue"`
	jobCountsJSON
	// CompletedLastHour and FailedLastHour count the records completed,
	// and those whose latest failure happened, in the last 60 minutes.
	CompletedLastHour   int64   `json:"completed_last_hour"`
	FailedLastHour      int64   `json:"failed_last_hour"`
	ThroughputPerSecond float64 `json:"throughput_per_second"`
	// Depth is available + scheduled + retryable; MaxDepth its bound and
	// Pressure depth / bound, when the queue has one.
	Depth    int64    `json:"depth"`
	MaxDepth *int64   `json:"max_depth,omitempty"`
	Pressure *float64 `json:"pressure,omitempty"`
}

// queueStats answers a queue's statistics (HTTP binding §11.2).
func (s *Server) queueStats(c echo.Context) error {
	if err := checkParams(c.QueryParams(), nil); err != nil {
		return err
	}
	name, counts, err := s.knownQueue(c)
	if err != nil {
		return err
	}
	now := s.cfg.Now()
	tp, err := s.rec.QueueThroughput(c.Request().Context(), []string{name}, now.Add(-time.Hour))
	if err != nil {
		return err
	}
	t := s.queues.Resolve(name, "")
	st := ojsQueueStatsJSON{Queue: name, jobCountsJSON: toJobCountsJSON(counts), CompletedLastHour: tp[name].Completed,
		FailedLastHour: tp[name].Failed, ThroughputPerSecond: float64(int64(float64(tp[name].Completed)/3.6+0.5)) / 1000,
		Depth: counts.Depth()}
	if b := t.Backpressure; b.Bounded() {
		p := pressure(st.Depth, b.MaxDepth)
		st.MaxDepth, st.Pressure = &b.MaxDepth, &p
	}
	return c.JSON(http.StatusOK, queueStatsAnswerJSON{Queue: name, Status: t.State, Stats: st, ComputedAt: jsonTime(now)})
}
