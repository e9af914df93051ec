-- +goose Up
-- A claim's row holds its records' ids, prior states and prior
-- redelivered_at as arrays of up to a claim's size (1,000 by default): about
-- 16 KiB of UUIDs, which do not compress. Stored EXTENDED, Postgres tried
-- to compress each array before moving it out of line, which cost about
-- 1 ms of a claim of 1,000 (the INSERT into redrive_claim, 1.5-1.8 ms
-- against 0.4-0.7 ms EXTERNAL). EXTERNAL moves them out of line as they
-- are. Only rows written from now on are stored so; nothing is rewritten.
ALTER TABLE redrive_claim
    ALTER COLUMN ids SET STORAGE EXTERNAL,
    ALTER COLUMN prior_states SET STORAGE EXTERNAL,
    ALTER COLUMN prior_redelivered_at SET STORAGE EXTERNAL;

-- +goose Down
ALTER TABLE redrive_claim
    ALTER COLUMN ids SET STORAGE EXTENDED,
    ALTER COLUMN prior_states SET STORAGE EXTENDED,
    ALTER COLUMN prior_redelivered_at SET STORAGE EXTENDED;
