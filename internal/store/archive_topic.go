package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// DLQTopics lists the DLQ topics that have stored records, by a loose scan
// of the DLQ identity index: its cost grows with the number of DLQ topics,
// not of records.
func (s *Store) DLQTopics(ctx context.Context) ([]string, error) {
	topics, err := s.q.DLQTopics(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("list DLQ topics: %w", err)
	}
	return topics, nil
}

// ArchiveTopicKnown reports whether an id of the archive topic was ever
// recorded (ArchiveTopicSeen): copies may have been made to it.
func (s *Store) ArchiveTopicKnown(ctx context.Context, topic string) (bool, error) {
	known, err := s.q.ArchiveTopicKnown(ctx, s.pool, topic)
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
// done); the notes of the copies made to it (redrive_archive_copy) are
// dropped, so that a record of those DLQ topics stored again later is
// copied again too. An id that was replaced before is stale metadata and changes
// nothing. Replicas checking at once are serialised on the topic.
func (s *Store) ArchiveTopicSeen(ctx context.Context, topic string, id [16]byte, dlqTopics []string, now time.Time) (int64, error) {
	var recopied int64
	topicID := uuid.UUID(id).String()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := s.q.ArchiveTopicLock(ctx, tx, topic); err != nil {
			return err
		}
		ids, err := s.q.ArchiveTopicIDs(ctx, tx, topic, topicID)
		if err != nil {
			return err
		}
		if ids.Known {
			return nil // the current id, or a stale one
		}
		if err := s.q.ArchiveTopicReplace(ctx, tx, &now, topic); err != nil {
			return err
		}
		if err := s.q.ArchiveTopicAdd(ctx, tx, topic, topicID, now); err != nil {
			return err
		}
		if !ids.Current || len(dlqTopics) == 0 {
			return nil
		}
		if err := s.q.ArchiveCopiesForget(ctx, tx, dlqTopics); err != nil {
			return err
		}
		recopied, err = s.q.ArchiveRecopy(ctx, tx, dlqTopics)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("record id of archive topic %s: %w", topic, err)
	}
	return recopied, nil
}
