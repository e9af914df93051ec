package store

// The encoder's column list and types, for TestRecordOIDsMatchTheTable.
var (
	RecordColumns = recordColumns
	RecordOIDs    = recordOIDs
)

// QueueActivitySQL is QueueActivity's statement, for its EXPLAIN.
const QueueActivitySQL = queueActivitySQL

// Where renders a filter's SQL condition, for EXPLAINs of the queries using it.
func Where(f *Filter) (string, []any) { return f.where(nil) }

// SettleSQL and RescueSQL are Settle's and RescueExpired's statements, for
// their EXPLAIN.
var SettleSQL, RescueSQL = settleSQL, rescueSQL
