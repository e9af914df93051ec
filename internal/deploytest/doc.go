// Package deploytest checks the deployment files against the code they deploy:
// docker-compose.yml, the Kubernetes manifests in deploy/kubernetes and the
// Dockerfile. Its tests parse those files and fail when they drift from
// Redrive's configuration table (internal/config), its HTTP port and health
// endpoints, the go.mod Go version, or from each other (a broker address that
// no Kafka listener serves, a database URL that does not match the Postgres
// service, a probe on the wrong port).
//
// It holds tests only; nothing may import it. It never starts containers or
// talks to a cluster: no Docker engine or Kubernetes API is needed.
package deploytest
