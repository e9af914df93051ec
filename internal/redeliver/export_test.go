package redeliver

// SetAfterProduce installs a hook that runs between the produce of a claimed
// batch and its settle.
func SetAfterProduce(s *Scheduler, f func()) { s.afterProduce = f }
