-- +goose Up
-- A task's progress adds up (issue 44): processed + skipped + what it has not
-- reached = total. skipped_reasons says why each skipped record was left as it
-- was, {"patch": n, "in_flight": n, "no_longer_matches": n} (docs/api.md,
-- Tasks); skipped is their sum. Tasks made before counted only their patch's
-- skips, and a completed one left the rest of its total unexplained: those
-- records no longer matched its filter when it got to them.
ALTER TABLE redrive_task ADD COLUMN IF NOT EXISTS skipped_reasons jsonb NOT NULL DEFAULT '{}';
UPDATE redrive_task SET skipped_reasons = jsonb_build_object('patch', skipped) WHERE skipped > 0;
UPDATE redrive_task SET total = processed + skipped WHERE total < processed + skipped;
UPDATE redrive_task
SET skipped_reasons = skipped_reasons || jsonb_build_object('no_longer_matches', total - processed - skipped),
    skipped = total - processed
WHERE state = 'completed' AND total > processed + skipped;

-- +goose Down
ALTER TABLE redrive_task DROP COLUMN IF EXISTS skipped_reasons;
