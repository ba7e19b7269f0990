package backing

import (
	"strings"
	"sync/atomic"
	"testing"
)

// TestInflateNow: InflateNow decodes a member at once and returns its
// error instead of logging it (a parser reading the member at load, whose
// error is the load's); the bad data is remembered for reads; a good
// member is then read without inflating again.
func TestInflateNow(t *testing.T) {
	good, bad := randomBytes(1, 1<<16), randomBytes(2, 1<<16)
	zf, ms := members(t, good, bad)
	editCodec(&ms[1], func(k *Deflated) { k.CRC32 ^= 1 })
	var logged atomic.Int32
	c := NewInflateCache(InflateOptions{Dir: t.TempDir(), Logf: func(string, ...any) { logged.Add(1) }})
	g, err := c.OpenMember(zf, ms[0])
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := InflateNow(g); err != nil {
		t.Fatal(err)
	}
	if n := c.Stats().Inflations; n != 1 {
		t.Fatalf("%d inflations, want 1", n)
	}
	checkReads(t, g, good)
	if n := c.Stats().Inflations; n != 1 {
		t.Errorf("%d inflations after reading, want 1 (the one InflateNow made)", n)
	}
	b, err := c.OpenMember(zf, ms[1])
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	err = InflateNow(b)
	if err == nil || !strings.Contains(err.Error(), "CRC-32") {
		t.Fatalf("InflateNow of a bad member: %v", err)
	}
	if n := logged.Load(); n != 0 {
		t.Errorf("%d lines logged, want none (the error is returned)", n)
	}
	if err2 := InflateNow(b); err2 == nil || err2.Error() != err.Error() {
		t.Errorf("again: %v, want %v", err2, err)
	}
	if _, err := b.ReadAt(make([]byte, 1), 0); err == nil || !strings.Contains(err.Error(), "CRC-32") {
		t.Errorf("read of the bad member: %v", err)
	}
}
