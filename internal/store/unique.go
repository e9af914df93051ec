package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// UniqueClaim is a job's claim on a uniqueness key (OJS unique jobs spec):
// while it holds, a later job with the same key is a duplicate.
type UniqueClaim struct {
	// Key is the uniqueness key (a hex SHA-256 digest).
	Key string
	// States are the OJS states in which a holder makes this job a
	// duplicate.
	States []string
	// Period is how long after its created_at a holder makes this job a
	// duplicate; 0: for as long as it is in States.
	Period time.Duration
	// Ignore makes a duplicate no error: the job is not stored, and the
	// holder is named instead (on_conflict ignore; reject otherwise).
	Ignore bool
}

// UniqueDuplicateError is a job of a batch whose uniqueness key another job
// holds (on_conflict reject).
type UniqueDuplicateError struct {
	Key string
	// Holder is the job holding the key, in HolderState.
	Holder, HolderState string
	// Index is the job's index in the batch.
	Index int
}

func (e *UniqueDuplicateError) Error() string {
	return fmt.Sprintf("job %s (%s) holds the uniqueness key %s", e.Holder, e.HolderState, e.Key)
}

// claimUnique takes c for job id within tx at now, or returns the holder
// (and its state) when another job holds it. The claim row is locked for
// the rest of tx, so two publishers of the same key are serialized: the
// second sees the first's job once it commits.
func (s *Store) claimUnique(ctx context.Context, tx pgx.Tx, c *UniqueClaim, id string, createdAt, now time.Time) (holder, state string, err error) {
	took, err := s.q.ClaimNewUnique(ctx, tx, c.Key, id, createdAt)
	if err != nil {
		return "", "", fmt.Errorf("claim unique key: %w", err)
	}
	if took {
		return "", "", nil
	}
	cur, err := s.q.UniqueClaim(ctx, tx, now, c.Key)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", "", fmt.Errorf("read unique claim: %w", err)
	}
	holds := err == nil && cur.HolderState != "" && slices.Contains(c.States, cur.HolderState) &&
		(c.Period == 0 || cur.CreatedAt.Add(c.Period).After(now))
	if holds {
		return cur.JobID, cur.HolderState, nil
	}
	if err := s.q.ClaimUnique(ctx, tx, id, createdAt, c.Key); err != nil {
		return "", "", fmt.Errorf("take over unique key: %w", err)
	}
	return "", "", nil
}
