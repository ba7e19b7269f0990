package backing

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestForParsing: the parsing view reads exactly what the source reads,
// gives the source back, closes it, and leaves a mapping untouched.
func TestForParsing(t *testing.T) {
	const size = 64*4096 + 123
	data := pattern(size, 11)
	path := writeFile(t, data)
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			s := openMode(t, path, mode)
			v := ForParsing(s)
			if Unwrap(v) != s {
				t.Fatalf("Unwrap(ForParsing(s)) is not s")
			}
			if v.Size() != s.Size() || v.Name() != s.Name() {
				t.Errorf("view: size %d, name %q; source: %d, %q", v.Size(), v.Name(), s.Size(), s.Name())
			}
			buf := make([]byte, size+10)
			for _, r := range [][2]int64{{0, 1}, {0, size}, {4095, 2}, {size - 3, 10}, {size, 1}, {size + 5, 1}, {-1, 1}, {7 * 4096, 3 * 4096}} {
				checkRead(t, v, data, r[0], int(r[1]), buf)
			}
			if mode != Mmap {
				if v != s {
					t.Errorf("ForParsing of a %s source is not the source itself", mode)
				}
				return
			}
			m := s.(*mmapFile)
			if rss := mappingRSS(t, m.data); rss != 0 {
				t.Errorf("after reading the whole file through the parsing view, %d KiB of the mapping are resident; want 0", rss)
			}
			// The control: reading through the mapping does map pages, so
			// the check above can fail (a read under mmapPreadMin: larger
			// ones are preads).
			checkRead(t, s, data, 0, 4096, buf)
			if rss := mappingRSS(t, m.data); rss == 0 {
				t.Errorf("reading through the mapping left no page of it resident: the check cannot tell")
			}
			if err := v.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := s.ReadAt(buf[:1], 0); err == nil {
				t.Errorf("the source still reads after the view's Close")
			}
		})
	}
}

// mappingRSS returns the resident KiB of the mapping that starts at
// data[0], from /proc/self/smaps.
func mappingRSS(t *testing.T, data []byte) int {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	defer f.Close()
	start := fmt.Sprintf("%x-", uintptr(unsafe.Pointer(&data[0])))
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, start) {
			in = true
			continue
		}
		if in && strings.HasPrefix(line, "Rss:") {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(line, "Rss:"), "kB")))
			if err != nil {
				t.Fatalf("smaps: %q: %v", line, err)
			}
			return kb
		}
	}
	t.Fatalf("mapping at %s not found in /proc/self/smaps", start)
	return 0
}
