-- +goose Up
-- Making a week took the DEFAULT partitions before the parents (which its
-- attaches lock), and dropping a partition takes its parent before the
-- DEFAULT partition: a week made while another was dropped could deadlock
-- with the drop (TestAWeekIsMadeWhileAPartitionIsDropped).
-- redrive_create_week as 00220 made it, with the parents locked first.
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
