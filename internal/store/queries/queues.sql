-- Topic configurations set through the API (queue.go).

-- name: QueueConfigList :many
SELECT * FROM redrive_queue ORDER BY name;

-- name: QueueConfigGet :one
SELECT * FROM redrive_queue WHERE name = @name;

-- name: QueueCreate :one
INSERT INTO redrive_queue (name, config, explicit) VALUES (@name, @config, true)
ON CONFLICT (name) DO NOTHING
RETURNING *;

-- name: QueueConfigPut :one
INSERT INTO redrive_queue (name, config, explicit) VALUES (@name, @config, false)
ON CONFLICT (name) DO UPDATE SET config = excluded.config, updated_at = now()
RETURNING *;

-- name: QueueConfigMerge :one
INSERT INTO redrive_queue (name, config, explicit) VALUES (@name, @config, false)
ON CONFLICT (name) DO UPDATE SET config = redrive_queue.config || excluded.config, updated_at = now()
RETURNING *;

-- name: QueueDelete :execrows
DELETE FROM redrive_queue WHERE name = @name;
