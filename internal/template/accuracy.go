package template

// Accuracy measures a grouping against the truth.
type Accuracy struct {
	// GA is Grouping Accuracy (Zhu et al., "Tools and Benchmarks for
	// Automated Log Parsing", ICSE-SEIP 2019): the fraction of messages
	// whose predicted group holds exactly the messages of their true group.
	GA float64
	// Correct of Messages were grouped correctly.
	Correct, Messages int
	// Problems is the number of true groups, Groups the number of
	// predicted ones.
	Problems, Groups int
	// Mixed counts the predicted groups that hold messages of more than
	// one true group: what an operator acting on a group gets wrong.
	Mixed int
}

// GroupingAccuracy scores predicted against truth: truth[i] and
// predicted[i] are message i's true and predicted group labels (the labels
// of the two need not agree). No messages score GA 1. It panics when the
// slices differ in length.
func GroupingAccuracy(truth, predicted []string) Accuracy {
	if len(truth) != len(predicted) {
		panic("template.GroupingAccuracy: truth and predicted differ in length")
	}
	trueSize := map[string]int{}
	for _, t := range truth {
		trueSize[t]++
	}
	// Per predicted group: its size, one of its true labels and whether all
	// of its messages carry that label.
	type pred struct {
		size  int
		label string
		pure  bool
	}
	preds := map[string]*pred{}
	for i, p := range predicted {
		g := preds[p]
		if g == nil {
			g = &pred{label: truth[i], pure: true}
			preds[p] = g
		}
		g.size++
		g.pure = g.pure && truth[i] == g.label
	}
	a := Accuracy{Messages: len(truth), Problems: len(trueSize), Groups: len(preds)}
	for _, g := range preds {
		switch {
		case !g.pure:
			a.Mixed++
		case g.size == trueSize[g.label]:
			a.Correct += g.size
		}
	}
	a.GA = 1
	if a.Messages > 0 {
		a.GA = float64(a.Correct) / float64(a.Messages)
	}
	return a
}
