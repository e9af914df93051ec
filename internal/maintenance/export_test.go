package maintenance

import "time"

// LockFingerprints is the fingerprint backfill's advisory lock.
const LockFingerprints = lockFingerprints

// SetLockRetry sets how often the fingerprint backfill tries again to take
// its lock, and returns a function that puts it back.
func SetLockRetry(d time.Duration) (restore func()) {
	old := lockRetry.Swap(int64(d))
	return func() { lockRetry.Store(old) }
}
