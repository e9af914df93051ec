package store

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// genericPlans is what withGenericPlans sets for its transaction.
const genericPlans = "SET LOCAL plan_cache_mode = force_generic_plan; SET LOCAL enable_seqscan = off; SET LOCAL jit = off"

// withGenericPlans runs fn in a transaction whose statements run their
// prepared statement's generic plan, planned once per connection.
//
// It is for the scheduler's settle, which runs hundreds of times a second
// with the same shape. Left to itself (plan_cache_mode = auto), Postgres
// found a custom plan over the weekly partitions cheaper than the generic
// one and planned it again at every call: 0.9 ms of planning per settle of
// 500 records, against 0.24 ms of execution (pg_stat_statements with
// track_planning: 404 plans for 400 settles). Its usual path touches no
// partition: it ends the claim, and finds the records whose produce failed,
// or whose last failure it clears, by id in arrays that are most often
// empty.
//
// The claim is not run so, though it was planned at every call too (2.7 ms
// a claim): a generic plan knows neither its LIMIT nor the ids it claims,
// so it either hashed every lifecycle row or probed every week's primary
// key with all the claimed ids (no partition is pruned by an array it
// computes), a cost that grows with the weeks kept; and a generic plan
// chooses each partition's index by its size when the plan was made, so a
// week made ahead, empty then, could be read through any index of it.
//
// A generic plan lives as long as its connection: without sequential
// scans, a week planned empty is still read through an index once it
// fills. And it is costed as if its arrays could be long, past
// jit_above_cost: JIT would compile it at every call (store.Open turns JIT
// off unless the url asks for it; here it is off whatever the url says).
func (s *Store) withGenericPlans(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, genericPlans); err != nil {
			return err
		}
		return fn(tx)
	})
}
