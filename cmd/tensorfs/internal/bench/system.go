package bench

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// warm reads every file once and returns the fraction of their pages
// resident in the page cache afterwards (mincore).
func warm(fds []int) (float64, error) {
	buf := make([]byte, 4<<20)
	var pages, resident int64
	for _, fd := range fds {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return 0, err
		}
		for off := int64(0); off < st.Size; {
			n, err := unix.Pread(fd, buf, off)
			if err != nil {
				return 0, err
			}
			if n == 0 {
				break
			}
			off += int64(n)
		}
		if st.Size == 0 {
			continue
		}
		m, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			return 0, err
		}
		vec := make([]byte, (st.Size+4095)/4096)
		_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
		unix.Munmap(m)
		if errno != 0 {
			return 0, errno
		}
		for _, v := range vec {
			resident += int64(v & 1)
		}
		pages += int64(len(vec))
	}
	if pages == 0 {
		return 1, nil
	}
	return float64(resident) / float64(pages), nil
}

// sink keeps the loads that map pages from being optimized away.
var sink byte

// largeFolios returns the fraction of up to 4096 evenly spaced pages
// of the files that sit in large (compound) folios, from /proc/self/pagemap
// and /proc/kpageflags; -1 when those cannot be read (they need root).
func largeFolios(fds []int) float64 {
	pagemap, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return -1
	}
	defer pagemap.Close()
	kflags, err := os.Open("/proc/kpageflags")
	if err != nil {
		return -1
	}
	defer kflags.Close()
	const (
		present      = 1 << 63
		pfnMask      = 1<<55 - 1
		compoundHead = 1 << 15
		compoundTail = 1 << 16
	)
	var seen, large int
	var b [8]byte
	for _, fd := range fds {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil || st.Size == 0 {
			continue
		}
		m, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			continue
		}
		npages := (st.Size + 4095) / 4096
		step := max(1, npages/4096)
		base := uintptr(unsafe.Pointer(&m[0])) / 4096
		for pg := int64(0); pg < npages; pg += step {
			sink += m[pg*4096] // map it (the page is cached: a minor fault)
			if _, err := pagemap.ReadAt(b[:], int64(base+uintptr(pg))*8); err != nil {
				break
			}
			e := binary.LittleEndian.Uint64(b[:])
			if e&present == 0 || e&pfnMask == 0 {
				continue
			}
			if _, err := kflags.ReadAt(b[:], int64(e&pfnMask)*8); err != nil {
				break
			}
			seen++
			if binary.LittleEndian.Uint64(b[:])&(compoundHead|compoundTail) != 0 {
				large++
			}
		}
		unix.Munmap(m)
	}
	if seen == 0 {
		return -1
	}
	return float64(large) / float64(seen)
}

// selfCPU returns the CPU time (user + system) this process used.
func selfCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machineInfo describes this machine.
func machineInfo() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		m.Memory = int64(si.Totalram) * int64(si.Unit)
	}
	return m
}

// readProcStatus reads fields of /proc/PID/status in bytes.
func readProcStatus(pid int) (hwm, rssAnon int64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(fields[0], 10, 64)
		switch k {
		case "VmHWM":
			hwm = n << 10
		case "RssAnon":
			rssAnon = n << 10
		}
	}
	return hwm, rssAnon
}

// mountLargeFolios returns largeFolios of the tensors' files in the mount
// at mnt (opened only to be mapped: their pages are cached already).
func mountLargeFolios(mnt string, ts []tensor) float64 {
	var fds []int
	for _, t := range ts {
		fd, err := unix.Open(filepath.Join(mnt, t.path), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		defer unix.Close(fd)
		fds = append(fds, fd)
	}
	return largeFolios(fds)
}
