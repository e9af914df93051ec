package store

// The encoder's column list and types, for TestRecordOIDsMatchTheTable.
var (
	RecordColumns = recordColumns
	RecordOIDs    = recordOIDs
)

// QueueActivitySQL is QueueActivity's statement, for its EXPLAIN.
const QueueActivitySQL = queueActivitySQL
