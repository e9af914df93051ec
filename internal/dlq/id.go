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
// borrowed. A clock set back by a second or more (a test's) starts a new
// count at its own millisecond: the id stays of its time.
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

type idCounter struct {
	mu     sync.Mutex
	lastMs int64
	seq    uint16
}

// next returns the millisecond and counter of the next id made at ms.
func (c *idCounter) next(ms int64) (int64, uint16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case ms > c.lastMs || c.lastMs-ms >= 1000:
		c.lastMs, c.seq = ms, 0
	case c.seq == 0xfff:
		c.lastMs, c.seq = c.lastMs+1, 0
	default:
		c.seq++
	}
	return c.lastMs, c.seq
}
