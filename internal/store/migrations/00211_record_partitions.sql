-- +goose Up
-- Time-partitioning the record tables, step 2 of 2 (docs/operations.md,
-- "Partitioned record tables"). Both tables of a record (the wide row and
-- its lifecycle, 00180) become partitioned BY RANGE (id) with the same
-- bounds: one partition per week (Monday 00:00 UTC to the next, in UUIDv7
-- terms: redrive_uuid_at of each), created ahead by the pruner's pass, and a
-- DEFAULT partition for ids outside every week. A lookup by id reaches one
-- partition, each week has its own small indexes, and retention drops whole
-- weeks instead of deleting their rows.
--
-- A unique index of a partitioned table must contain the partition key, and
-- a re-consumed DLQ record gets a new id: ingest's idempotency moves to a
-- table of its own, redrive_record_coord (the DLQ coordinates → the record's
-- id), written in the same transaction as the rows.
--
-- A populated database keeps its rows where they are: the existing tables
-- are attached as one partition each ("old", every id below the bound 00210
-- validated), so the attach scans nothing; their coordinates are copied
-- into redrive_record_coord. New weeks go to new partitions, and the old one
-- is dropped as a whole once none of its records is needed any more. An
-- empty database (a new installation) simply starts partitioned.
--
-- One transaction; it locks the record tables (ingest, the scheduler and the
-- API wait) for the copy of the coordinates, about 1.5 s per million records
-- (docs/operations.md gives the measurements).

-- The weeks Redrive created, and the old partition: what the pruner may drop.
CREATE TABLE redrive_partition (
    name       text        PRIMARY KEY,       -- the partitions' suffix: w20261123 (the week's Monday), or old
    lo         uuid,                          -- first id of the range; NULL: every id below hi (the old partition)
    hi         uuid        NOT NULL,          -- first id after it
    hi_at      timestamptz NOT NULL,          -- the time of hi: every record of it was stored before
    created_at timestamptz NOT NULL DEFAULT now(),
    dropped_at timestamptz                    -- dropped; the row goes once its coordinates are removed
);

-- Ingest's idempotency: a DLQ record (coordinates and timestamp) is stored
-- once. Written with the record; deleted with it.
CREATE TABLE redrive_record_coord (
    dlq_topic     text        NOT NULL,
    dlq_partition integer     NOT NULL,
    dlq_offset    bigint      NOT NULL,
    dlq_timestamp timestamptz NOT NULL,
    id            uuid        NOT NULL,
    CONSTRAINT redrive_record_coord_pkey PRIMARY KEY (dlq_topic, dlq_partition, dlq_offset, dlq_timestamp)
);
CREATE INDEX redrive_record_coord_id ON redrive_record_coord (id);

DROP VIEW redrive_record;

-- The existing tables become the old partitions; their indexes get the
-- suffix _old, so the parents' indexes keep the names they had.
ALTER TABLE redrive_record_data RENAME TO redrive_record_data_old;
ALTER TABLE redrive_lifecycle RENAME TO redrive_lifecycle_old;
DROP INDEX redrive_record_dlq_identity;
ALTER STATISTICS redrive_record_dims RENAME TO redrive_record_dims_old;
DROP TRIGGER redrive_record_count_ins ON redrive_lifecycle_old;
DROP TRIGGER redrive_record_count_del ON redrive_lifecycle_old;
DROP TRIGGER redrive_record_count_upd ON redrive_lifecycle_old;

-- +goose StatementBegin
DO $$
DECLARE ix text;
BEGIN
    FOR ix IN SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE i.indrelid IN ('redrive_record_data_old'::regclass, 'redrive_lifecycle_old'::regclass)
    LOOP
        EXECUTE format('ALTER INDEX %I RENAME TO %I', ix, ix || '_old');
    END LOOP;
END $$;
-- +goose StatementEnd

CREATE TABLE redrive_record_data (LIKE redrive_record_data_old INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY RANGE (id);
ALTER TABLE redrive_record_data DROP CONSTRAINT redrive_record_data_old_bound;
ALTER TABLE redrive_record_data ADD CONSTRAINT redrive_record_pkey PRIMARY KEY (id);
CREATE INDEX redrive_record_created_at ON redrive_record_data (created_at);
CREATE INDEX redrive_record_decode_pending ON redrive_record_data (id) WHERE decode_pending;
CREATE INDEX redrive_record_error_type_id ON redrive_record_data (error_type, id);
CREATE INDEX redrive_record_failed_at ON redrive_record_data (queue, failed_at, id);
CREATE INDEX redrive_record_fingerprint ON redrive_record_data (fingerprint, id);
CREATE INDEX redrive_record_key_prefix ON redrive_record_data (substring(key FROM 1 FOR 1024), id);
CREATE INDEX redrive_record_payload ON redrive_record_data USING gin (payload jsonb_path_ops);
CREATE INDEX redrive_record_queue_created ON redrive_record_data (queue, created_at);
CREATE INDEX redrive_record_queue_id ON redrive_record_data (queue, id);
CREATE INDEX redrive_record_type_id ON redrive_record_data (type, id);
-- The planner estimates a scan of the parent from each partition's own
-- statistics: every data partition gets the dependencies 00172 made (the
-- parent's serve a query's estimate over the whole table).
CREATE STATISTICS redrive_record_dims (dependencies) ON queue, type, error_type FROM redrive_record_data;

CREATE TABLE redrive_lifecycle (LIKE redrive_lifecycle_old INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY RANGE (id);
ALTER TABLE redrive_lifecycle DROP CONSTRAINT redrive_lifecycle_old_bound;
ALTER TABLE redrive_lifecycle ADD CONSTRAINT redrive_lifecycle_pkey PRIMARY KEY (id);
CREATE INDEX redrive_lifecycle_state_id ON redrive_lifecycle (state, id);
CREATE INDEX redrive_lifecycle_exhaustion_id ON redrive_lifecycle (exhaustion, id) WHERE exhaustion IS NOT NULL;
CREATE INDEX redrive_lifecycle_attempt ON redrive_lifecycle (queue, attempt, id);
CREATE INDEX redrive_lifecycle_next_retry ON redrive_lifecycle (queue, next_retry_at, id) WHERE next_retry_at IS NOT NULL;
CREATE INDEX redrive_lifecycle_waiting ON redrive_lifecycle (queue, id) WHERE state = 'retryable';
CREATE INDEX redrive_lifecycle_discarded ON redrive_lifecycle (queue, exhaustion, discarded_at) WHERE state = 'discarded';
CREATE INDEX redrive_lifecycle_completed ON redrive_lifecycle (queue, completed_at) WHERE state = 'completed';
CREATE INDEX redrive_lifecycle_ack_due ON redrive_lifecycle (ack_due_at)
    WHERE state = 'available' AND ack_due_at IS NOT NULL AND unacknowledged_at IS NULL;
CREATE INDEX redrive_lifecycle_unacknowledged ON redrive_lifecycle (queue) WHERE state = 'available' AND unacknowledged_at IS NOT NULL;
CREATE INDEX redrive_lifecycle_blocked ON redrive_lifecycle (queue) WHERE redelivery_failure IS NOT NULL;
CREATE INDEX redrive_lifecycle_archive_due ON redrive_lifecycle ((coalesce(archive_retry_at, '-infinity'::timestamptz)))
    WHERE archive_state IN ('pending', 'failed');
CREATE INDEX redrive_lifecycle_fetch_due ON redrive_lifecycle (queue, fetch_at) WHERE fetch_at IS NOT NULL;
CREATE INDEX redrive_lifecycle_lease ON redrive_lifecycle (lease_until) WHERE lease_until IS NOT NULL;

-- The statistics triggers on the parent: a statement on it sees the rows of
-- every partition in its transition tables (PostgreSQL 13 and later). A
-- dropped partition fires nothing: the pruner subtracts its counts itself.
CREATE TRIGGER redrive_record_count_ins AFTER INSERT ON redrive_lifecycle
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION redrive_record_count_ins();
CREATE TRIGGER redrive_record_count_del AFTER DELETE ON redrive_lifecycle
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION redrive_record_count_del();
CREATE TRIGGER redrive_record_count_upd AFTER UPDATE ON redrive_lifecycle
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION redrive_record_count_upd();

CREATE TABLE redrive_record_data_default PARTITION OF redrive_record_data DEFAULT;
CREATE STATISTICS redrive_record_dims_default (dependencies) ON queue, type, error_type FROM redrive_record_data_default;
CREATE TABLE redrive_lifecycle_default PARTITION OF redrive_lifecycle DEFAULT;

-- redrive_create_week creates the partitions of the week holding at (both
-- tables, the same bounds) unless the registry has a partition overlapping
-- it, and says whether it did. Concurrent callers queue on an advisory lock.
-- A partition is made as a table of its own and then attached, which locks
-- the parents less than CREATE … PARTITION OF; the attach scans the DEFAULT
-- partition for rows of the week (none, when weeks are made ahead).
-- +goose StatementBegin
CREATE FUNCTION redrive_create_week(at timestamptz) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    week_at timestamptz := date_trunc('week', at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    end_at timestamptz := week_at + interval '7 days';
    first_id uuid := redrive_uuid_at(week_at);
    end_id uuid := redrive_uuid_at(end_at);
    week text := 'w' || to_char(week_at AT TIME ZONE 'UTC', 'YYYYMMDD');
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('redrive_partition', 0));
    IF EXISTS (SELECT 1 FROM redrive_partition p WHERE (p.lo IS NULL OR p.lo < end_id) AND p.hi > first_id) THEN
        RETURN false;
    END IF;
    -- The attaches lock the DEFAULT partitions exclusively: both are taken
    -- first, the lifecycle's before the wide rows' (the order of the view
    -- and of every statement), so that no reader waits on this crosswise.
    LOCK TABLE redrive_lifecycle_default, redrive_record_data_default IN ACCESS EXCLUSIVE MODE;
    EXECUTE format('CREATE TABLE %I (LIKE redrive_lifecycle INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', 'redrive_lifecycle_' || week);
    EXECUTE format('ALTER TABLE redrive_lifecycle ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', 'redrive_lifecycle_' || week, first_id, end_id);
    EXECUTE format('CREATE TABLE %I (LIKE redrive_record_data INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', 'redrive_record_data_' || week);
    EXECUTE format('CREATE STATISTICS %I (dependencies) ON queue, type, error_type FROM %I', 'redrive_record_dims_' || week, 'redrive_record_data_' || week);
    EXECUTE format('ALTER TABLE redrive_record_data ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', 'redrive_record_data_' || week, first_id, end_id);
    INSERT INTO redrive_partition (name, lo, hi, hi_at) VALUES (week, first_id, end_id, end_at);
    RETURN true;
END $$;
-- +goose StatementEnd

-- redrive_drop_partition drops both partitions of a registered range (the
-- caller has checked that none of their records is needed and subtracted
-- them from the statistics, in the same transaction) and marks it dropped.
-- +goose StatementBegin
CREATE FUNCTION redrive_drop_partition(part text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM redrive_partition WHERE name = part AND dropped_at IS NULL) THEN
        RAISE EXCEPTION 'partition % is not a live registered partition', part;
    END IF;
    EXECUTE format('DROP TABLE %I', 'redrive_lifecycle_' || part);
    EXECUTE format('DROP TABLE %I', 'redrive_record_data_' || part);
    UPDATE redrive_partition SET dropped_at = now() WHERE name = part;
END $$;
-- +goose StatementEnd

-- redrive_lock_partition locks both partitions of a registered range
-- against writes (SHARE: reads go on) until the transaction ends, so that
-- what the pruner reads of it stays true until it drops it.
-- +goose StatementBegin
CREATE FUNCTION redrive_lock_partition(part text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM redrive_partition WHERE name = part AND dropped_at IS NULL) THEN
        RAISE EXCEPTION 'partition % is not a live registered partition', part;
    END IF;
    EXECUTE format('LOCK TABLE %I, %I IN SHARE MODE', 'redrive_lifecycle_' || part, 'redrive_record_data_' || part);
END $$;
-- +goose StatementEnd

-- The existing rows: attached as the old partition (the CHECK 00210
-- validated implies its range, so nothing is scanned), or, in an empty
-- database, dropped.
-- +goose StatementBegin
DO $$
DECLARE
    bound uuid;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM redrive_lifecycle_old) AND NOT EXISTS (SELECT 1 FROM redrive_record_data_old) THEN
        DROP TABLE redrive_lifecycle_old;
        DROP TABLE redrive_record_data_old;
    ELSE
        bound := substring(pg_get_constraintdef((SELECT oid FROM pg_constraint
            WHERE conname = 'redrive_lifecycle_old_bound' AND conrelid = 'redrive_lifecycle_old'::regclass)) FROM '''([0-9a-f-]{36})''')::uuid;
        EXECUTE format('ALTER TABLE redrive_record_data ATTACH PARTITION redrive_record_data_old FOR VALUES FROM (MINVALUE) TO (%L)', bound);
        EXECUTE format('ALTER TABLE redrive_lifecycle ATTACH PARTITION redrive_lifecycle_old FOR VALUES FROM (MINVALUE) TO (%L)', bound);
        ALTER TABLE redrive_record_data_old DROP CONSTRAINT redrive_record_data_old_bound;
        ALTER TABLE redrive_lifecycle_old DROP CONSTRAINT redrive_lifecycle_old_bound;
        INSERT INTO redrive_partition (name, lo, hi, hi_at) VALUES ('old', NULL, bound, redrive_uuid_time(bound));
        INSERT INTO redrive_record_coord (dlq_topic, dlq_partition, dlq_offset, dlq_timestamp, id)
        SELECT dlq_topic, dlq_partition, dlq_offset, dlq_timestamp, id FROM redrive_record_data_old;
    END IF;
    -- This week and the next four (a week the old partition covers is skipped).
    FOR i IN 0..4 LOOP
        PERFORM redrive_create_week(now() + i * interval '7 days');
    END LOOP;
END $$;
-- +goose StatementEnd

-- The record as it was (00180), over the partitioned tables.
CREATE VIEW redrive_record AS
SELECT d.id, d.queue, d.type, l.state, l.exhaustion, l.attempt, d.max_attempts,
    d.source_partition, d.source_offset, d.source_timestamp, d.source_group,
    d.dlq_topic, d.dlq_partition, d.dlq_offset, d.format, d.key, d.value, d.headers, d.payload,
    d.error_type, d.errors, d.retry, d.meta, d.created_at, l.enqueued_at, l.next_retry_at,
    l.discarded_at, l.completed_at, l.updated_at, l.redelivered_at, d.redelivery, l.archived_at,
    l.claim_token, l.redelivery_failure, l.archive_state, l.archive_reason, l.archive_failure,
    l.archive_retry_at, l.archive_token, d.dlq_timestamp, d.fingerprint, d.payload_omitted, d.failed_at,
    l.completed_by, l.ack_due_at, l.unacknowledged_at, d.value_schema, d.key_schema, d.key_payload,
    d.decode_error, d.decode_pending, l.fetch_at, l.lease_until, l.worker_id, l.result,
    l.queue AS lifecycle_queue
FROM redrive_lifecycle l JOIN redrive_record_data d ON d.id = l.id;

ANALYZE redrive_record_coord;

-- +goose Down
-- Back to two plain tables (every row copied, under the same lock as Up,
-- for longer: the indexes are built again).
DROP VIEW redrive_record;
CREATE TABLE redrive_record_data_flat (LIKE redrive_record_data INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
INSERT INTO redrive_record_data_flat SELECT * FROM redrive_record_data;
CREATE TABLE redrive_lifecycle_flat (LIKE redrive_lifecycle INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
INSERT INTO redrive_lifecycle_flat SELECT * FROM redrive_lifecycle;
DROP TABLE redrive_record_data;
DROP TABLE redrive_lifecycle;
DROP FUNCTION redrive_drop_partition(text);
DROP FUNCTION redrive_lock_partition(text);
DROP FUNCTION redrive_create_week(timestamptz);
DROP TABLE redrive_partition;
DROP TABLE redrive_record_coord;
ALTER TABLE redrive_record_data_flat RENAME TO redrive_record_data;
ALTER TABLE redrive_lifecycle_flat RENAME TO redrive_lifecycle;
ALTER TABLE redrive_record_data ADD CONSTRAINT redrive_record_pkey PRIMARY KEY (id);
CREATE UNIQUE INDEX redrive_record_dlq_identity ON redrive_record_data (dlq_topic, dlq_partition, dlq_offset, dlq_timestamp);
CREATE INDEX redrive_record_created_at ON redrive_record_data (created_at);
CREATE INDEX redrive_record_decode_pending ON redrive_record_data (id) WHERE decode_pending;
CREATE INDEX redrive_record_error_type_id ON redrive_record_data (error_type, id);
CREATE INDEX redrive_record_failed_at ON redrive_record_data (queue, failed_at, id);
CREATE INDEX redrive_record_fingerprint ON redrive_record_data (fingerprint, id);
CREATE INDEX redrive_record_key_prefix ON redrive_record_data (substring(key FROM 1 FOR 1024), id);
CREATE INDEX redrive_record_payload ON redrive_record_data USING gin (payload jsonb_path_ops);
CREATE INDEX redrive_record_queue_created ON redrive_record_data (queue, created_at);
CREATE INDEX redrive_record_queue_id ON redrive_record_data (queue, id);
CREATE INDEX redrive_record_type_id ON redrive_record_data (type, id);
CREATE STATISTICS redrive_record_dims (dependencies) ON queue, type, error_type FROM redrive_record_data;
ALTER TABLE redrive_lifecycle ADD CONSTRAINT redrive_lifecycle_pkey PRIMARY KEY (id);
CREATE INDEX redrive_lifecycle_state_id ON redrive_lifecycle (state, id);
CREATE INDEX redrive_lifecycle_exhaustion_id ON redrive_lifecycle (exhaustion, id) WHERE exhaustion IS NOT NULL;
CREATE INDEX redrive_lifecycle_attempt ON redrive_lifecycle (queue, attempt, id);
CREATE INDEX redrive_lifecycle_next_retry ON redrive_lifecycle (queue, next_retry_at, id) WHERE next_retry_at IS NOT NULL;
CREATE INDEX redrive_lifecycle_waiting ON redrive_lifecycle (queue, id) WHERE state = 'retryable';
CREATE INDEX redrive_lifecycle_discarded ON redrive_lifecycle (queue, exhaustion, discarded_at) WHERE state = 'discarded';
CREATE INDEX redrive_lifecycle_completed ON redrive_lifecycle (queue, completed_at) WHERE state = 'completed';
CREATE INDEX redrive_lifecycle_ack_due ON redrive_lifecycle (ack_due_at)
    WHERE state = 'available' AND ack_due_at IS NOT NULL AND unacknowledged_at IS NULL;
CREATE INDEX redrive_lifecycle_unacknowledged ON redrive_lifecycle (queue) WHERE state = 'available' AND unacknowledged_at IS NOT NULL;
CREATE INDEX redrive_lifecycle_blocked ON redrive_lifecycle (queue) WHERE redelivery_failure IS NOT NULL;
CREATE INDEX redrive_lifecycle_archive_due ON redrive_lifecycle ((coalesce(archive_retry_at, '-infinity'::timestamptz)))
    WHERE archive_state IN ('pending', 'failed');
CREATE INDEX redrive_lifecycle_fetch_due ON redrive_lifecycle (queue, fetch_at) WHERE fetch_at IS NOT NULL;
CREATE INDEX redrive_lifecycle_lease ON redrive_lifecycle (lease_until) WHERE lease_until IS NOT NULL;
CREATE TRIGGER redrive_record_count_ins AFTER INSERT ON redrive_lifecycle
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION redrive_record_count_ins();
CREATE TRIGGER redrive_record_count_del AFTER DELETE ON redrive_lifecycle
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION redrive_record_count_del();
CREATE TRIGGER redrive_record_count_upd AFTER UPDATE ON redrive_lifecycle
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION redrive_record_count_upd();
CREATE VIEW redrive_record AS
SELECT d.id, d.queue, d.type, l.state, l.exhaustion, l.attempt, d.max_attempts,
    d.source_partition, d.source_offset, d.source_timestamp, d.source_group,
    d.dlq_topic, d.dlq_partition, d.dlq_offset, d.format, d.key, d.value, d.headers, d.payload,
    d.error_type, d.errors, d.retry, d.meta, d.created_at, l.enqueued_at, l.next_retry_at,
    l.discarded_at, l.completed_at, l.updated_at, l.redelivered_at, d.redelivery, l.archived_at,
    l.claim_token, l.redelivery_failure, l.archive_state, l.archive_reason, l.archive_failure,
    l.archive_retry_at, l.archive_token, d.dlq_timestamp, d.fingerprint, d.payload_omitted, d.failed_at,
    l.completed_by, l.ack_due_at, l.unacknowledged_at, d.value_schema, d.key_schema, d.key_payload,
    d.decode_error, d.decode_pending, l.fetch_at, l.lease_until, l.worker_id, l.result,
    l.queue AS lifecycle_queue
FROM redrive_lifecycle l JOIN redrive_record_data d ON d.id = l.id;
-- 00210's bound constraints, which its Down drops.
ALTER TABLE redrive_record_data ADD CONSTRAINT redrive_record_data_old_bound CHECK (id IS NOT NULL) NOT VALID;
ALTER TABLE redrive_lifecycle ADD CONSTRAINT redrive_lifecycle_old_bound CHECK (id IS NOT NULL) NOT VALID;
