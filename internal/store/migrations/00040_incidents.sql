-- +goose NO TRANSACTION
-- +goose Up
-- Incidents: failures grouped by error signature (internal/fingerprint). A
-- record carries the fingerprint of its latest error; redrive_incident keeps
-- one row per fingerprint ever seen; the statistics table gains the
-- fingerprint as a dimension, so counting an incident's live records by
-- queue and state reads a few hundred rows, not the records.

-- '' until a record's fingerprint is computed (rows stored before this
-- migration are fingerprinted by serve in the background).
ALTER TABLE redrive_record ADD COLUMN IF NOT EXISTS fingerprint text NOT NULL DEFAULT '';
CREATE INDEX CONCURRENTLY IF NOT EXISTS redrive_record_fingerprint ON redrive_record (fingerprint, id);

CREATE TABLE IF NOT EXISTS redrive_incident (
    fingerprint    text        PRIMARY KEY,
    error_type     text        NOT NULL,
    signature      text        NOT NULL,   -- the normalized message
    first_seen     timestamptz NOT NULL,
    last_seen      timestamptz NOT NULL,
    sample_id      uuid        NOT NULL,   -- one record of it, and its message
    sample_message text        NOT NULL
);
CREATE INDEX IF NOT EXISTS redrive_incident_last_seen ON redrive_incident (last_seen);

ALTER TABLE redrive_record_count ADD COLUMN IF NOT EXISTS fingerprint text NOT NULL DEFAULT '';

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_record_count_ins() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO redrive_record_count (queue, type, error_type, state, exhaustion, fingerprint, n)
    SELECT queue, type, error_type, state, coalesce(exhaustion, ''), fingerprint, count(*)
    FROM new_rows GROUP BY 1, 2, 3, 4, 5, 6;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_record_count_del() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO redrive_record_count (queue, type, error_type, state, exhaustion, fingerprint, n)
    SELECT queue, type, error_type, state, coalesce(exhaustion, ''), fingerprint, -count(*)
    FROM old_rows GROUP BY 1, 2, 3, 4, 5, 6;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_record_count_upd() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO redrive_record_count (queue, type, error_type, state, exhaustion, fingerprint, n)
    SELECT queue, type, error_type, state, exhaustion, fingerprint, sum(d)
    FROM (SELECT queue, type, error_type, state, coalesce(exhaustion, '') AS exhaustion, fingerprint, -1 AS d FROM old_rows
          UNION ALL
          SELECT queue, type, error_type, state, coalesce(exhaustion, ''), fingerprint, 1 FROM new_rows) c
    GROUP BY 1, 2, 3, 4, 5, 6
    HAVING sum(d) <> 0;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_record_count_ins() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO redrive_record_count (queue, type, error_type, state, exhaustion, n)
    SELECT queue, type, error_type, state, coalesce(exhaustion, ''), count(*)
    FROM new_rows GROUP BY 1, 2, 3, 4, 5;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_record_count_del() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO redrive_record_count (queue, type, error_type, state, exhaustion, n)
    SELECT queue, type, error_type, state, coalesce(exhaustion, ''), -count(*)
    FROM old_rows GROUP BY 1, 2, 3, 4, 5;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_record_count_upd() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO redrive_record_count (queue, type, error_type, state, exhaustion, n)
    SELECT queue, type, error_type, state, exhaustion, sum(d)
    FROM (SELECT queue, type, error_type, state, coalesce(exhaustion, '') AS exhaustion, -1 AS d FROM old_rows
          UNION ALL
          SELECT queue, type, error_type, state, coalesce(exhaustion, ''), 1 FROM new_rows) c
    GROUP BY 1, 2, 3, 4, 5
    HAVING sum(d) <> 0;
    RETURN NULL;
END $$;
-- +goose StatementEnd

WITH d AS (DELETE FROM redrive_record_count RETURNING *)
INSERT INTO redrive_record_count (queue, type, error_type, state, exhaustion, n)
SELECT queue, type, error_type, state, exhaustion, sum(n) FROM d GROUP BY 1, 2, 3, 4, 5 HAVING sum(n) <> 0;
ALTER TABLE redrive_record_count DROP COLUMN IF EXISTS fingerprint;
DROP TABLE IF EXISTS redrive_incident;
DROP INDEX CONCURRENTLY IF EXISTS redrive_record_fingerprint;
ALTER TABLE redrive_record DROP COLUMN IF EXISTS fingerprint;
