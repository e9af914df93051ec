-- +goose Up
-- The payload's GIN indexes (one per week, 00211) write each record's
-- entries into the index as it is stored (fastupdate off) instead of a
-- pending list merged later. A pending list is read whole by every search
-- of its index, in every week, for each containment a search holds (a
-- number is looked up as a number and as a string) and in each of a page's
-- statements; after a bulk load, or while ingest fills this week's list
-- (up to gin_pending_list_limit, 4 MB), that was most of a search's time:
-- 232 ms p50 for a customer id over 300,000 records whose lists autovacuum
-- had not merged yet, 18 ms once it had (docs/performance.md). Storing
-- costs about 10% more (the api suite's load of 300,000 records: 1m45s
-- with the lists, 1m56s without).
--
-- A partitioned index takes no storage parameter: each week's index is set
-- on its own, and redrive_create_week sets it on the weeks it makes. The
-- entries already pending are merged here (gin_clean_pending_list: at most
-- 4 MB per week's index).

-- +goose StatementBegin
DO $$
DECLARE ix regclass;
BEGIN
    FOR ix IN SELECT i.inhrelid::regclass FROM pg_inherits i WHERE i.inhparent = 'redrive_record_payload'::regclass LOOP
        EXECUTE format('ALTER INDEX %s SET (fastupdate = off)', ix);
        PERFORM gin_clean_pending_list(ix);
    END LOOP;
END $$;
-- +goose StatementEnd

-- redrive_create_week as 00211 made it, and the week's payload index set
-- to write its entries as they come.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_create_week(at timestamptz) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    week_at timestamptz := date_trunc('week', at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    end_at timestamptz := week_at + interval '7 days';
    first_id uuid := redrive_uuid_at(week_at);
    end_id uuid := redrive_uuid_at(end_at);
    week text := 'w' || to_char(week_at AT TIME ZONE 'UTC', 'YYYYMMDD');
    payload_ix regclass;
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
    SELECT i.inhrelid::regclass INTO payload_ix FROM pg_inherits i JOIN pg_index x ON x.indexrelid = i.inhrelid
        WHERE i.inhparent = 'redrive_record_payload'::regclass AND x.indrelid = format('%I', 'redrive_record_data_' || week)::regclass;
    EXECUTE format('ALTER INDEX %s SET (fastupdate = off)', payload_ix);
    INSERT INTO redrive_partition (name, lo, hi, hi_at) VALUES (week, first_id, end_id, end_at);
    RETURN true;
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_create_week(at timestamptz) RETURNS boolean LANGUAGE plpgsql AS $$
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

-- +goose StatementBegin
DO $$
DECLARE ix regclass;
BEGIN
    FOR ix IN SELECT i.inhrelid::regclass FROM pg_inherits i WHERE i.inhparent = 'redrive_record_payload'::regclass LOOP
        EXECUTE format('ALTER INDEX %s RESET (fastupdate)', ix);
    END LOOP;
END $$;
-- +goose StatementEnd
