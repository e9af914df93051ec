-- +goose Up
-- A canary whose watch ends with outcomes of its sample still pending is
-- inconclusive: it never passes on outcomes nobody has seen.
ALTER TABLE redrive_task DROP CONSTRAINT redrive_task_canary_phase_check;
ALTER TABLE redrive_task ADD CONSTRAINT redrive_task_canary_phase_check
    CHECK (canary_phase IN ('sample', 'watch', 'passed', 'aborted', 'inconclusive'));

-- +goose Down
UPDATE redrive_task SET canary_phase = 'aborted' WHERE canary_phase = 'inconclusive';
ALTER TABLE redrive_task DROP CONSTRAINT redrive_task_canary_phase_check;
ALTER TABLE redrive_task ADD CONSTRAINT redrive_task_canary_phase_check
    CHECK (canary_phase IN ('sample', 'watch', 'passed', 'aborted'));
