package dlq

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"
)

// NewID returns a new record id: a UUIDv7 (RFC 9562) whose timestamp is at's
// millisecond. The record tables are partitioned by week of their ids, so an
// id takes its time from the same clock as the record's other times (a
// service's Clock), never from the machine's: a test that moves the clock
// moves the weeks its records land in with it.
//
// Ids made in one process count up (a 12-bit counter in the version's
// rand_a field, RFC 9562 §6.2 method 1), so a batch's ids sort in the order
// they were made; past 4,096 in one millisecond the next millisecond is
// borrowed. A clock set back a little (less than a second) counts on from
// the latest millisecond. One set back further (tests run clocks of many
// times at once) counts at its own millisecond, as many times as it is
// made: an id stays of its time, and the ids of one millisecond still sort
// in the order they were made.
func NewID(at time.Time) string {
	ms, seq := ids.next(at.UnixMilli())
	var u [16]byte
	for i := range 6 {
		u[i] = byte(ms >> (40 - 8*i))
	}
	u[6] = 0x70 | byte(seq>>8) // version 7
	u[7] = byte(seq)
	_, _ = rand.Read(u[8:]) // never fails (crypto/rand's contract since Go 1.24)
	u[8] = 0x80 | u[8]&0x3f // variant 10
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:])
	return string(s[:])
}

// ids is the process's id counter.
var ids idCounter

// idCounter counts ids per millisecond.
type idCounter struct {
	mu     sync.Mutex
	lastMs int64            // the latest millisecond an id was made at
	seqs   map[int64]uint16 // the last counter of each recent millisecond
}

// maxCounted bounds idCounter.seqs: past it, the counts start again.
const maxCounted = 4096

// next returns the millisecond and counter of the next id made at ms.
func (c *idCounter) next(ms int64) (int64, uint16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ms < c.lastMs && c.lastMs-ms < 1000 {
		ms = c.lastMs // a clock stepped back a little: the ids still count up
	}
	var seq uint16
	for {
		last, seen := c.seqs[ms]
		if !seen {
			break
		}
		if last < 0xfff {
			seq = last + 1
			break
		}
		ms++ // 4,096 made in this millisecond: borrow the next
	}
	if c.seqs == nil || len(c.seqs) >= maxCounted {
		latest, seen := c.seqs[c.lastMs]
		c.seqs = make(map[int64]uint16, 64)
		if seen {
			c.seqs[c.lastMs] = latest
		}
	}
	c.seqs[ms] = seq
	c.lastMs = max(c.lastMs, ms)
	return ms, seq
}
