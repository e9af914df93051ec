-- +goose Up
-- Error types and record types belong to a topic: the planner, which
-- multiplies the selectivities of queue = … and error_type = … as if they were
-- independent, expected a few hundred records where thousands match, and
-- with the (queue, created_at) index of 00171 chose to intersect two
-- indexes and sort every match instead of walking (error_type, id) for one
-- page (at a million records: 140 ms instead of under 1 ms). Functional
-- dependency statistics tell it. ANALYZE reads a sample (about 30,000 rows,
-- whatever the table size) so the statistics exist before the next
-- autovacuum.
CREATE STATISTICS IF NOT EXISTS redrive_record_dims (dependencies) ON queue, type, error_type FROM redrive_record;
ANALYZE redrive_record;

-- +goose Down
DROP STATISTICS IF EXISTS redrive_record_dims;
