package template_test

import (
	"testing"

	"github.com/redrive/redrive/internal/template"
)

// Grouping Accuracy as Zhu et al. define it: a message is correctly grouped
// iff the set of messages in its predicted group equals the set in its true
// group.
func TestGroupingAccuracyDefinition(t *testing.T) {
	for _, tc := range []struct {
		name            string
		truth, pred     []string
		ga              float64
		groups, mixed   int
		correct, probls int
	}{
		{"perfect, other labels", []string{"A", "A", "B"}, []string{"x", "x", "y"}, 1, 2, 0, 3, 2},
		{"one problem split", []string{"A", "A", "A", "B"}, []string{"x", "x", "z", "y"}, 0.25, 3, 0, 1, 2},
		{"two problems merged", []string{"A", "A", "B"}, []string{"x", "x", "x"}, 0, 1, 1, 0, 2},
		// The paper's kind of example: the first group is right, the B
		// messages are split, and the B and C messages are mixed.
		{"mixed and split", []string{"A", "A", "B", "B", "C"}, []string{"1", "1", "2", "3", "3"}, 0.4, 3, 1, 2, 3},
		{"singletons", []string{"A", "B", "C"}, []string{"1", "2", "3"}, 1, 3, 0, 3, 3},
		{"everything apart", []string{"A", "A"}, []string{"1", "2"}, 0, 2, 0, 0, 1},
		{"nothing", nil, nil, 1, 0, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := template.GroupingAccuracy(tc.truth, tc.pred)
			if a.GA != tc.ga || a.Groups != tc.groups || a.Mixed != tc.mixed || a.Correct != tc.correct || a.Problems != tc.probls || a.Messages != len(tc.truth) {
				t.Errorf("got %+v, want GA %v, %d groups, %d mixed, %d correct, %d problems", a, tc.ga, tc.groups, tc.mixed, tc.correct, tc.probls)
			}
		})
	}
}

func TestGroupingAccuracyPanicsOnLengths(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic for slices of different lengths")
		}
	}()
	template.GroupingAccuracy([]string{"A"}, nil)
}
