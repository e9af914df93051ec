// Package chaos is Redrive's chaos suite (`make chaos`; a short version runs
// in `make test`). It runs `redrive serve` as a child process against
// `redrive broker` (kfake in a process of its own) and a throwaway Postgres,
// kills serve with SIGKILL and stops Postgres at random points while records
// are ingested, redelivered, bulk-retried, archived and pruned, and then
// checks from the outside that no record was lost and that every duplicate
// redelivery falls in the documented double-delivery window
// (docs/redelivery.md). The suite lives in the package's tests; the package
// has no code of its own.
package chaos
