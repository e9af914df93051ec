-- +goose Up
-- The worker registry (docs/api.md#worker-lifecycle, OJS worker protocol §3,
-- §4 and §10, admin API §9): one row per worker process, by the worker_id it
-- names itself with. A worker appears on its first heartbeat
-- (POST /ojs/v1/workers/heartbeat) or on a fetch that names it; each
-- heartbeat updates what it reports about itself. directive is what an
-- operator told it (POST /ojs/v1/admin/workers/{id}/quiet, .../terminate):
-- the next heartbeat answers it. A worker not seen for the heartbeat timeout
-- (30 s) is listed as stale; one not seen for a day is forgotten. Every
-- string and array is bounded by the API before it gets here (worker_id 255
-- bytes, hostname 255, queues 100, labels 50 of 255 bytes, active_job_ids
-- 1,000), and again by the constraints below, so that no caller can make a
-- row grow without bound.
CREATE TABLE IF NOT EXISTS redrive_worker (
    id                text        PRIMARY KEY CHECK (octet_length(id) BETWEEN 1 AND 255),
    hostname          text        CHECK (octet_length(hostname) <= 255),
    pid               bigint,
    -- The queues it works on: as its heartbeats report them
    -- (queues_reported), else those of its latest fetch.
    queues            text[]      NOT NULL DEFAULT '{}' CHECK (cardinality(queues) <= 100),
    queues_reported   boolean     NOT NULL DEFAULT false,
    concurrency       integer,
    labels            text[]      NOT NULL DEFAULT '{}' CHECK (cardinality(labels) <= 50),
    -- The lifecycle state the worker last reported (NULL: it never said).
    reported_state    text        CHECK (reported_state IN ('running', 'quiet', 'terminate')),
    -- What an operator told it, and who and when: it only moves forward.
    directive         text        NOT NULL DEFAULT 'running' CHECK (directive IN ('running', 'quiet', 'terminate')),
    directive_at      timestamptz,
    directive_by      text,
    started_at        timestamptz,
    first_seen_at     timestamptz NOT NULL,
    -- The latest heartbeat or fetch; last_heartbeat_at the latest heartbeat.
    last_seen_at      timestamptz NOT NULL,
    last_heartbeat_at timestamptz,
    heartbeats        bigint      NOT NULL DEFAULT 0,
    -- What the latest heartbeat reported as in progress.
    active_jobs       integer,
    active_job_ids    text[]      NOT NULL DEFAULT '{}' CHECK (cardinality(active_job_ids) <= 1000)
);

-- Heartbeats forget the workers gone for a day, oldest first.
CREATE INDEX IF NOT EXISTS redrive_worker_seen ON redrive_worker (last_seen_at);

-- +goose Down
DROP TABLE IF EXISTS redrive_worker;
