-- The trace context of records (target.go); who a redelivery is for comes
-- with its claim (ClaimDue).

-- name: RecordHeaders :many
SELECT id, headers FROM redrive_record_data WHERE id = ANY(@ids::uuid[]);
