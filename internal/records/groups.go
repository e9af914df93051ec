package records

import (
	"context"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/store"
)

// GroupBytes bounds the records an export or a patch's dry run holds at a
// time, by their sizes (store.RecordSize): a group is the next records
// whose sizes add up to at most GroupBytes, or one record larger than that
// alone. A record of a 1 MB value is held as about 1 MB, so a group is
// about four of them, whereas a page of 200 such records was 200 MB.
const GroupBytes = 4 << 20

// groupReader reads records a group at a time (GroupBytes): a page of ids
// and sizes first (sizes, page of them at a time, after a cursor), then
// the records of that page, a group at a time, by id (read).
type groupReader struct {
	// sizes reads the ids and sizes of up to limit records after the
	// record after ("": from the first), in order.
	sizes func(ctx context.Context, after string, limit int) ([]store.RecordSize, error)
	// read reads the records of ids, in order, leaving out those that no
	// longer qualify.
	read func(ctx context.Context, ids []string) ([]dlq.Record, error)
	// page is how many sizes one call of sizes reads; max, when above 0,
	// bounds how many records are read in all.
	page, max int
	// maxBytes bounds a group's sizes (GroupBytes).
	maxBytes int64

	pending []store.RecordSize // sized, not read yet
	after   string             // the last record sized
	sized   int                // how many were sized
	end     bool               // the last page was sized
	ids     []string
}

// next reads the next group of records; nil at the end.
func (g *groupReader) next(ctx context.Context) ([]dlq.Record, error) {
	for {
		if len(g.pending) == 0 {
			if g.end {
				return nil, nil
			}
			limit := g.page
			if g.max > 0 {
				limit = min(limit, g.max-g.sized)
			}
			sizes, err := g.sizes(ctx, g.after, limit)
			if err != nil {
				return nil, err
			}
			g.sized += len(sizes)
			g.end = len(sizes) < limit || g.max > 0 && g.sized >= g.max
			if len(sizes) == 0 {
				return nil, nil
			}
			g.pending, g.after = sizes, sizes[len(sizes)-1].ID
		}
		n, total := 0, int64(0)
		for n < len(g.pending) && (n == 0 || total+g.pending[n].Bytes <= g.maxBytes) {
			total += g.pending[n].Bytes
			n++
		}
		g.ids = g.ids[:0]
		for _, rs := range g.pending[:n] {
			g.ids = append(g.ids, rs.ID)
		}
		g.pending = g.pending[n:]
		recs, err := g.read(ctx, g.ids)
		if err != nil {
			return nil, err
		}
		if len(recs) > 0 {
			return recs, nil
		}
		// Every record of the group was changed or deleted since it was
		// sized: on to the next group.
	}
}
