-- +goose NO TRANSACTION
-- +goose Up
-- Ingest never stops for one record (issue 17). Indexes are built
-- CONCURRENTLY so that upgrading a large table never blocks ingest; every
-- step can be run again.

-- Why a JSON value has no payload (the jsonb copy that path filters search):
-- nested too deep, a NUL character, or a value Postgres's jsonb refused
-- (a number beyond numeric's range, a lone surrogate escape). NULL when the
-- value is stored as jsonb, or is not JSON at all. The value itself is always
-- kept byte for byte.
ALTER TABLE redrive_record ADD COLUMN IF NOT EXISTS payload_omitted text;

-- A B-tree entry holds at most ~2.7 kB, and a record key is whatever the
-- producer sent (up to Kafka's message size): a 3,000-byte key failed the
-- whole batch's COPY. The index keeps the key's first 1,024 bytes instead
-- (the whole key, for any key of a sane size); the key filter compares the
-- prefix, then the key itself. A prefix, not a hash: every update that
-- cannot be HOT recomputes the index's expression, and a prefix costs what
-- the plain key did (sha256 made such updates about a third slower).
CREATE INDEX CONCURRENTLY IF NOT EXISTS redrive_record_key_prefix ON redrive_record (substring(key from 1 for 1024), id);
DROP INDEX CONCURRENTLY IF EXISTS redrive_record_key;

-- +goose Down
-- Fails if a stored key is too long for a B-tree entry: delete such records first.
CREATE INDEX CONCURRENTLY IF NOT EXISTS redrive_record_key ON redrive_record (key, id);
DROP INDEX CONCURRENTLY IF EXISTS redrive_record_key_prefix;
ALTER TABLE redrive_record DROP COLUMN IF EXISTS payload_omitted;
