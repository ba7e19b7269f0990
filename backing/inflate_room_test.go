package backing

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestInflateWaitsForRoom: members that each fit the disk limit but not
// together (four of 1 MiB with room for one and a half), read whole by 8
// goroutines at once in chunks, are all served right: a reservation waits
// for room instead of failing, and a member being read is not dropped
// under its reader. Nothing is timed: the count of failed reads is.
func TestInflateWaitsForRoom(t *testing.T) {
	const size = 1 << 20
	var contents [][]byte
	for i := 0; i < 4; i++ {
		contents = append(contents, randomBytes(int64(20+i), size))
	}
	f, ms := members(t, contents...)
	cache := NewInflateCache(InflateOptions{MemLimit: -1, DiskLimit: size + size/2, Dir: t.TempDir(), Logf: func(string, ...any) {}})
	var srcs []Source
	for _, m := range ms {
		src, err := cache.OpenMember(f, m)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		srcs = append(srcs, src)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 4; k++ {
				i := (g + k) % 4
				got, err := io.ReadAll(io.NewSectionReader(srcs[i], 0, size))
				if err != nil {
					errs <- fmt.Errorf("member %d: %v", i, err)
					return
				}
				if !bytes.Equal(got, contents[i]) {
					errs <- fmt.Errorf("member %d: wrong bytes", i)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		if n++; n <= 3 {
			t.Error(err)
		}
	}
	if n > 0 {
		t.Fatalf("%d of 8 readers failed", n)
	}
	if st := cache.Stats(); st.DiskBytes > size+size/2 {
		t.Fatalf("%d bytes in files, limit %d", st.DiskBytes, size+size/2)
	}
}

// TestInflateWaitBounded: a reservation that cannot get room (the limit
// held, here by a reservation that is never released) fails after
// InflateOptions.Wait, saying so; once the room is free, the next read
// of the member succeeds. The outcome is asserted, not the time.
func TestInflateWaitBounded(t *testing.T) {
	const size = 1 << 20
	content := randomBytes(30, size)
	f, ms := members(t, content)
	cache := NewInflateCache(InflateOptions{MemLimit: -1, DiskLimit: size, Dir: t.TempDir(), Wait: time.Millisecond, Logf: func(string, ...any) {}})
	if err := cache.reserveDisk(size, true, 0); err != nil {
		t.Fatal(err)
	}
	src, err := cache.OpenMember(f, ms[0])
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	buf := make([]byte, 10)
	if _, err := src.ReadAt(buf, 0); err == nil || !strings.Contains(err.Error(), "waited 1ms for room") {
		t.Fatalf("read while the room is held: %v, want a bounded wait", err)
	}
	cache.release(false, size)
	checkReads(t, src, content)
}

// TestInflateNestedNoWait: a Latin-1 member of a deflated member, both
// inflated to files: with room for both it is served; with room for
// either but not both it fails at once, saying so, instead of waiting
// (bounded by Wait, here a minute) for room its own outer member holds.
func TestInflateNestedNoWait(t *testing.T) {
	small := bytes.Repeat([]byte("latin-1 \xe9"), 20_000)
	u := latin1UTF8(small)
	pkl := append(append([]byte("pickle head "), u...), " tail"...)
	f, ms := members(t, pkl)
	for _, tc := range []struct {
		limit int64
		ok    bool
	}{
		{int64(len(pkl) + len(small)), true},
		{int64(len(pkl)+len(small)) - 1, false},
	} {
		cache := NewInflateCache(InflateOptions{MemLimit: -1, DiskLimit: tc.limit, Dir: t.TempDir(), Wait: time.Minute, Logf: func(string, ...any) {}})
		outer, err := cache.OpenMember(f, ms[0])
		if err != nil {
			t.Fatal(err)
		}
		inner, err := cache.OpenMember(outer, Member{Name: "np/a", Size: int64(len(small)), Codec: Latin1{Offset: 12, Len: int64(len(u))}})
		if err != nil {
			t.Fatal(err)
		}
		if tc.ok {
			checkReads(t, inner, small)
		} else if _, err := inner.ReadAt(make([]byte, 10), 0); err == nil || !strings.Contains(err.Error(), "with the "+fmt.Sprint(len(pkl))+" bytes of the member it is read from") {
			t.Errorf("limit %d: %v, want a refusal at once", tc.limit, err)
		}
		inner.Close()
		outer.Close()
	}
}
