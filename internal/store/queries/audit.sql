-- The audit log (audit.go). Reading it is filtered, in Go.

-- name: AuditAdd :exec
INSERT INTO redrive_audit (key_name, action, method, path, target, filter, count, status, request_id, before, after)
VALUES (@key_name, @action, @method, @path, @target, @filter, @count, @status, @request_id, @before, @after);
