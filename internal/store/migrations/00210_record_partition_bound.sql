-- +goose NO TRANSACTION
-- +goose Up
-- Time-partitioning the record tables, step 1 of 2 (00211 is step 2): the
-- id range the existing rows will keep as one old partition, checked before
-- any lock is held. Ids are UUIDv7: their first 48 bits are the millisecond
-- the record was stored, so "stored before T" is "id < redrive_uuid_at(T)".
--
-- The bound is the start (Monday 00:00 UTC) of the week after both now and
-- the newest stored id. The CHECK is added NOT VALID (a moment's lock, no
-- scan), then validated in a statement of its own, which scans the table
-- under a SHARE UPDATE EXCLUSIVE lock only: ingest, the scheduler and the
-- API keep working. 00211 then attaches the table as a partition with that
-- range, and Postgres skips its own scan because the valid CHECK implies it.

-- +goose StatementBegin
CREATE FUNCTION redrive_uuid_at(ts timestamptz) RETURNS uuid LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    -- The smallest UUID of ts's millisecond: the millisecond in the first
    -- 48 bits, every other bit zero.
    SELECT (lpad(to_hex(floor(extract(epoch FROM ts) * 1000)::bigint), 12, '0') || '00000000000000000000')::uuid
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION redrive_uuid_time(id uuid) RETURNS timestamptz LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    -- The millisecond a UUIDv7 was made in (its first 48 bits).
    SELECT to_timestamp((('x' || substr(replace(id::text, '-', ''), 1, 12))::bit(48)::bigint) / 1000.0)
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
DECLARE
    newest uuid := (SELECT id FROM redrive_lifecycle ORDER BY id DESC LIMIT 1);
    bound timestamptz := date_trunc('week', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' + interval '7 days';
BEGIN
    IF newest IS NOT NULL AND redrive_uuid_time(newest) >= bound THEN
        bound := date_trunc('week', redrive_uuid_time(newest) AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' + interval '7 days';
    END IF;
    EXECUTE format('ALTER TABLE redrive_record_data ADD CONSTRAINT redrive_record_data_old_bound CHECK (id < %L::uuid) NOT VALID',
        redrive_uuid_at(bound));
    EXECUTE format('ALTER TABLE redrive_lifecycle ADD CONSTRAINT redrive_lifecycle_old_bound CHECK (id < %L::uuid) NOT VALID',
        redrive_uuid_at(bound));
END $$;
-- +goose StatementEnd

ALTER TABLE redrive_record_data VALIDATE CONSTRAINT redrive_record_data_old_bound;
ALTER TABLE redrive_lifecycle VALIDATE CONSTRAINT redrive_lifecycle_old_bound;

-- +goose Down
ALTER TABLE redrive_lifecycle DROP CONSTRAINT IF EXISTS redrive_lifecycle_old_bound;
ALTER TABLE redrive_record_data DROP CONSTRAINT IF EXISTS redrive_record_data_old_bound;
DROP FUNCTION redrive_uuid_time(uuid);
DROP FUNCTION redrive_uuid_at(timestamptz);
