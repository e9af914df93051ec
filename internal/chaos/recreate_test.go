package chaos

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/testdate"
)

// The topic-recreation phase runs once the chaos has quiesced: the DLQ
// topic, a source topic and the archive topic are deleted and created again
// under the running serve (each gets a new topic id), a second batch of
// records goes through them with a kill in the middle, and every record whose
// archive copy was on the deleted archive topic gets a new one.
var recreated = []string{dlqTopic, qOrders, archiveTopic}

// recreateTopics deletes and re-creates the recreated topics, and makes the
// suite's own clients forget the old topic ids (franz-go keeps a topic's id
// until it is purged), as any client would have to.
func recreateTopics(ctx context.Context, broker string, clients ...*kgo.Client) error {
	cl, err := kafkaClient(broker)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deleted, err := adm.DeleteTopics(ctx, recreated...)
	if err != nil {
		return fmt.Errorf("delete topics: %w", err)
	}
	if err := deleted.Error(); err != nil {
		return fmt.Errorf("delete topics: %w", err)
	}
	deadline := testdate.Now().Add(30 * time.Second)
	for {
		topics, err := adm.ListTopics(ctx, recreated...)
		if err != nil {
			return fmt.Errorf("list topics: %w", err)
		}
		gone := true
		for _, name := range recreated {
			if topics.Has(name) && topics[name].Err == nil {
				gone = false
			}
		}
		if gone {
			break
		}
		if testdate.Now().After(deadline) {
			return fmt.Errorf("topics %v still exist 30 s after their deletion", recreated)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	created, err := adm.CreateTopics(ctx, 3, 1, nil, recreated...)
	if err != nil {
		return fmt.Errorf("create topics: %w", err)
	}
	if err := created.Error(); err != nil {
		return fmt.Errorf("create topics: %w", err)
	}
	for _, c := range clients {
		c.PurgeTopicsFromClient(recreated...)
	}
	return nil
}

// archivedBefore lists the stored poison records that are discarded (their
// archive copy is due) but whose copy was not seen on the archive topic
// since at: the copy was on the deleted topic and is not made again (yet).
// It also says how many such records there are.
func archivedBefore(ctx context.Context, dbURL string, copies []archived, at time.Time) ([]string, int, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, 0, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT key FROM redrive_record
		WHERE substring(key from 1 for 7) = $1::bytea AND state = 'discarded'`, []byte(poisonPrefix))
	if err != nil {
		return nil, 0, err
	}
	done, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, 0, err
	}
	since := map[string]bool{}
	for _, c := range copies {
		if !c.at.Before(at) {
			since[c.key] = true
		}
	}
	var stale []string
	for _, k := range done {
		if !since[string(k)] {
			stale = append(stale, strings.Clone(string(k[:min(len(k), 40)])))
		}
	}
	return stale, len(done), nil
}
