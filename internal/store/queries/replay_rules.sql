-- Replay rules created through the API (replay.go).

-- name: ReplayRuleList :many
SELECT * FROM redrive_replay_rule ORDER BY name;

-- name: ReplayRuleGet :one
SELECT * FROM redrive_replay_rule WHERE name = @name;

-- name: ReplayRuleCreate :exec
INSERT INTO redrive_replay_rule (name, filter, delay_ms, max_replays, enabled, rate_limit, window_start, window_end,
    time_zone, created_at, updated_at)
VALUES (@name, @filter, @delay_ms, @max_replays, @enabled, @rate_limit, @window_start, @window_end,
    @time_zone, @created_at, @created_at);

-- name: ReplayRuleUpdate :execrows
UPDATE redrive_replay_rule SET filter = @filter, delay_ms = @delay_ms, max_replays = @max_replays,
    enabled = @enabled, rate_limit = @rate_limit, window_start = @window_start, window_end = @window_end,
    time_zone = @time_zone, updated_at = @updated_at
WHERE name = @name;

-- name: ReplayRuleDelete :execrows
DELETE FROM redrive_replay_rule WHERE name = @name;
