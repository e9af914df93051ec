-- Who a redelivery is for, and the trace context of records (target.go).

-- name: SourceGroups :many
-- The consumer group that failed each record, for those that name one.
SELECT id, source_group FROM redrive_record
WHERE id = ANY(@ids::uuid[]) AND source_group <> '';

-- name: RecordHeaders :many
SELECT id, headers FROM redrive_record WHERE id = ANY(@ids::uuid[]);
