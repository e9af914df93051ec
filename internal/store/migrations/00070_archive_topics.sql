-- +goose Up
-- The ids each archive topic has had, as the archiver saw them
-- (internal/redeliver, Archiver.CheckTopics). A topic deleted and created
-- again gets a new id, and the copies made to the old one are gone with it:
-- when the archiver first sees a new id of a topic it knew, the copies of
-- that topic's records are made due again, before the pruner may delete the
-- records. Ids replaced once stay here, so that a broker answering with stale
-- metadata never brings an old id back. A handful of rows per topic.
CREATE TABLE IF NOT EXISTS redrive_archive_topic (
    topic       text        NOT NULL,
    topic_id    uuid        NOT NULL,
    seen_at     timestamptz NOT NULL,   -- when the archiver first saw this id
    replaced_at timestamptz,            -- when a newer id replaced it; NULL: the current id
    PRIMARY KEY (topic, topic_id)
);

-- +goose Down
DROP TABLE IF EXISTS redrive_archive_topic;
