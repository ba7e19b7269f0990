package pickle

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

// The memo keeps Python's semantics with its dense and sparse parts:
// MEMOIZE takes len(memo) as its key, PUT may use any key, and a later
// PUT overwrites.
func TestMemo(t *testing.T) {
	for _, c := range []struct {
		name, p string
		want    any
	}{
		// PUT 5, MEMOIZE (key 1 = len), GET 1, GET 5.
		{"sparse then memoize", "\x80\x04K\x07q\x05K\x08\x94\x86h\x01h\x05\x86\x86.", Tuple{Tuple{int64(7), int64(8)}, Tuple{int64(8), int64(7)}}},
		// PUT 1, PUT 0 (1 becomes dense), MEMOIZE (key 2), GET 2.
		{"sparse joins the dense run", "\x80\x04K\x01q\x01K\x00q\x00K\x02\x94h\x00h\x01h\x02\x87\x87.", Tuple{int64(0), int64(2), Tuple{int64(0), int64(1), int64(2)}}},
		// PUT 0 twice: the second value wins.
		{"overwrite", "\x80\x04K\x01q\x00K\x02q\x00h\x00\x87.", Tuple{int64(1), int64(2), int64(2)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := NewMachine(strings.NewReader(c.p), int64(len(c.p)), PlainEnv{}).Run()
			if err != nil {
				t.Fatal(err)
			}
			if Repr(v, 200) != Repr(c.want, 200) {
				t.Fatalf("got %s, want %s", Repr(v, 200), Repr(c.want, 200))
			}
		})
	}
}

// A flood of MEMOIZE opcodes (issue 28: 8,000,000 of them, 8 MB, took
// 540 MiB) stops at MaxMemo of the stream's size, or of the cost a
// compressed stream is given (SetCost).
func TestMemoBudget(t *testing.T) {
	for _, c := range []struct {
		name      string
		n, cost   int
		wantLimit int64
	}{
		{"plain", 1 << 20, 0, MaxMemo(1<<20 + 4)},
		{"compressed", 1 << 20, 2000, MaxMemo(2000)},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := append(append([]byte("\x80\x04}"), bytes.Repeat([]byte{OpMEMOIZE}, c.n)...), '.')
			m := NewMachine(bytes.NewReader(p), int64(len(p)), PlainEnv{})
			if c.cost > 0 {
				m.SetCost(int64(c.cost))
			}
			_, err := m.Run()
			if err == nil || !strings.Contains(err.Error(), "pickle memoizes more values than its size allows (limit pickle.MaxMemo: ") {
				t.Fatalf("got %v", err)
			}
			if m.memo.len() != c.wantLimit {
				t.Fatalf("memo grew to %d entries, want the limit %d", m.memo.len(), c.wantLimit)
			}
		})
	}
	// Up to the limit is fine: MemoFloor entries whatever the size.
	p := append(append([]byte("\x80\x04}"), bytes.Repeat([]byte{OpMEMOIZE}, MemoFloor)...), '.')
	if _, err := NewMachine(bytes.NewReader(p), int64(len(p)), PlainEnv{}).Run(); err != nil {
		t.Fatal(err)
	}
}

// TestMemoMemory: a flood of MEMOIZE opcodes (issue 34: an 8 MB one
// peaked at 265 MiB, 33 times the file) allocates no more than the memo
// it is allowed: 16 bytes an entry, MaxMemo entries, about 8 times the
// pickle. A memo grown by append allocated the entries 5 times over.
func TestMemoMemory(t *testing.T) {
	const n = 1 << 20
	p := append(append([]byte("\x80\x04}"), bytes.Repeat([]byte{OpMEMOIZE}, n)...), '.')
	m := NewMachine(bytes.NewReader(p), int64(len(p)), PlainEnv{})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := m.Run()
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("the flood was not refused")
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	limit := uint64(16*MaxMemo(int64(len(p)))) + 256<<10
	if alloc > limit {
		t.Errorf("the flood allocated %d bytes; the memo's limit is %d (%d entries)", alloc, limit, MaxMemo(int64(len(p))))
	}
	t.Logf("%d bytes allocated for %d bytes of pickle", alloc, len(p))
}
