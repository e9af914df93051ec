-- +goose NO TRANSACTION
-- +goose Up
-- Deleting a queue with its records (queue-config spec §5.3): strategy
-- discard makes each waiting record of the queue a discarded record kept as
-- 'cancelled' (an operator gave up on it by hand; pruned per
-- retention.cancelled), strategy move re-homes them to target_queue and
-- redelivers them there. Both run as tasks.
--
-- The exhaustion check is swapped NOT VALID and validated apart, outside a
-- transaction, so that no statement holds an exclusive lock on
-- redrive_record while every row is read (VALIDATE CONSTRAINT takes SHARE
-- UPDATE EXCLUSIVE: ingest goes on). Each statement can be run again.
ALTER TABLE redrive_record DROP CONSTRAINT IF EXISTS redrive_record_exhaustion_check;
ALTER TABLE redrive_record ADD CONSTRAINT redrive_record_exhaustion_check
    CHECK (exhaustion IN ('dead_letter', 'discard', 'cancelled')) NOT VALID;
ALTER TABLE redrive_record VALIDATE CONSTRAINT redrive_record_exhaustion_check;

ALTER TABLE redrive_task DROP CONSTRAINT IF EXISTS redrive_task_kind_check;
ALTER TABLE redrive_task ADD CONSTRAINT redrive_task_kind_check
    CHECK (kind IN ('retry', 'purge', 'queue_discard', 'queue_move'));
-- The queue a queue_move task re-homes the records to; NULL for other kinds.
ALTER TABLE redrive_task ADD COLUMN IF NOT EXISTS target_queue text;

-- +goose Down
ALTER TABLE redrive_task DROP COLUMN target_queue;
DELETE FROM redrive_task WHERE kind IN ('queue_discard', 'queue_move');
ALTER TABLE redrive_task DROP CONSTRAINT IF EXISTS redrive_task_kind_check;
ALTER TABLE redrive_task ADD CONSTRAINT redrive_task_kind_check CHECK (kind IN ('retry', 'purge'));
UPDATE redrive_record SET exhaustion = 'discard' WHERE exhaustion = 'cancelled';
ALTER TABLE redrive_record DROP CONSTRAINT IF EXISTS redrive_record_exhaustion_check;
ALTER TABLE redrive_record ADD CONSTRAINT redrive_record_exhaustion_check
    CHECK (exhaustion IN ('dead_letter', 'discard'));
