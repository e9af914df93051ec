-- name: SchemaGet :one
-- A schema source from the cache (schema.SchemaCache).
SELECT source FROM redrive_schema WHERE id = @id;

-- name: SchemaPut :exec
-- Schemas are immutable by id: the first source stored stays.
INSERT INTO redrive_schema (id, source) VALUES (@id, @source) ON CONFLICT (id) DO NOTHING;

-- name: DecodePending :many
-- Records awaiting decode after @after, in id order (the partial index
-- redrive_record_decode_pending).
SELECT id, key, value FROM redrive_record_data
WHERE decode_pending AND id > @after::uuid
ORDER BY id LIMIT @max_records;

-- name: DecodeSet :batchexec
-- A pending record decoded (or its decode failed): payload is the decoded
-- value's natural JSON while value_schema is set, else the value's own JSON
-- as ingest stored it.
UPDATE redrive_record_data SET
    value_schema = @value_schema, key_schema = @key_schema, key_payload = @key_payload,
    decode_error = @decode_error, decode_pending = false,
    payload = CASE WHEN @value_schema::jsonb IS NULL THEN payload ELSE @payload::jsonb END,
    payload_omitted = CASE WHEN @value_schema::jsonb IS NULL THEN payload_omitted ELSE @payload_omitted END
WHERE id = @id AND decode_pending;

-- name: SchemaRecent :many
-- The most recently stored schema sources, newest first, to warm a new
-- process's memory (schema.Registry.Warm). One row per schema: a small
-- table, sorted without an index.
SELECT source FROM redrive_schema ORDER BY stored_at DESC, id DESC LIMIT @max_schemas;
