package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"
)

// statsTopJSON is what GET /dead-letter/stats shows of its breakdowns.
type statsTopJSON struct {
	Total         int64            `json:"total"`
	ByQueue       map[string]int64 `json:"by_queue"`
	ByQueueOthers struct {
		Keys    int64 `json:"keys"`
		Records int64 `json:"records"`
	} `json:"by_queue_others"`
	ByErrorType       map[string]int64 `json:"by_error_type"`
	ByErrorTypeOthers struct {
		Keys    int64 `json:"keys"`
		Records int64 `json:"records"`
	} `json:"by_error_type_others"`
	ByState map[string]int64 `json:"by_state"`
}

// With hundreds of queues and error types the stats stay one small
// answer: by_queue and by_error_type hold the largest (100 unless limit
// says otherwise, most records first, ties by name), and *_others count
// the rest, so that each breakdown still adds up to total.
func TestStatsCapTheQueuesAndErrorTypesTheyList(t *testing.T) {
	b := setup(t)
	// 400 queues with one record each, each of its own error type; queue
	// "big" has 5 records of error type "big.error", "mid" 3 of "mid.error".
	var rs []rec
	for i := range 400 {
		rs = append(rs, rec{queue: fmt.Sprintf("q%03d", i), errType: fmt.Sprintf("e%03d", i)})
	}
	for range 5 {
		rs = append(rs, rec{queue: "big", errType: "big.error"})
	}
	for range 3 {
		rs = append(rs, rec{queue: "mid", errType: "mid.error"})
	}
	b.seed(t, rs...)
	const total = 408

	stats := func(query string) (statsTopJSON, int) {
		t.Helper()
		var st statsTopJSON
		r := b.get(t, "/ojs/v1/dead-letter/stats"+query, &st)
		wantStatus(t, r, http.StatusOK)
		return st, len(r.body)
	}
	check := func(what string, st statsTopJSON, limit int, queues, errorTypes int64) {
		t.Helper()
		if st.Total != total || st.ByState["discarded"] != total {
			t.Errorf("%s: total %d, by_state %v; want %d", what, st.Total, st.ByState, total)
		}
		if len(st.ByQueue) != limit || st.ByQueueOthers.Keys != queues-int64(limit) ||
			sumCounts(st.ByQueue)+st.ByQueueOthers.Records != total {
			t.Errorf("%s: %d queues listed (%d records) and others %+v; want %d of %d queues adding up to %d",
				what, len(st.ByQueue), sumCounts(st.ByQueue), st.ByQueueOthers, limit, queues, total)
		}
		if len(st.ByErrorType) != limit || st.ByErrorTypeOthers.Keys != errorTypes-int64(limit) ||
			sumCounts(st.ByErrorType)+st.ByErrorTypeOthers.Records != total {
			t.Errorf("%s: %d error types listed (%d records) and others %+v; want %d of %d adding up to %d",
				what, len(st.ByErrorType), sumCounts(st.ByErrorType), st.ByErrorTypeOthers, limit, errorTypes, total)
		}
		if st.ByQueue["big"] != 5 || st.ByQueue["mid"] != 3 || st.ByErrorType["big.error"] != 5 || st.ByErrorType["mid.error"] != 3 {
			t.Errorf("%s: the largest are not listed first: big %d, mid %d, big.error %d, mid.error %d", what,
				st.ByQueue["big"], st.ByQueue["mid"], st.ByErrorType["big.error"], st.ByErrorType["mid.error"])
		}
	}

	st, size := stats("")
	t.Logf("the stats of 402 queues and error types: %d bytes", size)
	check("default", st, 100, 402, 402)
	// Ties go by name: q000 … q097 follow big and mid.
	if st.ByQueue["q097"] != 1 || st.ByQueue["q098"] != 0 {
		t.Errorf("ties are not broken by name: q097 %d, q098 %d", st.ByQueue["q097"], st.ByQueue["q098"])
	}
	if size > 12_000 {
		t.Errorf("the stats of 402 queues are %d bytes, want a bounded answer", size)
	}
	st, _ = stats("?limit=2")
	check("limit 2", st, 2, 402, 402)
	st, all := stats("?limit=1000")
	check("limit 1000", st, 402, 402, 402)
	if all <= size {
		t.Errorf("every queue listed in %d bytes, no more than the first 100 (%d)", all, size)
	}
	st, _ = stats("?queue=big")
	if st.Total != 5 || len(st.ByQueue) != 1 || st.ByQueueOthers.Keys != 0 || st.ByErrorType["big.error"] != 5 {
		t.Errorf("stats of queue big: %+v", st)
	}
	for _, bad := range []string{"0", "1001", "-1", "ten"} {
		wantError(t, "limit "+bad, b.get(t, "/ojs/v1/dead-letter/stats?limit="+bad, nil), http.StatusBadRequest, "invalid_request", "limit")
	}
}

func sumCounts(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}
