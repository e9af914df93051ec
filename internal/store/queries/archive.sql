-- Archive topics and the archive outbox (archive.go, archive_topic.go).

-- name: DLQTopics :many
WITH RECURSIVE t(topic) AS (
    SELECT min(dlq_topic) FROM redrive_record_coord
    UNION ALL
    SELECT (SELECT min(r.dlq_topic) FROM redrive_record_coord r WHERE r.dlq_topic > t.topic)
    FROM t WHERE t.topic IS NOT NULL
)
SELECT t.topic::text FROM t WHERE t.topic IS NOT NULL;

-- name: ArchiveTopicKnown :one
SELECT EXISTS (SELECT 1 FROM redrive_archive_topic WHERE topic = @topic);

-- name: ArchiveTopicLock :exec
SELECT pg_advisory_xact_lock(hashtextextended('redrive_archive_topic:' || @topic::text, 0));

-- name: ArchiveTopicIDs :one
SELECT EXISTS (SELECT 1 FROM redrive_archive_topic a WHERE a.topic = @topic AND a.topic_id = @topic_id) AS known,
       EXISTS (SELECT 1 FROM redrive_archive_topic a WHERE a.topic = @topic AND a.replaced_at IS NULL) AS current;

-- name: ArchiveTopicReplace :exec
UPDATE redrive_archive_topic SET replaced_at = @replaced_at WHERE topic = @topic AND replaced_at IS NULL;

-- name: ArchiveTopicAdd :exec
INSERT INTO redrive_archive_topic (topic, topic_id, seen_at) VALUES (@topic, @topic_id, @seen_at);

-- name: ArchiveRecopy :execrows
UPDATE redrive_lifecycle l SET archive_state = 'pending', archive_reason = NULL, archive_failure = NULL,
       archive_retry_at = NULL, archive_token = NULL, archived_at = NULL
FROM redrive_record_data d
WHERE d.id = l.id AND d.dlq_topic = ANY(@dlq_topics::text[]) AND (l.archive_state = 'done' OR l.archive_token IS NOT NULL);

-- name: ArchiveCopiesForget :exec
-- The copies noted of records of these DLQ topics are gone with their
-- archive topic: a record of them stored again is copied again.
DELETE FROM redrive_archive_copy WHERE dlq_topic = ANY(@dlq_topics::text[]);


-- name: ArchiveNextDue :one
SELECT CASE WHEN min(coalesce(archive_retry_at, '-infinity'::timestamptz)) = '-infinity' THEN @now::timestamptz
            ELSE min(archive_retry_at) END AS due
FROM redrive_lifecycle WHERE archive_state IN ('pending', 'failed');
