package store

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/redrive/redrive/internal/dlq"
)

// A claim writes each record once, in the state its produce will leave it
// in (ClaimDue), so that a redelivery costs one write. Until the claim is
// settled that state is a promise, not a fact: the produce may still fail.
// Reads show a record in flight as it was before the claim — its state,
// attempt and redelivered_at, its last redelivery failure (which a claim
// keeps until a produce succeeds), no completion — and mark it InFlight.
// What they need comes with the row, from the claim (column claim_prior), so
// that the row and whether it is in flight are read in one snapshot.

// claimPriorExpr is the claim_prior column of the record table (or its
// alias) t: while an open claim holds the record, its state and
// redelivered_at before the claim; NULL otherwise. Only open claims have a
// row, found by the claim's token (its key); array_position scans one
// batch's ids for the rows a read returns.
func claimPriorExpr(t string) string {
	return `(SELECT jsonb_build_object('state', c.prior_states[p.i], 'redelivered_at', c.prior_redelivered_at[p.i])
		FROM redrive_claim c CROSS JOIN LATERAL array_position(c.ids, ` + t + `.id) AS p(i)
		WHERE c.token = ` + t + `.claim_token)::jsonb AS claim_prior`
}

// claimPrior is a claim_prior value.
type claimPrior struct {
	State         dlq.State  `json:"state"`
	RedeliveredAt *time.Time `json:"redelivered_at"`
}

// showInFlight shows r as it was before the claim described by prior (a
// claim_prior value), when there is one.
func showInFlight(r *dlq.Record, prior []byte) error {
	if prior == nil {
		return nil
	}
	var p claimPrior
	if err := json.Unmarshal(prior, &p); err != nil {
		return fmt.Errorf("decode claim_prior: %w", err)
	}
	r.InFlight = true
	r.State, r.Attempt, r.RedeliveredAt = p.State, r.Attempt-1, p.RedeliveredAt
	r.CompletedAt, r.CompletedBy, r.AckDueAt = nil, "", nil
	return nil
}
