package httpapi

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/auth"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/events"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/queue"
	"github.com/redrive/redrive/internal/records"
)

// queueJSON is a topic seen as an OJS queue (queue-config spec §9).
type queueJSON struct {
	Name  string            `json:"name"`
	State policy.TopicState `json:"state"`
	// Source says where the config comes from: file (read-only here), api,
	// or implicit (defaults only; the topic has records).
	Source     string          `json:"source"`
	DeclaredIn *string         `json:"declared_in"`
	Layers     []string        `json:"layers"`
	Config     policy.Topic    `json:"config"`
	APIConfig  json.RawMessage `json:"api_config"`
	Stats      queueStatsJSON  `json:"stats"`
	// Delivery says whether records of the queue can be redelivered.
	Delivery deliveryJSON `json:"delivery"`
	// OldestAt is when the queue's oldest stored record was created.
	OldestAt *jsonTime `json:"oldest_at"`
	// LastHour is the queue's activity over the last 60 minutes.
	LastHour  lastHourJSON `json:"last_hour"`
	CreatedAt *jsonTime    `json:"created_at"`
	UpdatedAt *jsonTime    `json:"updated_at"`
	// Schedule is the effective retry schedule (GET of one queue only).
	Schedule *policy.Schedule `json:"schedule,omitempty"`
}

// deliveryJSON is a queue's redelivery health: blocked while some of its
// records wait on a failure backoff (their topic is missing, they are too
// large, ...), with the latest failure's reason.
type deliveryJSON struct {
	State          string    `json:"state"` // ok or blocked
	BlockedRecords int64     `json:"blocked_records"`
	Reason         *string   `json:"reason"`
	Message        *string   `json:"message"`
	Since          *jsonTime `json:"since"`
}

func deliveryOf(b records.Blocked) deliveryJSON {
	if b.Records == 0 {
		return deliveryJSON{State: "ok"}
	}
	return deliveryJSON{State: "blocked", BlockedRecords: b.Records, Reason: &b.Reason, Message: &b.Message, Since: optTime(&b.Since)}
}

// lastHourJSON counts, over the last 60 minutes (by the minute), the
// failures stored for a queue — new records and repeat failures of
// redelivered ones — and the records the scheduler produced back to it.
type lastHourJSON struct {
	Added   int64 `json:"added"`
	Retried int64 `json:"retried"`
}

// queueStatsJSON counts a queue's records. The states add up to total
// (retryable + available + completed + discarded), discarded splits into
// dead_letter, discard and cancelled, and unacknowledged is the part of
// available marked unacknowledged.
type queueStatsJSON struct {
	Depth          int64 `json:"depth"` // retryable + available: records not yet settled
	Retryable      int64 `json:"retryable"`
	Available      int64 `json:"available"`
	Unacknowledged int64 `json:"unacknowledged"`
	Completed      int64 `json:"completed"`
	Discarded      int64 `json:"discarded"`
	DeadLetter     int64 `json:"dead_letter"`
	Discard        int64 `json:"discard"`
	Cancelled      int64 `json:"cancelled"`
	Total          int64 `json:"total"`
}

// unacknowledgedKey holds, in a queue's counts, its unacknowledged records.
const unacknowledgedKey = "unacknowledged"

// addUnacknowledged puts each queue's unacknowledged count into its counts.
func addUnacknowledged(counts map[string]map[string]int64, health map[string]records.QueueHealth) {
	for q, h := range health {
		n := h.Unacknowledged
		if n == 0 {
			continue
		}
		if counts[q] == nil {
			counts[q] = map[string]int64{}
		}
		counts[q][unacknowledgedKey] = n
	}
}

func statsOf(m map[string]int64) queueStatsJSON {
	s := queueStatsJSON{Retryable: m["retryable"], Available: m["available"], Unacknowledged: m[unacknowledgedKey], Completed: m["completed"],
		Discarded: m["discarded"], DeadLetter: m["dead_letter"], Discard: m["discard"], Cancelled: m["cancelled"]}
	s.Depth = s.Retryable + s.Available
	s.Total = s.Depth + s.Completed + s.Discarded
	return s
}

func (s *Server) queueJSON(name string, counts map[string]int64, blocked records.Blocked, act records.Activity) queueJSON {
	t := s.queues.Resolve(name, "")
	out := queueJSON{Name: name, State: t.State, Source: "implicit", Layers: t.Layers, Config: t,
		APIConfig: json.RawMessage("null"), Stats: statsOf(counts), Delivery: deliveryOf(blocked),
		OldestAt: optTime(act.OldestAt), LastHour: lastHourJSON{Added: act.Added, Retried: act.Retried}}
	if file := s.queues.DeclaredIn(name); file != "" {
		out.Source, out.DeclaredIn = "file", &file
	} else if cfg, _, ok := s.queues.Config(name); ok {
		out.Source, out.APIConfig = "api", cfg.Config
		out.CreatedAt, out.UpdatedAt = optTime(&cfg.CreatedAt), optTime(&cfg.UpdatedAt)
	}
	if out.Layers == nil {
		out.Layers = []string{}
	}
	return out
}

// queueListParams are the query parameters GET /queues accepts.
var queueListParams = map[string]bool{"limit": true, "cursor": true, "sort": true, "q": true}

// queueSorts are the orders of GET /queues; ties are broken by name.
var queueSorts = []string{"name", "depth", "dead_letter", "total", "oldest"}

// maxQueueSearch bounds q: no topic name is longer (Kafka's limit).
const maxQueueSearch = 249

// queueRow is a queue as the list sorts it: its name and sort key.
type queueRow struct {
	name string
	n    int64      // depth, dead_letter or total
	at   *time.Time // oldest_at, for sort=oldest
}

// queueCursor is where a page of GET /queues ended: the last queue's sort
// key and name. It is a position, not an offset, so a queue added or gone
// between pages neither repeats nor skips another.
type queueCursor struct {
	Sort string     `json:"s"`
	Name string     `json:"n"`
	N    int64      `json:"v,omitempty"`
	At   *time.Time `json:"t,omitempty"`
}

// queueLess orders rows for sort: name A→Z; counts largest first; oldest
// first, queues without records last; ties by name.
func queueLess(sort string) func(a, b queueRow) int {
	return func(a, b queueRow) int {
		switch sort {
		case "depth", "dead_letter", "total":
			if c := cmp.Compare(b.n, a.n); c != 0 {
				return c
			}
		case "oldest":
			switch {
			case a.at == nil && b.at != nil:
				return 1
			case a.at != nil && b.at == nil:
				return -1
			case a.at != nil && b.at != nil:
				if c := a.at.Compare(*b.at); c != 0 {
					return c
				}
			}
		}
		return strings.Compare(a.name, b.name)
	}
}

func parseQueueCursor(v, sort string) (*queueRow, error) {
	if v == "" {
		return nil, nil
	}
	bad := invalidParam("cursor", "must be the next_cursor of a previous page of this list")
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return nil, bad
	}
	var c queueCursor
	if json.Unmarshal(raw, &c) != nil || c.Name == "" || !slices.Contains(queueSorts, c.Sort) {
		return nil, bad
	}
	if c.Sort != sort {
		return nil, invalidParam("cursor", "was issued for sort="+c.Sort+"; ask again without a cursor to sort by "+sort)
	}
	return &queueRow{name: c.Name, n: c.N, at: c.At}, nil
}

func encodeQueueCursor(sort string, r queueRow) string {
	b, _ := json.Marshal(queueCursor{Sort: sort, Name: r.name, N: r.n, At: r.at})
	return base64.RawURLEncoding.EncodeToString(b)
}

// listQueues pages through the queues (GET /queues). It reads the counts of
// every queue once, from the statistics table (one row per queue and state,
// whatever the number of records), and everything else — age, last hour,
// blocked records, config — only for the page's queues. sort=oldest needs
// every matching queue's age: one index probe per queue with records.
func (s *Server) listQueues(c echo.Context) error {
	qp := c.QueryParams()
	if err := checkParams(qp, queueListParams); err != nil {
		return err
	}
	limit, err := parseLimit(qp.Get("limit"))
	if err != nil {
		return err
	}
	sort := qp.Get("sort")
	if sort == "" {
		sort = "name"
	}
	if !slices.Contains(queueSorts, sort) {
		return invalidParam("sort", "must be one of "+strings.Join(queueSorts, ", "))
	}
	search := qp.Get("q")
	if utf8.RuneCountInString(search) > maxQueueSearch {
		return invalidParam("q", fmt.Sprintf("at most %d characters (a topic name is no longer)", maxQueueSearch))
	}
	after, err := parseQueueCursor(qp.Get("cursor"), sort)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if err := s.queues.Refresh(ctx); err != nil {
		return err
	}
	counts, err := s.rec.QueueCounts(ctx)
	if err != nil {
		return err
	}
	names := s.knownQueues(maps.Keys(counts))
	needle := strings.ToLower(search)
	rows := make([]queueRow, 0, len(names))
	var withRecords []string
	for n := range names {
		if !readable(c, n) {
			continue // the caller's roles do not reach it (docs/security.md)
		}
		if needle != "" && !strings.Contains(strings.ToLower(n), needle) {
			continue
		}
		r := queueRow{name: n}
		stats := statsOf(counts[n])
		switch sort {
		case "depth":
			r.n = stats.Depth
		case "dead_letter":
			r.n = stats.DeadLetter
		case "total":
			r.n = stats.Total
		case "oldest":
			if stats.Total > 0 {
				withRecords = append(withRecords, n)
			}
		}
		rows = append(rows, r)
	}
	if sort == "oldest" {
		oldest, err := s.rec.OldestRecords(ctx, withRecords)
		if err != nil {
			return err
		}
		for i := range rows {
			if at, ok := oldest[rows[i].name]; ok {
				rows[i].at = &at
			}
		}
	}
	less := queueLess(sort)
	slices.SortFunc(rows, less)
	from := 0
	if after != nil {
		from, _ = slices.BinarySearchFunc(rows, *after, less)
		if from < len(rows) && less(rows[from], *after) == 0 {
			from++
		}
	}
	page := rows[from:min(from+limit, len(rows))]
	pageNames := make([]string, len(page))
	for i, r := range page {
		pageNames[i] = r.name
	}
	health, err := s.rec.QueueHealth(ctx, pageNames, s.cfg.Now())
	if err != nil {
		return err
	}
	addUnacknowledged(counts, health)
	items := make([]queueJSON, len(page))
	for i, n := range pageNames {
		items[i] = s.queueJSON(n, counts[n], health[n].Blocked, health[n].Activity)
	}
	pg := paginationJSON{Total: int64(len(rows)), Limit: limit, HasMore: from+len(page) < len(rows)}
	if pg.HasMore {
		pg.NextCursor = encodeQueueCursor(sort, page[len(page)-1])
	}
	return c.JSON(http.StatusOK, map[string]any{"items": items, "pagination": pg})
}

// knownQueues are the queues the API shows: withRecords (the topics with
// records), the topics the policy files name exactly, and those with an
// API config.
func (s *Server) knownQueues(withRecords iter.Seq[string]) map[string]bool {
	names := map[string]bool{}
	for q := range withRecords {
		names[q] = true
	}
	for k := range s.queues.Files().Topics() {
		if !strings.Contains(k, "*") {
			names[k] = true
		}
	}
	for _, n := range s.queues.Names() {
		names[n] = true
	}
	return names
}

// queueName reads and checks the :name path parameter.
func queueName(c echo.Context) (string, error) {
	name := c.Param("name")
	if name == queue.DefaultName {
		return name, nil
	}
	if msg := dlq.TopicNameProblem(name); msg != "" {
		return "", invalidParam("name", msg)
	}
	return name, nil
}

func (s *Server) getQueue(c echo.Context) error {
	name, err := queueName(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if err := s.queues.Refresh(ctx); err != nil {
		return err
	}
	var q queueJSON
	if name == queue.DefaultName {
		q = s.defaultLayerJSON()
	} else {
		var records int64
		if q, records, err = s.oneQueue(ctx, name); err != nil {
			return err
		}
		if _, _, known := s.queues.Config(name); !known && records == 0 && s.queues.DeclaredIn(name) == "" {
			return notFound("no queue " + name + ": no records, no policy file entry and no API config")
		}
	}
	sched := policy.ScheduleOf(q.Config)
	q.Schedule = &sched
	return c.JSON(http.StatusOK, q)
}

// The name _default is the default layer (OJS queue-config spec §7.1), in
// the API as in policy files; a Kafka topic named _default follows the layer
// and cannot be configured, paused, resumed or drained on its own: the name
// would say both. Its records are records like any other (?queue=_default).
const defaultIsLayer = "_default is the default layer that every topic inherits, not a topic"

// defaultLayerJSON shows the default layer: its config (no topic entry
// applies to it), its API layer, and no records of its own.
func (s *Server) defaultLayerJSON() queueJSON {
	q := s.queueJSON(queue.DefaultName, nil, records.Blocked{}, records.Activity{})
	t := s.queues.Default()
	q.Config, q.State, q.Layers = t, t.State, t.Layers
	if q.Layers == nil {
		q.Layers = []string{}
	}
	return q
}

// effective is the config of name: the default layer's for _default.
func (s *Server) effective(name string) policy.Topic {
	if name == queue.DefaultName {
		return s.queues.Default()
	}
	return s.queues.Resolve(name, "")
}

// oneQueue shows one queue, and how many records it has.
func (s *Server) oneQueue(ctx context.Context, name string) (queueJSON, int64, error) {
	st, err := s.rec.Stats(ctx, name)
	if err != nil {
		return queueJSON{}, 0, err
	}
	health, err := s.rec.QueueHealth(ctx, []string{name}, s.cfg.Now())
	if err != nil {
		return queueJSON{}, 0, err
	}
	addUnacknowledged(st.ByQueueState, health)
	h := health[name]
	return s.queueJSON(name, st.ByQueueState[name], h.Blocked, h.Activity), st.Total, nil
}

// readOnly is the 409 for a topic the policy files declare.
func readOnly(name, file string) error {
	return &APIError{Status: http.StatusConflict, Code: CodeConflict,
		Message: "queue " + name + " is declared in " + file + " and is read-only over the API; change the file instead",
		Details: map[string]any{"declared_in": file}}
}

// decodeQueueConfig strictly decodes and validates a partial topic policy.
func (s *Server) decodeQueueConfig(name string, raw json.RawMessage, prefix string) (json.RawMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	if err := checkBackpressureSupported(raw, prefix); err != nil {
		return nil, err
	}
	spec, err := policy.DecodeTopicSpec(raw)
	if err != nil {
		return nil, policyError(err, prefix)
	}
	if err := s.queues.Validate(name, spec); err != nil {
		return nil, policyError(err, prefix)
	}
	if err := s.checkTargetTopic(spec, prefix); err != nil {
		return nil, err
	}
	return queue.Marshal(spec)
}

// checkTargetTopic refuses a redelivery.target_topic that is one of
// Redrive's own topics or a Kafka internal one (422 naming the field), in
// the config (an API config has no per-type overrides).
func (s *Server) checkTargetTopic(spec *policy.TopicSpec, prefix string) error {
	if r := spec.Redelivery; r != nil && r.TargetTopic != nil && *r.TargetTopic != "" {
		if msg := s.rec.TargetProblem(*r.TargetTopic); msg != "" {
			field := prefix + "redelivery.target_topic"
			return &APIError{Status: http.StatusUnprocessableEntity, Code: CodeValidationError,
				Message: field + ": " + jsonString(*r.TargetTopic) + " " + msg + "; name the topic a consumer reads",
				Details: map[string]any{"parameter": field, "fields": []map[string]string{{"field": field, "message": msg}}}}
		}
	}
	return nil
}

type createQueueBody struct {
	Name   string          `json:"name"`
	Config json.RawMessage `json:"config"`
}

func (s *Server) createQueue(c echo.Context) error {
	if err := checkParams(c.QueryParams(), nil); err != nil {
		return err
	}
	var b createQueueBody
	if err := bindStrict(c, &b); err != nil {
		return err
	}
	if b.Name == queue.DefaultName {
		return invalidParam("name", defaultIsLayer+": change it with PUT /ojs/v1/queues/_default/config. "+
			"A Kafka topic named _default cannot have a config of its own; it follows _default")
	}
	if msg := dlq.TopicNameProblem(b.Name); msg != "" {
		return invalidParam("name", msg)
	}
	if err := mayQueue(principal(c), auth.ActionConfigure, b.Name); err != nil {
		return err
	}
	noteAudit(c, b.Name, nil, nil)
	if file := s.queues.DeclaredIn(b.Name); file != "" {
		return readOnly(b.Name, file)
	}
	cfg, err := s.decodeQueueConfig(b.Name, b.Config, "config.")
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if _, err := s.rec.CreateQueue(ctx, b.Name, cfg); errors.Is(err, records.ErrExists) {
		return &APIError{Status: http.StatusConflict, Code: CodeConflict, Message: "queue " + b.Name + " already exists; PUT its config to change it"}
	} else if err != nil {
		return err
	}
	noteChange(c, nil, cfg)
	if err := s.queues.Refresh(ctx); err != nil {
		return err
	}
	q, _, err := s.oneQueue(ctx, b.Name)
	if err != nil {
		return err
	}
	s.publishQueue(c, events.QueueConfigUpdated, b.Name)
	c.Response().Header().Set(echo.HeaderLocation, BasePath+"/queues/"+b.Name)
	return c.JSON(http.StatusCreated, q)
}

// queueConfigJSON is GET /queues/{name}/config: the effective config, the
// API layer, and where each field of the config comes from.
type queueConfigJSON struct {
	Name       string          `json:"name"`
	Config     policy.Topic    `json:"config"`
	APIConfig  json.RawMessage `json:"api_config"`
	DeclaredIn *string         `json:"declared_in"`
	// Sources maps each field path of config to its layer: default, policy
	// file (with the file and entry) or api.
	Sources policy.Sources `json:"sources"`
}

func (s *Server) getQueueConfig(c echo.Context) error {
	name, err := queueName(c)
	if err != nil {
		return err
	}
	if err := s.queues.Refresh(c.Request().Context()); err != nil {
		return err
	}
	out := queueConfigJSON{Name: name, Config: s.effective(name), APIConfig: json.RawMessage("null"), Sources: s.queues.Sources(name)}
	if cfg, _, ok := s.queues.Config(name); ok {
		out.APIConfig = cfg.Config
	}
	if file := s.queues.DeclaredIn(name); file != "" {
		out.DeclaredIn = &file
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) putQueueConfig(c echo.Context) error {
	name, err := queueName(c)
	if err != nil {
		return err
	}
	body, err := readBody(c, false)
	if err != nil {
		return err
	}
	noteAudit(c, name, nil, nil)
	if file := s.queues.DeclaredIn(name); file != "" {
		return readOnly(name, file)
	}
	var probe map[string]json.RawMessage
	if err := decodeStrict(body, &probe); err != nil || probe == nil {
		if err == nil {
			err = invalidParam("body", "must be a JSON object")
		}
		return err
	}
	cfg, err := s.decodeQueueConfig(name, body, "")
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	before, err := s.apiLayer(ctx, name)
	if err != nil {
		return err
	}
	if string(cfg) == "{}" && (before == nil || !before.Explicit) && name != queue.DefaultName {
		// An empty API layer of a topic no POST created is no API layer:
		// drop it, so that the topic says where its policy really comes
		// from (its files or the defaults), as after DELETE.
		if err := s.rec.DeleteQueue(ctx, name); err != nil && !errors.Is(err, records.ErrNotFound) {
			return err
		}
		noteChange(c, configOf(before), nil)
	} else {
		after, err := s.rec.PutQueueConfig(ctx, name, cfg, false)
		if err != nil {
			return err
		}
		noteChange(c, configOf(before), after.Config)
	}
	if err := s.queues.Refresh(ctx); err != nil {
		return err
	}
	s.rec.Wake() // a resumed or re-targeted topic may have records due
	s.publishQueue(c, events.QueueConfigUpdated, name)
	return s.getQueueConfig(c)
}

// setQueueState pauses, resumes or drains a topic: its API config's state.
func (s *Server) setQueueState(state policy.TopicState) echo.HandlerFunc {
	return func(c echo.Context) error {
		name, err := queueName(c)
		if err != nil {
			return err
		}
		if name == queue.DefaultName {
			return invalidParam("name", defaultIsLayer+", and has no state of its own. A Kafka topic named _default "+
				"cannot be paused, resumed or drained on its own; a state in the _default config applies to every topic that sets none")
		}
		if err := checkParams(c.QueryParams(), nil); err != nil {
			return err
		}
		noteAudit(c, name, nil, nil)
		if file := s.queues.DeclaredIn(name); file != "" {
			return readOnly(name, file)
		}
		raw, _ := json.Marshal(map[string]policy.TopicState{"state": state})
		ctx := c.Request().Context()
		before, err := s.apiLayer(ctx, name)
		if err != nil {
			return err
		}
		qc, err := s.rec.PutQueueConfig(ctx, name, raw, true)
		if err != nil {
			return err
		}
		after := qc.Config
		if resumedToNothing(qc, state) {
			// A topic that only a pause had put under API control goes back
			// to its files and defaults: its source is no longer "api".
			if err := s.rec.DeleteQueue(ctx, name); err != nil && !errors.Is(err, records.ErrNotFound) {
				return err
			}
			after = nil
		}
		noteChange(c, configOf(before), after)
		if err := s.queues.Refresh(ctx); err != nil {
			return err
		}
		ev := events.QueueConfigUpdated
		switch state {
		case policy.TopicActive:
			s.rec.Wake()
			ev = events.QueueResumed
		case policy.TopicPaused:
			ev = events.QueuePaused
		}
		s.publishQueue(c, ev, name)
		q, _, err := s.oneQueue(ctx, name)
		if err != nil {
			return err
		}
		at := jsonTime(s.cfg.Now())
		out := queueStateJSON{queueJSON: q, Queue: name, Status: q.State, Paused: q.State == policy.TopicPaused}
		switch state {
		case policy.TopicPaused:
			out.PausedAt = &at
		case policy.TopicActive:
			out.ResumedAt = &at
		}
		return c.JSON(http.StatusOK, out)
	}
}

// queueStateJSON is the answer of a pause, resume or drain: the queue as
// GET shows it (what Redrive's clients read) with the fields of the OJS
// HTTP binding (§11.3, §11.4: queue, status, paused_at or resumed_at) and
// of the admin API (§6.3: name, paused, paused_at).
type queueStateJSON struct {
	queueJSON
	// Queue is the queue's name (HTTP binding §11.3).
	Queue string `json:"queue"`
	// Status is the queue's state, as state says it.
	Status policy.TopicState `json:"status"`
	// Paused says the state is paused (admin API §6.3).
	Paused bool `json:"paused"`
	// PausedAt (a pause) and ResumedAt (a resume) are when the call
	// changed the state.
	PausedAt  *jsonTime `json:"paused_at,omitempty"`
	ResumedAt *jsonTime `json:"resumed_at,omitempty"`
}

// apiLayer reads a topic's API config from the store (nil: none), for the
// audit log's before and after: the resolver's copy may be seconds old.
func (s *Server) apiLayer(ctx context.Context, name string) (*records.QueueConfig, error) {
	qc, err := s.rec.QueueConfig(ctx, name)
	if errors.Is(err, records.ErrNotFound) {
		return nil, nil
	}
	return qc, err
}

// configOf is an API layer's config, nil for none.
func configOf(qc *records.QueueConfig) json.RawMessage {
	if qc == nil {
		return nil
	}
	return qc.Config
}

// resumedToNothing reports whether a resume left an implicit topic's API
// config holding nothing but the active state.
func resumedToNothing(qc *records.QueueConfig, state policy.TopicState) bool {
	if state != policy.TopicActive || qc.Explicit {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(qc.Config, &m) != nil || len(m) != 1 {
		return false
	}
	var st policy.TopicState
	return json.Unmarshal(m["state"], &st) == nil && st == policy.TopicActive
}

// publishQueue emits a queue event with the topic's state and effective config.
func (s *Server) publishQueue(c echo.Context, t events.Type, name string) {
	eff := s.effective(name)
	cfg, _ := json.Marshal(eff)
	s.cfg.Events.Publish(c.Request().Context(), events.Queue(t, events.QueueData{Queue: name, State: string(eff.State), Config: cfg}))
}
