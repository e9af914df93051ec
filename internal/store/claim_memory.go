package store

import (
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/reuse"
)

// Release gives what the claim holds back to its store for the claims that
// follow: the blocks its records' keys and values were copied into, and the
// slices of its records and their prior states. Nothing may use the claim's
// records after it, nor anything cut from them (a key, a value, a Kafka
// record built on them); the scheduler releases a claim once its batch is
// produced and settled. A claim that is never released is collected as any
// other value.
//
// Why: a draining backlog claims about a megabyte of records a batch, and
// allocating it anew for every batch ran the garbage collector every few
// batches, each cycle also dropping the Kafka client's pooled request
// buffers, which then grew again from a kilobyte. Released and reused,
// what a batch allocates fell by about two thirds, and the scheduler's own
// CPU a record by about a quarter (the runs are in the git history of
// docs/performance.md).
func (c *Claim) Release() {
	if c.values.mem == nil {
		return
	}
	c.values.mem.put(c.values.blocks, c.Records, c.prior)
	c.values, c.Records, c.prior = arena{}, nil, nil
}

// claimMemory keeps what released claims held, up to a bound, so that an
// idle scheduler holds at most a few megabytes it does not use.
type claimMemory struct {
	// blocks keeps up to 8 MiB of blocks of keys and values, about eight
	// claims of 1 KiB records.
	blocks reuse.Stack[[]byte]
	// slices keeps the record slices (with their prior states) of up to
	// eight claims; a claim of 1,000 records is about 660 KB of dlq.Record.
	slices reuse.Stack[claimSlices]
}

type claimSlices struct {
	records []dlq.Record
	prior   []prior
}

func newClaimMemory() *claimMemory {
	return &claimMemory{blocks: reuse.Stack[[]byte]{Max: 32}, slices: reuse.Stack[claimSlices]{Max: 8}}
}

// slicesFor returns empty slices of records and prior states with room for
// n, kept ones when there are.
func (m *claimMemory) slicesFor(n int) ([]dlq.Record, []prior) {
	for {
		s, ok := m.slices.Get()
		if !ok {
			return make([]dlq.Record, 0, n), make([]prior, 0, n)
		}
		if cap(s.records) >= n && cap(s.prior) >= n {
			return s.records, s.prior
		}
	}
}

// block returns an empty block of arenaBlock bytes, a kept one when there is.
func (m *claimMemory) block() []byte {
	if b, ok := m.blocks.Get(); ok {
		return b
	}
	return make([]byte, 0, arenaBlock)
}

// put keeps a released claim's blocks and slices, emptied (the records
// zeroed, so that they hold on to nothing), as far as the bounds allow.
func (m *claimMemory) put(blocks [][]byte, recs []dlq.Record, prs []prior) {
	for _, b := range blocks {
		if !m.blocks.Put(b[:0]) {
			break
		}
	}
	if cap(recs) > 0 {
		clear(recs[:cap(recs)])
		clear(prs[:cap(prs)])
		m.slices.Put(claimSlices{records: recs[:0], prior: prs[:0]})
	}
}

// arena hands out copies of byte slices cut from larger blocks: a claim's
// keys and values in a few allocations instead of two per record, blocks
// that its claim's release gives back to mem.
type arena struct {
	mem    *claimMemory
	block  []byte   // the block being filled
	blocks [][]byte // every block handed out, the one being filled included
}

// arenaBlock is the size of an arena's blocks; a slice larger than a
// quarter of it gets an allocation of its own.
const arenaBlock = 256 << 10

// copy returns a copy of b that stays valid as long as it is referenced
// and its claim is not released: nil for nil (a NULL), empty and not nil
// for empty. Its capacity ends with it, so an append to it copies.
func (a *arena) copy(b []byte) []byte {
	if b == nil {
		return nil
	}
	if len(b) > arenaBlock/4 {
		return append(make([]byte, 0, len(b)), b...)
	}
	// A block even for an empty b: a slice of a nil block would be nil,
	// which is a NULL key, not an empty one.
	if a.block == nil || len(a.block)+len(b) > cap(a.block) {
		a.block = a.mem.block()
		a.blocks = append(a.blocks, a.block)
	}
	start := len(a.block)
	a.block = append(a.block, b...)
	return a.block[start:len(a.block):len(a.block)]
}
