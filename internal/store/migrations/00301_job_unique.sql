-- +goose Up
-- Unique jobs (OJS unique jobs spec): a job published with a unique policy
-- claims its uniqueness key here, in the transaction that stores it. The
-- claim names the job that holds it and that job's created_at. A later job
-- with the same key is a duplicate while the holder is in one of the states
-- the later job's policy names and within its period of the holder's
-- created_at (unique jobs §6, §7.2); otherwise the later job takes the claim
-- over. Keys are SHA-256 hex digests; the table holds a row per key asked
-- for.
CREATE TABLE IF NOT EXISTS redrive_job_unique (
    unique_key text        PRIMARY KEY,
    job_id     uuid        NOT NULL,
    created_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE IF EXISTS redrive_job_unique;
