-- The audit log (audit.go). Reading it is filtered, in Go.

-- name: AuditAdd :exec
INSERT INTO redrive_audit (key_name, action, method, path, target, filter, count, status, request_id, before, after,
    actor_kind, actor_subject, actor_email)
VALUES (@key_name, @action, @method, @path, @target, @filter, @count, @status, @request_id, @before, @after,
    @actor_kind, sqlc.narg(actor_subject)::text, sqlc.narg(actor_email)::text);
