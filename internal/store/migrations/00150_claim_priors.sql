-- +goose Up
-- Honest states while a redelivery is in flight. The claim writes each record
-- once, in the state its produce will leave it in; until the claim is settled
-- the record is shown as it was before (state, attempt, redelivered_at, its
-- last redelivery failure kept), marked in flight. The claim keeps what reads
-- need for that and what a rescue restores: the records' redelivered_at
-- before the claim, beside their prior states.
ALTER TABLE redrive_claim ADD COLUMN IF NOT EXISTS prior_redelivered_at timestamptz[];

-- +goose Down
ALTER TABLE redrive_claim DROP COLUMN IF EXISTS prior_redelivered_at;
