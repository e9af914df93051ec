// Package reuse keeps values for reuse, up to a bound.
//
// Unlike a sync.Pool, a garbage collection does not empty it: the hot paths
// that use it (the scheduler's claims and Kafka batches) allocate so little
// with it that collections are rare, and memory dropped by every one of
// them is what made them frequent. The bound is what an idle process keeps.
package reuse

import "sync"

// Stack keeps at most Max values, the last one put given first. The zero
// Stack keeps nothing; it is safe for concurrent use.
type Stack[T any] struct {
	Max int

	mu    sync.Mutex
	items []T
}

// Get returns a kept value and true, or the zero value and false when none
// is kept.
func (s *Stack[T]) Get() (T, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var zero T
	last := len(s.items) - 1
	if last < 0 {
		return zero, false
	}
	v := s.items[last]
	s.items[last] = zero
	s.items = s.items[:last]
	return v, true
}

// Put keeps v unless Max values are kept already, and says whether it did.
func (s *Stack[T]) Put(v T) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.items) >= s.Max {
		return false
	}
	s.items = append(s.items, v)
	return true
}

// Len says how many values are kept.
func (s *Stack[T]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.items)
}
