package dlq

import (
	"slices"
	"strings"
	"testing"
)

func TestReservedTopicsRefuseOwnInternalAndIllegalNames(t *testing.T) {
	r := NewReservedTopics("dead_letter_queue", "dead_letter_queue.archive", "dead_letter_queue.events")
	for topic, want := range map[string]string{
		"orders":                   "",
		"_default":                 "",
		"_private":                 "",
		"dead_letter_queue":        "own topics",
		"dead_letter_queue.events": "own topics",
		"__consumer_offsets":       "internal topic",
		"__transaction_state":      "internal topic",
		"":                         "must not be empty",
		strings.Repeat("a", 250):   "249 characters",
		"orders/eu":                "may only contain",
	} {
		got := r.Problem(topic)
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("Problem(%.20q) = %q, want it to say %q", topic, got, want)
		}
	}
	if !slices.Equal(r.Names(), []string{"dead_letter_queue", "dead_letter_queue.archive", "dead_letter_queue.events"}) {
		t.Errorf("Names() = %v", r.Names())
	}
	if (ReservedTopics{}).Problem("__consumer_offsets") == "" || (ReservedTopics{}).Problem("orders") != "" {
		t.Error("the zero value must reserve exactly the internal topics")
	}
}
