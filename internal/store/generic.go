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
// It is for the scheduler's claim and settle, which run hundreds of times a
// second with the same shape. Left to itself (plan_cache_mode = auto),
// Postgres found a custom plan over the weekly partitions cheaper than the
// generic one and so planned both statements again at every call: 2.7 ms of
// planning per claim of 500 records and 0.9 ms per settle, about a quarter of
// Postgres's work per redelivered record (pg_stat_statements with
// track_planning: 403 plans for 400 claims). Their plans do not depend on
// their parameters' values: the claim reads the due index in order, and the
// settle finds records by id. Everything else keeps its custom plans: a
// list's best plan does depend on its filter's values.
//
// A generic plan lives as long as its connection, and sizes the partitions
// as they were when it was made: a week made ahead is empty then, and a
// sequential scan of it would look free — and stay in the plan while the
// week fills, until the partition is analyzed. Without sequential scans
// every partition is read through its index, at any size. And a generic
// plan costs the claim as if the LIMIT were absent, far past
// jit_above_cost: compiled at every call, as JIT compiles, it would cost
// seconds a claim (store.Open turns JIT off unless the url asks for it;
// here it is off whatever the url says).
func (s *Store) withGenericPlans(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, genericPlans); err != nil {
			return err
		}
		return fn(tx)
	})
}
