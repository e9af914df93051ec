-- +goose Up
-- A job published over HTTP keeps the attributes of its envelope that
-- Redrive does not act on (OJS core §5.5: "Implementations MUST preserve any
-- attributes not defined by this specification when storing and returning
-- job data"): unknown ones, schema, tags. A JSON object, or NULL (a record
-- read from Kafka, or a job that sent none). Adding a nullable column without
-- a default changes only the catalog: no partition is rewritten.
ALTER TABLE redrive_record_data ADD COLUMN IF NOT EXISTS attributes jsonb;

-- +goose Down
ALTER TABLE redrive_record_data DROP COLUMN IF EXISTS attributes;
