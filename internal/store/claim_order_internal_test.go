package store

import (
	"sort"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
)

// A claim whose rows came out of due order is put in due order, each
// record's prior state moving with it (Settle restores record i from
// prior[i]); ties on the due time go by id.
func TestAClaimsRecordsArePutInDueOrderWithTheirPriors(t *testing.T) {
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	later := at.Add(time.Second)
	c := &Claim{
		Records: []dlq.Record{
			{ID: "0000000c", NextRetryAt: &later},
			{ID: "0000000b", NextRetryAt: &at},
			{ID: "0000000a", NextRetryAt: &at},
		},
		prior: []prior{{state: "c"}, {state: "b"}, {state: "a"}},
	}
	sort.Sort(inDueOrder{c})
	for i, want := range []string{"0000000a", "0000000b", "0000000c"} {
		if c.Records[i].ID != want || c.prior[i].state != want[len(want)-1:] {
			t.Errorf("record %d is %s with prior state %q; want %s with %q", i, c.Records[i].ID, c.prior[i].state,
				want, want[len(want)-1:])
		}
	}
	if !sort.IsSorted(inDueOrder{c}) {
		t.Error("the sorted claim does not read as sorted")
	}
}
