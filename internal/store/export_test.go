package store

// The encoder's column list and types, for TestRecordOIDsMatchTheTable.
var (
	RecordColumns = recordColumns
	RecordOIDs    = recordOIDs
)
