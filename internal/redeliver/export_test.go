package redeliver

// SetAfterProduce installs a hook that runs between produce and mark.
func SetAfterProduce(s *Scheduler, f func()) { s.afterProduce = f }
