-- +goose Up
-- A bulk retry that checks itself (issue 23): a canary redelivers a sample
-- first, watches it, and aborts the task when too much of it fails again
-- the same way; and incidents marked "resolved, redrive when quiet", which
-- start such a retry once no failure of theirs has arrived for a while.
-- No statement touches redrive_record.

ALTER TABLE redrive_task DROP CONSTRAINT IF EXISTS redrive_task_state_check;
ALTER TABLE redrive_task ADD CONSTRAINT redrive_task_state_check
    CHECK (state IN ('pending', 'running', 'completed', 'cancelled', 'failed', 'aborted'));

ALTER TABLE redrive_task
    -- {"sample": 100 | "5%", "sample_size": n, "watch": "PT10M", "abort_if_refail": 0.5}; NULL: no canary
    ADD COLUMN canary jsonb,
    -- sample (redelivering the sample), watch, passed (the rest follows) or aborted
    ADD COLUMN canary_phase text CHECK (canary_phase IN ('sample', 'watch', 'passed', 'aborted')),
    ADD COLUMN canary_sampled bigint NOT NULL DEFAULT 0,    -- records of the sample retried
    ADD COLUMN canary_sampled_at timestamptz,               -- when the whole sample was retried (the runner's clock)
    ADD COLUMN canary_watch_until timestamptz,              -- when the watch ends (the runner's clock)
    ADD COLUMN canary_report jsonb;                         -- the sample's outcomes, as last counted

-- The records of a canary's sample, with what they were before their retry:
-- their fingerprint and latest error, so that a repeat failure of their
-- redelivery is told from the failure that made them dead letters.
CREATE TABLE redrive_task_sample (
    task_id     uuid    NOT NULL REFERENCES redrive_task (id) ON DELETE CASCADE,
    record_id   uuid    NOT NULL,
    fingerprint text    NOT NULL,
    errors_len  integer NOT NULL,
    last_error  jsonb,
    -- set once the record failed again (sticky: a later success does not undo it)
    outcome     text    CHECK (outcome IN ('failed_same', 'failed_different')),
    PRIMARY KEY (task_id, record_id)
);

-- When the latest failure of an incident reached Redrive (ingest's clock),
-- which its last_seen (the failure's own time) may not say.
ALTER TABLE redrive_incident ADD COLUMN IF NOT EXISTS last_arrived_at timestamptz;

-- "Resolved, redrive when quiet": one request per incident. Once no failure
-- of it arrived for quiet_ms since the later of the request and its latest
-- failure, the maintenance leader starts a canary retry of it as requested_by.
CREATE TABLE redrive_incident_quiet (
    fingerprint  text        PRIMARY KEY,
    quiet_ms     bigint      NOT NULL CHECK (quiet_ms > 0),
    canary       jsonb       NOT NULL,
    rate_limit   double precision NOT NULL DEFAULT 0,
    requested_by text        NOT NULL,
    requested_at timestamptz NOT NULL,
    task_id      uuid,                 -- the task it started; NULL while it waits
    started_at   timestamptz
);

-- +goose Down
DROP TABLE redrive_incident_quiet;
ALTER TABLE redrive_incident DROP COLUMN IF EXISTS last_arrived_at;
DROP TABLE redrive_task_sample;
ALTER TABLE redrive_task DROP COLUMN canary_report, DROP COLUMN canary_watch_until, DROP COLUMN canary_sampled_at,
    DROP COLUMN canary_sampled, DROP COLUMN canary_phase, DROP COLUMN canary;
UPDATE redrive_task SET state = 'cancelled' WHERE state = 'aborted';
ALTER TABLE redrive_task DROP CONSTRAINT IF EXISTS redrive_task_state_check;
ALTER TABLE redrive_task ADD CONSTRAINT redrive_task_state_check
    CHECK (state IN ('pending', 'running', 'completed', 'cancelled', 'failed'));
