-- +goose Up
-- One row per dead-letter record. A record is created by the first failure of a
-- source record; repeat failures of its redeliveries join it (errors appended).
CREATE TABLE redrive_record (
    id               uuid        PRIMARY KEY,  -- UUIDv7: time-ordered, the keyset for listing
    queue            text        NOT NULL,     -- source topic (the DLQ topic for unparseable records)
    type             text        NOT NULL DEFAULT '',
    state            text        NOT NULL CHECK (state IN ('retryable', 'available', 'completed', 'discarded')),
    exhaustion       text        CHECK (exhaustion IN ('dead_letter', 'discard')),
    attempt          integer     NOT NULL,
    max_attempts     integer     NOT NULL,
    source_partition integer     NOT NULL,     -- -1 when unknown
    source_offset    bigint      NOT NULL,     -- -1 when unknown
    source_timestamp timestamptz,
    source_group     text        NOT NULL DEFAULT '',
    dlq_topic        text        NOT NULL,
    dlq_partition    integer     NOT NULL,
    dlq_offset       bigint      NOT NULL,
    format           text        NOT NULL,
    key              bytea,
    value            bytea,
    headers          jsonb       NOT NULL DEFAULT '[]',  -- [{"key","value","encoding"}], the API shape
    payload          jsonb,                              -- the value, when it is JSON
    error_type       text        NOT NULL,               -- type of the most recent error
    errors           jsonb       NOT NULL,               -- error history, oldest first
    retry            jsonb       NOT NULL,               -- effective retry policy
    meta             jsonb       NOT NULL DEFAULT '{}',
    created_at       timestamptz NOT NULL,
    enqueued_at      timestamptz,
    next_retry_at    timestamptz,
    discarded_at     timestamptz,
    completed_at     timestamptz,
    updated_at       timestamptz NOT NULL,
    -- Ingest is idempotent on the DLQ coordinates of the failure that created the record.
    CONSTRAINT redrive_record_dlq_coord UNIQUE (dlq_topic, dlq_partition, dlq_offset)
);

-- Listing filters keyset-paginate on id (newest first) within a filter.
CREATE INDEX redrive_record_queue_id ON redrive_record (queue, id);
CREATE INDEX redrive_record_state_id ON redrive_record (state, id);
CREATE INDEX redrive_record_error_type_id ON redrive_record (error_type, id);
CREATE INDEX redrive_record_type_id ON redrive_record (type, id);
CREATE INDEX redrive_record_created_at ON redrive_record (created_at);
-- The scheduler's due scan touches only retryable rows.
CREATE INDEX redrive_record_due ON redrive_record (next_retry_at) WHERE state = 'retryable';

-- +goose Down
DROP TABLE redrive_record;
