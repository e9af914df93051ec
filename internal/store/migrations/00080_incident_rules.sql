-- +goose Up
-- Incidents that group (issue 18). No statement touches redrive_record: the
-- tables changed here hold one row per incident, and per queue, incident
-- and minute (or hour) of activity.

-- The fingerprint rules (internal/fingerprint.Version) an incident was
-- recorded under. Every incident from before this migration is version 1:
-- serve fingerprints their records again under the current rules in the
-- background (internal/maintenance), and they join the incidents those
-- rules make. A binary of an older version, still running during a rolling
-- upgrade, records version 1 by this default, so its incidents are taken up
-- too.
ALTER TABLE redrive_incident ADD COLUMN IF NOT EXISTS rules_version smallint NOT NULL DEFAULT 1;
-- When the background job found an incident of older rules without records
-- left; it looks again only if the incident is seen again after that.
ALTER TABLE redrive_incident ADD COLUMN IF NOT EXISTS refingerprinted_at timestamptz;
-- The incident's top backtrace frames as its fingerprint reads them (no
-- line numbers), which tell apart incidents of one message.
ALTER TABLE redrive_incident ADD COLUMN IF NOT EXISTS frames text[] NOT NULL DEFAULT '{}';

-- Activity per incident: ingest appends one row per queue and fingerprint
-- of a batch. Records redelivered are counted per queue only ('').
ALTER TABLE redrive_queue_activity ADD COLUMN IF NOT EXISTS fingerprint text NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS redrive_queue_activity_fingerprint ON redrive_queue_activity (fingerprint, minute) WHERE fingerprint <> '';
-- Compaction and the all-queues chart read by time. Minutes are kept two
-- hours and then folded into hours, kept seven days (store.CompactActivity).
-- While a replica of an older version still runs (a rolling upgrade), its
-- compaction folds activity without the fingerprint and drops what is older
-- than two hours: the charts' history starts when the last one stops.
CREATE INDEX IF NOT EXISTS redrive_queue_activity_minute ON redrive_queue_activity (minute);

-- +goose Down
DROP INDEX IF EXISTS redrive_queue_activity_minute;
DROP INDEX IF EXISTS redrive_queue_activity_fingerprint;
ALTER TABLE redrive_queue_activity DROP COLUMN IF EXISTS fingerprint;
ALTER TABLE redrive_incident DROP COLUMN IF EXISTS frames;
ALTER TABLE redrive_incident DROP COLUMN IF EXISTS refingerprinted_at;
ALTER TABLE redrive_incident DROP COLUMN IF EXISTS rules_version;
