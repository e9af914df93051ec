package maintenance

// LockFingerprints is the fingerprint backfill's advisory lock.
const LockFingerprints = lockFingerprints
