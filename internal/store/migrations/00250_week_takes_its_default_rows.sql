-- +goose Up
-- A week's partitions could not be made while the DEFAULT partitions held
-- rows of that week (ATTACH checks them): stored before the week existed,
-- by a replica whose clock ran ahead or under ids of a clock moved back.
-- The pruner failed every pass from then on, and pruned nothing. Now the
-- week takes its rows with it. redrive_create_week as 00230 made it, and:
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_create_week(at timestamptz) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    week_at timestamptz := date_trunc('week', at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    end_at timestamptz := week_at + interval '7 days';
    first_id uuid := redrive_uuid_at(week_at);
    end_id uuid := redrive_uuid_at(end_at);
    week text := 'w' || to_char(week_at AT TIME ZONE 'UTC', 'YYYYMMDD');
    payload_ix regclass;
    moved boolean := false;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('redrive_partition', 0));
    IF EXISTS (SELECT 1 FROM redrive_partition p WHERE (p.lo IS NULL OR p.lo < end_id) AND p.hi > first_id) THEN
        RETURN false;
    END IF;
    -- The attaches lock each parent (SHARE UPDATE EXCLUSIVE) and its DEFAULT
    -- partition (exclusively). All four are taken first, the parents before
    -- the DEFAULT partitions, as a partition's DROP takes them (its parent,
    -- then the DEFAULT, whose constraint changes), and the lifecycle's
    -- before the wide rows' (the order of the view and of every statement):
    -- so that neither a drop nor a reader waits on this crosswise.
    LOCK TABLE ONLY redrive_lifecycle, ONLY redrive_record_data IN SHARE UPDATE EXCLUSIVE MODE;
    LOCK TABLE redrive_lifecycle_default, redrive_record_data_default IN ACCESS EXCLUSIVE MODE;
    -- Rows of the week already in the DEFAULT partitions (stored before the
    -- week was made: a replica's clock ahead, ids of a clock moved back)
    -- would fail the attaches' check: they leave for a temporary table and
    -- come back once the week is attached, both times through the parents,
    -- whose count triggers (statement triggers of the parent) count them out
    -- and in again.
    IF EXISTS (SELECT 1 FROM redrive_lifecycle_default WHERE id >= first_id AND id < end_id)
        OR EXISTS (SELECT 1 FROM redrive_record_data_default WHERE id >= first_id AND id < end_id) THEN
        moved := true;
        CREATE TEMP TABLE IF NOT EXISTS redrive_week_moved_lifecycle (LIKE redrive_lifecycle) ON COMMIT DROP;
        CREATE TEMP TABLE IF NOT EXISTS redrive_week_moved_data (LIKE redrive_record_data) ON COMMIT DROP;
        WITH d AS (DELETE FROM redrive_lifecycle WHERE id >= first_id AND id < end_id RETURNING *)
            INSERT INTO redrive_week_moved_lifecycle SELECT * FROM d;
        WITH d AS (DELETE FROM redrive_record_data WHERE id >= first_id AND id < end_id RETURNING *)
            INSERT INTO redrive_week_moved_data SELECT * FROM d;
    END IF;
    EXECUTE format('CREATE TABLE %I (LIKE redrive_lifecycle INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', 'redrive_lifecycle_' || week);
    EXECUTE format('ALTER TABLE redrive_lifecycle ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', 'redrive_lifecycle_' || week, first_id, end_id);
    EXECUTE format('CREATE TABLE %I (LIKE redrive_record_data INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', 'redrive_record_data_' || week);
    EXECUTE format('CREATE STATISTICS %I (dependencies) ON queue, type, error_type FROM %I', 'redrive_record_dims_' || week, 'redrive_record_data_' || week);
    EXECUTE format('ALTER TABLE redrive_record_data ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', 'redrive_record_data_' || week, first_id, end_id);
    SELECT i.inhrelid::regclass INTO payload_ix FROM pg_inherits i JOIN pg_index x ON x.indexrelid = i.inhrelid
        WHERE i.inhparent = 'redrive_record_payload'::regclass AND x.indrelid = format('%I', 'redrive_record_data_' || week)::regclass;
    EXECUTE format('ALTER INDEX %s SET (fastupdate = off)', payload_ix);
    IF moved THEN
        INSERT INTO redrive_lifecycle SELECT * FROM redrive_week_moved_lifecycle;
        INSERT INTO redrive_record_data SELECT * FROM redrive_week_moved_data;
        TRUNCATE redrive_week_moved_lifecycle, redrive_week_moved_data;
    END IF;
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
    payload_ix regclass;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('redrive_partition', 0));
    IF EXISTS (SELECT 1 FROM redrive_partition p WHERE (p.lo IS NULL OR p.lo < end_id) AND p.hi > first_id) THEN
        RETURN false;
    END IF;
    -- The attaches lock each parent (SHARE UPDATE EXCLUSIVE) and its DEFAULT
    -- partition (exclusively). All four are taken first, the parents before
    -- the DEFAULT partitions, as a partition's DROP takes them (its parent,
    -- then the DEFAULT, whose constraint changes), and the lifecycle's
    -- before the wide rows' (the order of the view and of every statement):
    -- so that neither a drop nor a reader waits on this crosswise.
    LOCK TABLE ONLY redrive_lifecycle, ONLY redrive_record_data IN SHARE UPDATE EXCLUSIVE MODE;
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
