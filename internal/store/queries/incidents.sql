-- Incidents and fingerprints (incidents.go).

-- name: IncidentsMarkRefingerprinted :exec
UPDATE redrive_incident SET refingerprinted_at = greatest(now(), last_seen)
WHERE fingerprint = ANY(@fingerprints::text[]);

-- name: IncidentsPerQueue :many
SELECT c.queue, count(*) AS n FROM (
    SELECT queue, fingerprint FROM redrive_record_count WHERE fingerprint <> ''
    GROUP BY 1, 2 HAVING sum(n) > 0) c
GROUP BY 1;

-- name: IncidentsBefore :many
SELECT fingerprint, first_seen, last_seen FROM redrive_incident
WHERE fingerprint > @after AND rules_version < @version AND (refingerprinted_at IS NULL OR last_seen > refingerprinted_at)
ORDER BY fingerprint LIMIT @max;
