package template

import (
	"fmt"
	"runtime"
	"testing"
)

// The memory the miner accounts is the memory it holds: filled with
// distinct messages until it overflows, the heap it keeps stays within
// MaxBytes (and a margin for what the accounting rounds).
func TestMaxBytesBoundsTheHeap(t *testing.T) {
	const maxBytes = 4 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m := newMiner(t, Config{MaxBytes: maxBytes})
	msg := make([]string, 24)
	for i := 0; m.Stats().Overflowed < 1000; i++ {
		for k := range msg {
			// Lower-case words are pinned: every message is a template.
			msg[k] = fmt.Sprintf("word%c%c%c", 'a'+i%26, 'a'+i/26%26, 'a'+k%26)
		}
		m.Add(fmt.Sprintf("queue-%d\x00Error", i%50), msg)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	s := m.Stats()
	t.Logf("%d groups, %d templates: accounted %d bytes, heap %d bytes", s.Groups, s.Templates, s.Bytes, held)
	if s.Bytes > maxBytes || held > maxBytes*3/2 {
		t.Errorf("accounted %d, heap %d bytes, want both within MaxBytes %d (heap: 1.5×)", s.Bytes, held, maxBytes)
	}
	runtime.KeepAlive(m)
}
