// Package policy decides what becomes of a failed record: whether it is retried,
// when, and how it is kept once Redrive gives up. It implements the OJS retry
// policy (seeds/ojs-retry.md) and Redrive's per-topic policy files (docs/policies.md).
//
// The pieces, from the inside out:
//
//   - [Retry] is an effective OJS RetryPolicy; [Retry.Delay] and [Retry.Decide]
//     are the backoff formula and the retry-or-give-up decision.
//   - [RetrySpec] and [TopicSpec] are partial policies as people write them (a
//     policy file, an API request, a record's redrive.retry header). They decode
//     strictly: an unknown or mistyped field is an error naming its path.
//   - [Set] is a directory of policy files, loaded by [LoadDir]; [Set.Resolve]
//     layers system defaults ← _default ← topic entry (glob, then exact) ← type
//     override into an effective [Topic].
//   - [Explain] prints an effective policy and its delay schedule for humans.
//
// Everything here is pure: no clocks (callers pass now and a random sample), no
// goroutines, no I/O beyond reading the policy files it is asked to read. A [Set]
// is immutable, so a caller reloads by calling [LoadDir] again and swapping the
// pointer, keeping the last good Set when the new one fails to load.
package policy
