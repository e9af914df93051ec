-- +goose NO TRANSACTION
-- +goose Up
-- Schema Registry payloads (docs/schema-registry.md). A value or key in the
-- Confluent wire format is decoded at ingest with the schemas Redrive holds;
-- one whose schema it does not hold yet is stored raw, marked pending, and
-- decoded in the background. Every step can be run again; the index is built
-- CONCURRENTLY so that upgrading a large table never blocks ingest.

-- Schemas by registry id, as self-contained sources (the schema text and
-- the texts of everything it references): schemas are immutable by id, so
-- a row never goes stale, and known schemas decode while the registry is
-- unreachable, across restarts.
CREATE TABLE IF NOT EXISTS redrive_schema (
    id integer PRIMARY KEY,
    source jsonb NOT NULL,
    stored_at timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE redrive_record
    -- How the value was decoded: {registry_id, type, subject, message}; NULL
    -- when it was not (not in the wire format, not yet, or it failed). While
    -- it is set, payload is the decoded value's natural JSON.
    ADD COLUMN IF NOT EXISTS value_schema jsonb,
    -- How the key was decoded, and the key's natural JSON.
    ADD COLUMN IF NOT EXISTS key_schema jsonb,
    ADD COLUMN IF NOT EXISTS key_payload jsonb,
    -- Why a value or key in the wire format could not be decoded.
    ADD COLUMN IF NOT EXISTS decode_error text,
    -- The value or key waits for its schema to be fetched (background decoder).
    ADD COLUMN IF NOT EXISTS decode_pending boolean NOT NULL DEFAULT false;

-- The background decoder finds the records awaiting decode, in id order.
CREATE INDEX CONCURRENTLY IF NOT EXISTS redrive_record_decode_pending
    ON redrive_record (id) WHERE decode_pending;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS redrive_record_decode_pending;
ALTER TABLE redrive_record
    DROP COLUMN IF EXISTS decode_pending,
    DROP COLUMN IF EXISTS decode_error,
    DROP COLUMN IF EXISTS key_payload,
    DROP COLUMN IF EXISTS key_schema,
    DROP COLUMN IF EXISTS value_schema;
DROP TABLE IF EXISTS redrive_schema;
