-- +goose Up
-- One archive copy per record and state, whatever imports happen (issue 44).
-- A row per copy the archiver made: the record, and the state, attempt,
-- number of errors and latest error's time it was copied with (what tells
-- one discard of a record from the next), its DLQ topic and when; kept when
-- the record is deleted. A record stored again (imported after a purge) is
-- not copied again as it was copied already: ClaimArchive marks its copy
-- done from here. When an archive topic is deleted and created again its
-- copies are gone, and so are the rows of its DLQ topics (ArchiveTopicSeen),
-- so that they are made again. Copies made before this migration are those
-- of the records marked done, as they are now.
CREATE TABLE IF NOT EXISTS redrive_archive_copy (
    id            uuid        NOT NULL,
    state         text        NOT NULL,
    attempt       integer     NOT NULL,
    errors        integer     NOT NULL,
    last_error_at timestamptz NOT NULL,   -- the latest error's occurred_at; 0001-01-01 UTC for none
    dlq_topic     text        NOT NULL,
    reason        text,                   -- a reference copy's reason (too_large), as archive_reason
    archived_at   timestamptz NOT NULL,
    PRIMARY KEY (id, state, attempt, errors, last_error_at)
);
INSERT INTO redrive_archive_copy (id, state, attempt, errors, last_error_at, dlq_topic, reason, archived_at)
SELECT l.id, l.state, l.attempt, jsonb_array_length(d.errors),
    CASE WHEN d.errors->-1->>'occurred_at' ~ '^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$'
         THEN (d.errors->-1->>'occurred_at')::timestamptz ELSE '0001-01-01 00:00:00+00' END,
    d.dlq_topic, l.archive_reason, coalesce(l.archived_at, l.updated_at)
FROM redrive_lifecycle l JOIN redrive_record_data d ON d.id = l.id
WHERE l.archive_state = 'done' AND jsonb_typeof(d.errors) = 'array'
ON CONFLICT DO NOTHING;

-- +goose Down
DROP TABLE IF EXISTS redrive_archive_copy;
