package backing

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Residency sampling: how much of a file the page cache holds, read with
// mincore(2) over a few windows of a short-lived mapping. Callers use it to
// choose between reading through the page cache (a warm file) and
// O_DIRECT (a cold one, whose bytes would only evict others).
const (
	residencyWindows = 64      // windows sampled, spread evenly over the file
	residencyWindow  = 1 << 20 // bytes per window
)

// Residency returns the fraction (0 to 1) of src's sampled pages that are
// in the page cache: every page of a file up to 64 MiB, else 64 windows
// of 1 MiB spread evenly over it. ok is false where it cannot be told: a
// source without a plain descriptor (remote, O_DIRECT), an empty file, or
// a mapping or mincore that fails. It reads no file data.
func Residency(src Source) (frac float64, ok bool) {
	fs, isFd := src.(FdSource)
	if !isFd {
		return 0, false
	}
	fd, fdOK := fs.Fd()
	size := src.Size()
	if !fdOK || size <= 0 {
		return 0, false
	}
	page := int64(unix.Getpagesize())
	var resident, total int64
	sample := func(off, n int64) bool {
		off &^= page - 1
		if off+n > size {
			n = size - off
		}
		if n <= 0 {
			return true
		}
		m, err := unix.Mmap(int(fd), off, int(n), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			return false
		}
		defer unix.Munmap(m)
		vec := make([]byte, (n+page-1)/page)
		if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
			return false
		}
		for _, v := range vec {
			if v&1 != 0 {
				resident++
			}
		}
		total += int64(len(vec))
		return true
	}
	if size <= residencyWindows*residencyWindow {
		if !sample(0, size) {
			return 0, false
		}
	} else {
		step := (size - residencyWindow) / (residencyWindows - 1)
		for i := int64(0); i < residencyWindows; i++ {
			if !sample(i*step, residencyWindow) {
				return 0, false
			}
		}
	}
	if total == 0 {
		return 0, false
	}
	return float64(resident) / float64(total), true
}
