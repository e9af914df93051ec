package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/config"
	"github.com/redrive/redrive/internal/service"
)

// ownTopic is a topic Redrive produces to on its own account (not a
// redelivery target), and what it is used for.
type ownTopic struct {
	name string
	use  string // "archive", "events"
}

// ownTopics are the archive topics (one per DLQ topic, or the single
// configured one; none when archiving is off) and the events topic (unless
// off), each once.
func ownTopics(cfg config.Config) []ownTopic {
	var out []ownTopic
	add := func(name, use string) {
		for i := range out {
			if out[i].name == name {
				if !strings.Contains(out[i].use, use) {
					out[i].use += ", " + use
				}
				return
			}
		}
		out = append(out, ownTopic{name, use})
	}
	if cfg.ArchiveTopic != config.Off {
		name := archiveTopic(cfg.ArchiveTopic, cfg.DLQTopics)
		for _, dlq := range cfg.DLQTopics {
			add(name(dlq), "archive")
		}
	}
	if t := EventsTopic(cfg); t != "" {
		add(t, "events")
	}
	return out
}

// topicSetup creates the App's own topics when they are missing, or with
// REDRIVE_CREATE_TOPICS=false only reports the missing ones.
type topicSetup struct {
	admin       *kadm.Client
	topics      []ownTopic
	create      bool
	partitions  int32 // -1: the broker's default
	replication int16 // -1: the broker's default
	log         *slog.Logger

	minWait, maxWait time.Duration // backoff between failed attempts
	recheck          time.Duration // check-only: how often missing topics are reported again
	reportEvery      time.Duration // how often the same failure is logged again
	attemptTimeout   time.Duration
	clock            clock.Clock

	lastReport    time.Time
	lastReportMsg string
}

// topicSetup is the service that sets up the App's own topics in the
// background until it has succeeded once. It never fails and never holds up
// anything else: Kafka may well be down at start.
func (a *App) topicSetup() service.Service {
	cfg := a.opts.Config
	s := &topicSetup{
		admin:          kadm.NewClient(a.ingester.Client()),
		topics:         ownTopics(cfg),
		create:         cfg.CreateTopics,
		partitions:     cfg.TopicPartitions,
		replication:    cfg.TopicReplicationFactor,
		log:            a.log.With("component", "app"),
		minWait:        time.Second,
		maxWait:        time.Minute,
		recheck:        time.Hour,
		reportEvery:    10 * time.Minute,
		attemptTimeout: 15 * time.Second,
		clock:          a.clock,
	}
	return service.NewLoop("topic setup", s.loop())
}

// loop tries until every topic exists (created now or before). Failures to
// reach Kafka are retried with backoff; with creation off, missing topics are
// reported once and then at most every recheck interval until they exist.
func (s *topicSetup) loop() *service.Loop {
	return &service.Loop{Clock: s.clock, Interval: s.recheck, Backoff: service.Backoff{Min: s.minWait, Max: s.maxWait},
		Report: func(err error, _ time.Duration) {
			level := slog.LevelWarn // Kafka unreachable: /readyz says so too
			if errors.As(err, new(*refusal)) {
				level = slog.LevelError // the topic will stay missing until someone acts
			}
			s.report(level, "topic setup failed; retrying", err)
		},
		Pass: func(ctx context.Context) (service.Next, error) {
			if len(s.topics) == 0 {
				return service.Next{Done: true}, nil
			}
			missing, err := s.attempt(ctx)
			return service.Next{Done: err == nil && missing == 0}, err
		}}
}

// attempt lists the topics and creates (or reports) the missing ones. It
// returns how many are still missing after reporting them (creation off), or
// an error when Kafka did not answer or refused a creation.
func (s *topicSetup) attempt(ctx context.Context) (missing int, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.attemptTimeout)
	defer cancel()
	names := make([]string, len(s.topics))
	for i, t := range s.topics {
		names[i] = t.name
	}
	details, err := s.admin.ListTopics(ctx, names...)
	if err != nil {
		return 0, fmt.Errorf("list topics %s: %w", strings.Join(names, ", "), err)
	}
	var absent []ownTopic
	for _, t := range s.topics {
		if !topicExists(details, t.name) {
			absent = append(absent, t)
		}
	}
	if len(absent) == 0 {
		return 0, nil
	}
	if !s.create {
		for _, t := range absent {
			s.log.Error("topic does not exist and REDRIVE_CREATE_TOPICS is false: create it", "topic", t.name, "used_for", t.use)
		}
		return len(absent), nil
	}
	names = names[:0]
	for _, t := range absent {
		names = append(names, t.name)
	}
	// -1 asks for the broker's default partition count and replication
	// factor (CreateTopics v4, Kafka 2.4+). kfake accepts it too.
	resps, err := s.admin.CreateTopics(ctx, s.partitions, s.replication, nil, names...)
	if err != nil {
		return 0, fmt.Errorf("create topics %s: %w", strings.Join(names, ", "), err)
	}
	var errs []error
	for _, t := range absent {
		r, ok := resps[t.name]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("create topic %q: no answer from the broker", t.name))
		case r.Err == nil:
			s.log.Info("topic created", "topic", t.name, "used_for", t.use,
				"partitions", r.NumPartitions, "replication_factor", r.ReplicationFactor)
		case errors.Is(r.Err, kerr.TopicAlreadyExists): // another replica was first
		default:
			errs = append(errs, &refusal{t, r.Err, r.ErrMessage})
		}
	}
	return 0, errors.Join(errs...)
}

// refusal is a broker's refusal to create a topic (ACL, policy, a
// replication factor above the broker count).
type refusal struct {
	topic ownTopic
	err   error
	msg   string // the broker's explanation, if any
}

func (r *refusal) Error() string {
	s := fmt.Sprintf("create %s topic %q: %v", r.topic.use, r.topic.name, r.err)
	if r.msg != "" {
		s += " (" + r.msg + ")"
	}
	return s
}

func (r *refusal) Unwrap() error { return r.err }

// topicExists reports whether the metadata shows topic: an unknown topic is
// missing; any other per-topic error (a leader election) means it exists.
func topicExists(details kadm.TopicDetails, topic string) bool {
	d, ok := details[topic]
	return ok && !errors.Is(d.Err, kerr.UnknownTopicOrPartition)
}

// report logs a failure, but the same failure at most every reportEvery.
func (s *topicSetup) report(level slog.Level, msg string, err error) {
	text := err.Error()
	now := clock.Or(s.clock).Now()
	if text == s.lastReportMsg && now.Sub(s.lastReport) < s.reportEvery {
		return
	}
	s.lastReport, s.lastReportMsg = now, text
	s.log.Log(context.Background(), level, msg, "err", text)
}

// dlqTopicsTimeout bounds the dlq_topics readiness check (one metadata request).
const dlqTopicsTimeout = time.Second

// checkDLQTopics is the dlq_topics readiness check: every DLQ topic exists
// and is being consumed. Ingest quietly waits for a missing one, so without
// this a typo in REDRIVE_DLQ_TOPICS would look healthy; and a topic whose
// fetches keep failing (deleted and created again until ingest takes it up
// anew, or refused to the consumer) exists and still stores nothing.
func (a *App) checkDLQTopics(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, dlqTopicsTimeout)
	defer cancel()
	topics := a.opts.Config.DLQTopics
	details, err := kadm.NewClient(a.ingester.Client()).ListTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("list DLQ topics: %w", err)
	}
	var problems []string
	for _, t := range topics {
		if !topicExists(details, t) {
			problems = append(problems, fmt.Sprintf("DLQ topic %q does not exist", t))
		}
	}
	if err := a.ingester.TopicProblems(); err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// reservedTopics are every topic Redrive itself reads or writes: the DLQ
// topics, the archive topics and the events topic. Their records have no
// topic to go back to, and an operator may not name one as a target.
func reservedTopics(cfg config.Config) []string {
	out := slices.Clone(cfg.DLQTopics)
	for _, t := range ownTopics(cfg) {
		if !slices.Contains(out, t.name) {
			out = append(out, t.name)
		}
	}
	return out
}
