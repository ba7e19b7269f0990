package bench

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// CacheTarget is the most page cache a read through the mount may add
// per byte read: one copy of each byte, and some slack.
const CacheTarget = 1.15

// CacheRow is the page cache that reading every tensor once through a
// fresh mount added, with the checkpoint's own pages dropped first.
type CacheRow struct {
	Name    string  `json:"name"`
	Label   string  `json:"label"`
	Bytes   int64   `json:"bytes"`        // read through the mount
	Growth  int64   `json:"cache_growth"` // page cache added, bytes
	PerByte float64 `json:"per_byte"`     // Growth / Bytes
	Target  float64 `json:"target"`       // at most
	Meter   string  `json:"meter"`        // what counted it
}

// exportPath is the safetensors export of a mount's top level.
const exportPath = ".safetensors/model.safetensors"

// cachePhase measures page cache growth for read(2) of every tensor file,
// for a copy out of a shared mapping of every .npy/ file (NumPy's
// mmap_mode="r"), for read(2) and a shared mapping of the safetensors
// export (a loader's safe_open), and for read(2) of the .f32/ view's
// export, each on a fresh mount after dropping the checkpoint's
// pages from the cache (posix_fadvise DONTNEED on its files: clean pages
// nobody maps go, so the mount's reads bring the bytes in anew and the
// growth counts both copies, if there are two).
func (b *harness) cachePhase(fds []int, ts []tensor) ([]CacheRow, error) {
	var rows []CacheRow
	var npy []tensor
	for _, t := range ts {
		t.path = filepath.Join(".npy", t.path+".npy")
		npy = append(npy, t)
	}
	for _, c := range []struct {
		name, label string
		job         func(mnt string) readJob
		n           int
	}{
		{"cache_read", "read(2) of every tensor", func(mnt string) readJob { return b.fileJob(mnt, "", ts) }, len(ts)},
		{"cache_npy_mmap", "mmap of every .npy/ file", func(mnt string) readJob { return b.npyMmapJob(mnt, npy) }, len(npy)},
		{"cache_export_read", "read(2) of the safetensors export", func(mnt string) readJob { return wholeFileJob(mnt, exportPath, false) }, 1},
		{"cache_export_mmap", "mmap of the safetensors export", func(mnt string) readJob { return wholeFileJob(mnt, exportPath, true) }, 1},
		{"cache_f32_export_read", "read(2) of the .f32/ export", func(mnt string) readJob { return wholeFileJob(mnt, filepath.Join(".f32", exportPath), false) }, 1},
	} {
		for _, fd := range fds {
			unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED)
		}
		meter := newCacheMeter() // this process and the server it starts
		s, err := b.startServer()
		if err != nil {
			meter.close()
			return nil, err
		}
		before, err := meter.read()
		var m measurement
		if err == nil {
			m, err = b.measure(s, c.n, c.job(s.mnt))
		}
		after, rerr := meter.read()
		if err == nil {
			err = rerr
		}
		if serr := s.stop(); err == nil {
			err = serr
		}
		meter.close()
		if err != nil {
			return nil, err
		}
		row := CacheRow{Name: c.name, Label: c.label, Bytes: m.bytes, Growth: after - before, Target: CacheTarget, Meter: meter.Source()}
		if m.bytes > 0 {
			row.PerByte = float64(row.Growth) / float64(m.bytes)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// npyMmapJob maps .npy file j of the mount whole and copies it out; the
// bytes are the file's. A tensor with no .npy file (a dtype NumPy lacks)
// reads nothing.
func (b *harness) npyMmapJob(mnt string, ts []tensor) readJob {
	return func(w, j int, buf []byte) (int64, error) {
		p := filepath.Join(mnt, ts[j].path)
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if os.IsNotExist(err) || err == unix.ENOENT {
			return 0, nil
		}
		if err != nil {
			return 0, fmt.Errorf("%s: %v", p, err)
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Size == 0 {
			return 0, err
		}
		m, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			return 0, fmt.Errorf("mmap %s: %v", p, err)
		}
		defer unix.Munmap(m)
		return copyOut(buf, m), nil
	}
}

// wholeFileJob reads the file rel of the mount whole, with read(2) or
// copied out of a shared mapping (safetensors' safe_open maps the file);
// it has one job.
func wholeFileJob(mnt, rel string, mmap bool) readJob {
	return func(w, j int, buf []byte) (int64, error) {
		p := filepath.Join(mnt, rel)
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return 0, fmt.Errorf("%s: %v", p, err)
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Size == 0 {
			return 0, err
		}
		if mmap {
			m, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ, unix.MAP_SHARED)
			if err != nil {
				return 0, fmt.Errorf("mmap %s: %v", p, err)
			}
			defer unix.Munmap(m)
			return copyOut(buf, m), nil
		}
		return readAll(fd, buf, p, st.Size)
	}
}
