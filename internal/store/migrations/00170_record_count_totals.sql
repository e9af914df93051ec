-- +goose Up
-- Statistics that stay flat however many records are stored. The triggers of
-- 00010/00040 append each statement's net effect to redrive_record_count and
-- a compaction folds it every few seconds; but the folded rows were written
-- back into the same table, at its end, behind every row it had ever held:
-- its heap grew with the number of statements ever run (about 400,000 rows
-- for five million records loaded in batches of 10,000), and every read of
-- the statistics scanned it all.
--
-- Now the folded totals live in their own table, one row per dimension
-- tuple, updated in place by the compaction alone (HOT updates: n is in no
-- index, and fillfactor leaves room on each page), and the triggers append to
-- a table of pending deltas that the compaction drains (and vacuums when it
-- drained many). redrive_record_count becomes a view over both, so every
-- reader (stats, incidents, list totals, queue depths) reads
-- totals + pending deltas: a few hundred rows, whatever the record count.
--
-- Runs in a transaction: the statistics tables are small, and ingest (whose
-- triggers append to them) waits for the few milliseconds it takes.

ALTER TABLE redrive_record_count RENAME TO redrive_record_count_delta;
-- Pending deltas are read whole (a compaction interval's worth), never by index.
DROP INDEX redrive_record_count_dims;
-- Deltas are deleted by every compaction: let autovacuum follow closely too
-- (the compaction vacuums the table itself after draining many rows).
ALTER TABLE redrive_record_count_delta SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);

CREATE TABLE redrive_record_count_total (
    queue       text   NOT NULL,
    type        text   NOT NULL,
    error_type  text   NOT NULL,
    state       text   NOT NULL,
    exhaustion  text   NOT NULL, -- '' when NULL
    fingerprint text   NOT NULL,
    n           bigint NOT NULL,
    bytes       bigint NOT NULL DEFAULT 0, -- key plus value (00151: queue capacity)
    PRIMARY KEY (queue, state, exhaustion, type, error_type, fingerprint)
) WITH (fillfactor = 50);

INSERT INTO redrive_record_count_total (queue, type, error_type, state, exhaustion, fingerprint, n, bytes)
SELECT queue, type, error_type, state, exhaustion, fingerprint, sum(n), sum(bytes)
FROM redrive_record_count_delta GROUP BY 1, 2, 3, 4, 5, 6 HAVING sum(n) <> 0 OR sum(bytes) <> 0;
TRUNCATE redrive_record_count_delta;

-- What every reader reads: the folded totals and the deltas not folded yet.
CREATE VIEW redrive_record_count AS
SELECT queue, type, error_type, state, exhaustion, fingerprint, n, bytes FROM redrive_record_count_total
UNION ALL
SELECT queue, type, error_type, state, exhaustion, fingerprint, n, bytes FROM redrive_record_count_delta;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_record_count_ins() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO redrive_record_count_delta (queue, type, error_type, state, exhaustion, fingerprint, n, bytes)
    SELECT queue, type, error_type, state, coalesce(exhaustion, ''), fingerprint, count(*),
           sum(octet_length(coalesce(key, ''::bytea)) + octet_length(coalesce(value, ''::bytea)))
    FROM new_rows GROUP BY 1, 2, 3, 4, 5, 6;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_record_count_del() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO redrive_record_count_delta (queue, type, error_type, state, exhaustion, fingerprint, n, bytes)
    SELECT queue, type, error_type, state, coalesce(exhaustion, ''), fingerprint, -count(*),
           -sum(octet_length(coalesce(key, ''::bytea)) + octet_length(coalesce(value, ''::bytea)))
    FROM old_rows GROUP BY 1, 2, 3, 4, 5, 6;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_record_count_upd() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO redrive_record_count_delta (queue, type, error_type, state, exhaustion, fingerprint, n, bytes)
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

-- +goose Down
DROP VIEW redrive_record_count;
INSERT INTO redrive_record_count_delta (queue, type, error_type, state, exhaustion, fingerprint, n, bytes)
SELECT queue, type, error_type, state, exhaustion, fingerprint, n, bytes FROM redrive_record_count_total;
DROP TABLE redrive_record_count_total;
ALTER TABLE redrive_record_count_delta RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold);
ALTER TABLE redrive_record_count_delta RENAME TO redrive_record_count;
CREATE INDEX redrive_record_count_dims ON redrive_record_count (queue, state);

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
