package reuse_test

import (
	"testing"

	"github.com/redrive/redrive/internal/reuse"
)

func TestAStackKeepsUpToItsBoundLastInFirstOut(t *testing.T) {
	s := reuse.Stack[int]{Max: 2}
	if _, ok := s.Get(); ok {
		t.Fatal("an empty stack gave a value")
	}
	for i, want := range []bool{true, true, false} {
		if got := s.Put(i + 1); got != want {
			t.Fatalf("Put(%d) = %v, want %v", i+1, got, want)
		}
	}
	if s.Len() != 2 {
		t.Fatalf("keeps %d values, want 2", s.Len())
	}
	for _, want := range []int{2, 1} {
		if v, ok := s.Get(); !ok || v != want {
			t.Fatalf("Get() = %d, %v; want %d, true", v, ok, want)
		}
	}
	if _, ok := s.Get(); ok {
		t.Fatal("a stack emptied gave a value")
	}
	var none reuse.Stack[int]
	if none.Put(1) {
		t.Fatal("the zero stack kept a value")
	}
}
