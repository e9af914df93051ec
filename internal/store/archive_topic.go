package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// DLQTopics lists the DLQ topics that have stored records, by a loose scan
// of the DLQ identity index: its cost grows with the number of DLQ topics,
// not of records.
func (s *Store) DLQTopics(ctx context.Context) ([]string, error) {
	return collect(ctx, s.pool, "list DLQ topics", pgx.RowTo[string], `
		WITH RECURSIVE t(topic) AS (
			SELECT min(dlq_topic) FROM redrive_record
			UNION ALL
			SELECT (SELECT min(r.dlq_topic) FROM redrive_record r WHERE r.dlq_topic > t.topic)
			FROM t WHERE t.topic IS NOT NULL
		)
		SELECT topic FROM t WHERE topic IS NOT NULL`)
}

// ArchiveTopicKnown reports whether an id of the archive topic was ever
// recorded (ArchiveTopicSeen): copies may have been made to it.
func (s *Store) ArchiveTopicKnown(ctx context.Context, topic string) (bool, error) {
	var known bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM redrive_archive_topic WHERE topic = $1)`, topic).Scan(&known)
	if err != nil {
		return false, fmt.Errorf("look up archive topic %s: %w", topic, err)
	}
	return known, nil
}

// ArchiveTopicSeen records that the archive topic has the id now (as the
// brokers' metadata says) and returns how many archive copies it made due
// again.
//
// The first id seen of a topic is only recorded. A new id of a topic whose
// earlier id is known means the topic was deleted and created again, and
// every copy made to it is gone: the copies of the records of dlqTopics (the
// DLQ topics archived to this topic) that are done are made due again
// (pending), and so are those being made right now (their claim is dropped,
// so that the late settle of a copy produced to the old topic cannot mark it
// done). An id that was replaced before is stale metadata and changes
// nothing. Replicas checking at once are serialised on the topic.
func (s *Store) ArchiveTopicSeen(ctx context.Context, topic string, id [16]byte, dlqTopics []string, now time.Time) (int64, error) {
	var recopied int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('redrive_archive_topic:' || $1, 0))`, topic); err != nil {
			return err
		}
		var known, current bool
		if err := tx.QueryRow(ctx, `
			SELECT EXISTS (SELECT 1 FROM redrive_archive_topic WHERE topic = $1 AND topic_id = $2),
			       EXISTS (SELECT 1 FROM redrive_archive_topic WHERE topic = $1 AND replaced_at IS NULL)`,
			topic, id).Scan(&known, &current); err != nil {
			return err
		}
		if known {
			return nil // the current id, or a stale one
		}
		if _, err := tx.Exec(ctx, `UPDATE redrive_archive_topic SET replaced_at = $2 WHERE topic = $1 AND replaced_at IS NULL`,
			topic, now); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO redrive_archive_topic (topic, topic_id, seen_at) VALUES ($1, $2, $3)`,
			topic, id, now); err != nil {
			return err
		}
		if !current || len(dlqTopics) == 0 {
			return nil
		}
		tag, err := tx.Exec(ctx, `
			UPDATE redrive_record SET archive_state = 'pending', archive_reason = NULL, archive_failure = NULL,
			       archive_retry_at = NULL, archive_token = NULL, archived_at = NULL
			WHERE dlq_topic = ANY($1) AND (archive_state = 'done' OR archive_token IS NOT NULL)`, dlqTopics)
		recopied = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("record id of archive topic %s: %w", topic, err)
	}
	return recopied, nil
}
