-- +goose Up
-- The admin API: search indexes, cheap statistics, topic (queue) configs set
-- through the API, background bulk tasks and the audit log.

-- Search. path+value filters use containment (payload @> '{"a":{"b":1}}'),
-- which this index serves; header filters use containment on headers.
-- There is deliberately no trigram index for q (substring): pg_trgm is a
-- contrib extension that may be missing, and a trigram GIN over every payload
-- would cost ingest far more than the occasional substring scan costs search.
CREATE INDEX redrive_record_payload ON redrive_record USING gin (payload jsonb_path_ops);
CREATE INDEX redrive_record_key ON redrive_record (key, id);
CREATE INDEX redrive_record_exhaustion_id ON redrive_record (exhaustion, id) WHERE exhaustion IS NOT NULL;

-- Statistics. Counting a million rows per request is too slow, so every
-- statement on redrive_record appends its net effect per dimension tuple here
-- (statement-level triggers over transition tables: one INSERT per statement,
-- not per row, so ingest's COPY stays fast, and append-only, so concurrent
-- writers never wait on each other). The API sums it (a few hundred rows) and
-- compacts it every few seconds.
CREATE TABLE redrive_record_count (
    queue      text    NOT NULL,
    type       text    NOT NULL,
    error_type text    NOT NULL,
    state      text    NOT NULL,
    exhaustion text    NOT NULL, -- '' when NULL
    n          bigint  NOT NULL
);
CREATE INDEX redrive_record_count_dims ON redrive_record_count (queue, state);

-- +goose StatementBegin
CREATE FUNCTION redrive_record_count_ins() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO redrive_record_count (queue, type, error_type, state, exhaustion, n)
    SELECT queue, type, error_type, state, coalesce(exhaustion, ''), count(*)
    FROM new_rows GROUP BY 1, 2, 3, 4, 5;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION redrive_record_count_del() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO redrive_record_count (queue, type, error_type, state, exhaustion, n)
    SELECT queue, type, error_type, state, coalesce(exhaustion, ''), -count(*)
    FROM old_rows GROUP BY 1, 2, 3, 4, 5;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION redrive_record_count_upd() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO redrive_record_count (queue, type, error_type, state, exhaustion, n)
    SELECT queue, type, error_type, state, exhaustion, sum(d)
    FROM (SELECT queue, type, error_type, state, coalesce(exhaustion, '') AS exhaustion, -1 AS d FROM old_rows
          UNION ALL
          SELECT queue, type, error_type, state, coalesce(exhaustion, ''), 1 FROM new_rows) c
    GROUP BY 1, 2, 3, 4, 5
    HAVING sum(d) <> 0;
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER redrive_record_count_ins AFTER INSERT ON redrive_record
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION redrive_record_count_ins();
CREATE TRIGGER redrive_record_count_del AFTER DELETE ON redrive_record
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION redrive_record_count_del();
CREATE TRIGGER redrive_record_count_upd AFTER UPDATE ON redrive_record
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION redrive_record_count_upd();

-- Rows stored before this migration.
INSERT INTO redrive_record_count (queue, type, error_type, state, exhaustion, n)
SELECT queue, type, error_type, state, coalesce(exhaustion, ''), count(*)
FROM redrive_record GROUP BY 1, 2, 3, 4, 5;

-- Topic (queue) configs set through the API: a partial topic policy layered
-- over the policy files for topics the files do not declare. '_default' is
-- the API's _default layer.
CREATE TABLE redrive_queue (
    name       text        PRIMARY KEY,
    config     jsonb       NOT NULL DEFAULT '{}', -- policy.TopicSpec
    explicit   boolean     NOT NULL DEFAULT true,  -- created with POST /queues (else by a PUT or pause)
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- Background bulk operations (retry or purge by filter). A replica works on a
-- task under a lease; progress is committed with each batch, so another
-- replica (or the same one after a restart) resumes where it stopped.
CREATE TABLE redrive_task (
    id               uuid        PRIMARY KEY,
    kind             text        NOT NULL CHECK (kind IN ('retry', 'purge')),
    state            text        NOT NULL CHECK (state IN ('pending', 'running', 'completed', 'cancelled', 'failed')),
    filter           jsonb       NOT NULL,
    rate_limit       double precision NOT NULL DEFAULT 0, -- records/s, 0 = unlimited
    batch_size       integer     NOT NULL,
    total            bigint      NOT NULL DEFAULT 0,      -- matching records when the task was created
    processed        bigint      NOT NULL DEFAULT 0,      -- records retried or deleted
    skipped          bigint      NOT NULL DEFAULT 0,
    errors           jsonb       NOT NULL DEFAULT '[]',   -- [{"at","message"}], newest last, bounded
    cursor_id        uuid,                                -- records up to here are done (ids ascend)
    max_id           uuid,                                -- records created after the task are left alone
    cancel_requested boolean     NOT NULL DEFAULT false,
    created_by       text        NOT NULL DEFAULT '',
    lease_owner      text,
    lease_token      uuid,
    lease_until      timestamptz,
    created_at       timestamptz NOT NULL,
    started_at       timestamptz,
    updated_at       timestamptz NOT NULL,
    finished_at      timestamptz
);
CREATE INDEX redrive_task_open ON redrive_task (created_at) WHERE state IN ('pending', 'running');

-- Every state-changing API call: who (key name), what, on which target or
-- filter, how many records, and the outcome.
CREATE TABLE redrive_audit (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at         timestamptz NOT NULL DEFAULT now(),
    key_name   text        NOT NULL,
    action     text        NOT NULL,
    method     text        NOT NULL,
    path       text        NOT NULL,
    target     text        NOT NULL DEFAULT '',
    filter     jsonb,
    count      bigint,
    status     integer     NOT NULL,
    request_id text        NOT NULL DEFAULT ''
);
CREATE INDEX redrive_audit_at ON redrive_audit (at);
CREATE INDEX redrive_audit_action ON redrive_audit (action, id);

-- +goose Down
DROP TABLE redrive_audit;
DROP TABLE redrive_task;
DROP TABLE redrive_queue;
DROP TRIGGER redrive_record_count_upd ON redrive_record;
DROP TRIGGER redrive_record_count_del ON redrive_record;
DROP TRIGGER redrive_record_count_ins ON redrive_record;
DROP FUNCTION redrive_record_count_upd();
DROP FUNCTION redrive_record_count_del();
DROP FUNCTION redrive_record_count_ins();
DROP TABLE redrive_record_count;
DROP INDEX redrive_record_exhaustion_id;
DROP INDEX redrive_record_key;
DROP INDEX redrive_record_payload;
