package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

// An archive copy is made once per record as it is, whatever deletes and
// stores it again: a dead letter purged and stored again as it was is
// marked archived from its first copy, not claimed again; stored again
// after a new failure, it is copied again; and once its archive topic is
// deleted and created again (its copies gone) it is copied again too.
func TestAnArchiveCopyIsMadeOncePerRecordAsItIs(t *testing.T) {
	s := setup(t)
	ctx := context.Background()
	now := testdate.Now().UTC().Truncate(time.Microsecond)
	r := newRecord(1, "orders")
	r.State, r.Exhaustion, r.DiscardedAt, r.NextRetryAt = dlq.StateDiscarded, dlq.ExhaustionDeadLetter, &now, nil
	put := func(r dlq.Record) {
		t.Helper()
		if _, err := s.DeleteRecord(ctx, r.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		if _, err := s.InsertRecords(ctx, []dlq.Record{r}); err != nil {
			t.Fatal(err)
		}
	}
	archive := func(what string, at time.Time, claimed, copied int) {
		t.Helper()
		c, err := s.ClaimArchive(ctx, at, 10, time.Minute)
		if err != nil || len(c.Records) != claimed || c.Copied != copied {
			t.Fatalf("%s: claim = %d records, %d copied already, %v; want %d claimed, %d copied", what, len(c.Records), c.Copied, err,
				claimed, copied)
		}
		if claimed > 0 {
			if n, err := s.SettleArchive(ctx, c, []store.ArchiveOutcome{{ID: r.ID}}, at); err != nil || n != 1 {
				t.Fatalf("%s: settle = %d, %v", what, n, err)
			}
		}
		got, err := s.Get(ctx, r.ID)
		if err != nil || got.Archive == nil || got.Archive.State != dlq.ArchiveDone || got.ArchivedAt == nil {
			t.Fatalf("%s: record %+v, %v; want archived", what, got, err)
		}
	}
	put(r)
	archive("the first copy", now, 1, 0)

	// Purged and stored again as it was (an import of its export): marked
	// archived when its copy was made, not copied again.
	put(r)
	later := now.Add(time.Hour)
	archive("stored again", later, 0, 1)
	if got, _ := s.Get(ctx, r.ID); !got.ArchivedAt.Equal(now) {
		t.Fatalf("archived_at %v, want the first copy's %v", got.ArchivedAt, now)
	}

	// Stored again after a new failure: another copy.
	r.Errors = append(r.Errors, dlq.ErrorEntry{Attempt: 1, Type: "db.down", Message: "again", Code: dlq.CodeRetry, OccurredAt: later})
	put(r)
	archive("after a new failure", later, 1, 0)

	// The archive topic is deleted and created again: the copies made to it
	// are made again, this record's too.
	if _, err := s.ArchiveTopicSeen(ctx, "dead_letter_queue.archive", [16]byte{1}, []string{"dead_letter_queue"}, later); err != nil {
		t.Fatal(err)
	}
	if n, err := s.ArchiveTopicSeen(ctx, "dead_letter_queue.archive", [16]byte{2}, []string{"dead_letter_queue"}, later); err != nil || n != 1 {
		t.Fatalf("recreated archive topic: %d copies due again, %v; want 1", n, err)
	}
	archive("after the archive topic was recreated", later, 1, 0)
	put(r)
	archive("stored again after that", later.Add(time.Hour), 0, 1)
}
