-- +goose Up
-- Queue capacity (max_size_bytes): the statistics table also sums the bytes
-- of each group's records (key plus value, as read from Kafka), kept by the
-- same statement-level triggers, so that a topic's size in records and in
-- bytes is read from a few rows of redrive_record_count, never counted.
ALTER TABLE redrive_record_count ADD COLUMN IF NOT EXISTS bytes bigint NOT NULL DEFAULT 0;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_record_count_ins() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO redrive_record_count (queue, type, error_type, state, exhaustion, fingerprint, n, bytes)
    SELECT queue, type, error_type, state, coalesce(exhaustion, ''), fingerprint, count(*),
           sum(octet_length(coalesce(key, ''::bytea)) + octet_length(coalesce(value, ''::bytea)))
    FROM new_rows GROUP BY 1, 2, 3, 4, 5, 6;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_record_count_del() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO redrive_record_count (queue, type, error_type, state, exhaustion, fingerprint, n, bytes)
    SELECT queue, type, error_type, state, coalesce(exhaustion, ''), fingerprint, -count(*),
           -sum(octet_length(coalesce(key, ''::bytea)) + octet_length(coalesce(value, ''::bytea)))
    FROM old_rows GROUP BY 1, 2, 3, 4, 5, 6;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_record_count_upd() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO redrive_record_count (queue, type, error_type, state, exhaustion, fingerprint, n, bytes)
    SELECT queue, type, error_type, state, exhaustion, fingerprint, sum(d), sum(b)
    FROM (SELECT queue, type, error_type, state, coalesce(exhaustion, '') AS exhaustion, fingerprint, -1 AS d,
                 -(octet_length(coalesce(key, ''::bytea)) + octet_length(coalesce(value, ''::bytea)))::bigint AS b FROM old_rows
          UNION ALL
          SELECT queue, type, error_type, state, coalesce(exhaustion, ''), fingerprint, 1,
                 (octet_length(coalesce(key, ''::bytea)) + octet_length(coalesce(value, ''::bytea)))::bigint FROM new_rows) c
    GROUP BY 1, 2, 3, 4, 5, 6
    HAVING sum(d) <> 0 OR sum(b) <> 0;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- The rows already counted get their bytes: the table is recounted from the
-- records, writers held off until the migration commits.
LOCK TABLE redrive_record IN SHARE MODE;
DELETE FROM redrive_record_count;
INSERT INTO redrive_record_count (queue, type, error_type, state, exhaustion, fingerprint, n, bytes)
SELECT queue, type, error_type, state, coalesce(exhaustion, ''), fingerprint, count(*),
       sum(octet_length(coalesce(key, ''::bytea)) + octet_length(coalesce(value, ''::bytea)))
FROM redrive_record GROUP BY 1, 2, 3, 4, 5, 6;

-- +goose Down
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

ALTER TABLE redrive_record_count DROP COLUMN IF EXISTS bytes;
