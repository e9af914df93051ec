-- +goose Up
-- Dropping a week's partitions locked both parent tables in one transaction.
-- Statements lock the two parents in either order (a cached plan locks its
-- range table in order: the view's lifecycle first, a claim's wide rows
-- first), so a drop holding one parent and waiting for the other could wait
-- on a statement waiting on the drop. The drop now takes one parent per
-- transaction: the wide rows' partition first (the records leave the view,
-- which joins both), then the lifecycle's (docs/operations.md, "Partitioned
-- record tables"). Each function takes what is left, so a drop stopped
-- between the two (a crash) is finished by the next pass.

-- redrive_drop_partition_data drops the wide rows' partition of a
-- registered range, if it is still there.
-- +goose StatementBegin
CREATE FUNCTION redrive_drop_partition_data(part text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM redrive_partition WHERE name = part AND dropped_at IS NULL) THEN
        RAISE EXCEPTION 'partition % is not a live registered partition', part;
    END IF;
    EXECUTE format('DROP TABLE IF EXISTS %I', 'redrive_record_data_' || part);
END $$;
-- +goose StatementEnd

-- redrive_drop_partition drops what is left of a registered range (its
-- lifecycle partition, and its wide rows' if still there) and marks it
-- dropped.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_drop_partition(part text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM redrive_partition WHERE name = part AND dropped_at IS NULL) THEN
        RAISE EXCEPTION 'partition % is not a live registered partition', part;
    END IF;
    EXECUTE format('DROP TABLE IF EXISTS %I', 'redrive_lifecycle_' || part);
    EXECUTE format('DROP TABLE IF EXISTS %I', 'redrive_record_data_' || part);
    UPDATE redrive_partition SET dropped_at = now() WHERE name = part;
END $$;
-- +goose StatementEnd

-- redrive_lock_partition locks what is left of a registered range against
-- writes (SHARE: reads go on) until the transaction ends.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_lock_partition(part text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    t regclass;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM redrive_partition WHERE name = part AND dropped_at IS NULL) THEN
        RAISE EXCEPTION 'partition % is not a live registered partition', part;
    END IF;
    FOREACH t IN ARRAY ARRAY[to_regclass(format('%I', 'redrive_lifecycle_' || part)), to_regclass(format('%I', 'redrive_record_data_' || part))] LOOP
        IF t IS NOT NULL THEN
            EXECUTE format('LOCK TABLE %s IN SHARE MODE', t);
        END IF;
    END LOOP;
END $$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION redrive_drop_partition_data(text);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_drop_partition(part text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM redrive_partition WHERE name = part AND dropped_at IS NULL) THEN
        RAISE EXCEPTION 'partition % is not a live registered partition', part;
    END IF;
    EXECUTE format('DROP TABLE %I', 'redrive_lifecycle_' || part);
    EXECUTE format('DROP TABLE %I', 'redrive_record_data_' || part);
    UPDATE redrive_partition SET dropped_at = now() WHERE name = part;
END $$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_lock_partition(part text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM redrive_partition WHERE name = part AND dropped_at IS NULL) THEN
        RAISE EXCEPTION 'partition % is not a live registered partition', part;
    END IF;
    EXECUTE format('LOCK TABLE %I, %I IN SHARE MODE', 'redrive_lifecycle_' || part, 'redrive_record_data_' || part);
END $$;
-- +goose StatementEnd
