package bench

import (
	"bufio"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lazyweights/tensorfs/bytesize"
)

// TreeReport is what `tensorfs bench --tree` measured.
type TreeReport struct {
	Source     string    `json:"source"`
	Tensors    int       `json:"tensors"`
	Bytes      int64     `json:"bytes"`
	Header     int64     `json:"header_bytes"`
	MountFlags []string  `json:"mount_flags"`
	Machine    Machine   `json:"machine"`
	Runs       []TreeRun `json:"runs"`
}

// TreeRun is one mount of the tree checkpoint: the time to ready, a
// walk of the stored tree (hidden directories skipped), then two full
// walks (every view too), with the server's memory after each stage.
type TreeRun struct {
	ReadyMS       float64 `json:"ready_ms"` // start of the server to index.json
	StoredEntries int     `json:"stored_entries"`
	StoredMS      float64 `json:"stored_walk_ms"`
	StoredHWM     int64   `json:"stored_vmhwm"` // server VmHWM after the stored walk
	StoredAnon    int64   `json:"stored_rss_anon"`
	Entries       int     `json:"entries"`       // files and directories, views included
	WalkMS        float64 `json:"walk_ms"`       // first full walk
	AgainMS       float64 `json:"walk_again_ms"` // second full walk
	VmHWM         int64   `json:"server_vmhwm"`  // after the full walks
	RssAnon       int64   `json:"server_rss_anon"`
	ServerMS      float64 `json:"server_cpu_ms"` // CPU the server used, start to the end
}

// runTree measures mount time, full walks and server memory on a sparse
// checkpoint of n tensors and about size bytes.
func (b *harness) runTree(n int, size int64, count int) (*TreeReport, error) {
	// Cheap to write again, but kept like the read checkpoint in a --dir
	// of the caller's, for mounting by hand.
	b.source = filepath.Join(b.dir, fmt.Sprintf("tree-%d-%d.safetensors", n, size))
	b.logf("writing a sparse %s checkpoint of %d tensors to %s", bytesize.Format(size), n, b.source)
	files, total, header, err := generateTree(b.source, n, size)
	if !b.keep {
		defer func() {
			for _, f := range files {
				os.Remove(f)
			}
		}()
	}
	if err != nil {
		return nil, fmt.Errorf("bench: %v", err)
	}
	b.source = files[0]
	rep := &TreeReport{Source: b.source, Tensors: n, Bytes: total, Header: header, MountFlags: b.mountFlags, Machine: machineInfo()}
	if rep.MountFlags == nil {
		rep.MountFlags = []string{}
	}
	for run := 1; run <= count; run++ {
		b.logf("run %d of %d", run, count)
		s, err := b.startServer()
		if err != nil {
			return nil, err
		}
		r := TreeRun{ReadyMS: float64(s.ready.Microseconds()) / 1000}
		ms := func(start time.Time) float64 { return float64(time.Since(start).Microseconds()) / 1000 }
		start := time.Now()
		r.StoredEntries, err = walk(s.mnt, false)
		r.StoredMS = ms(start)
		r.StoredHWM, r.StoredAnon = s.memory()
		if err == nil {
			start = time.Now()
			r.Entries, err = walk(s.mnt, true)
			r.WalkMS = ms(start)
		}
		if err == nil {
			start = time.Now()
			_, err = walk(s.mnt, true)
			r.AgainMS = ms(start)
		}
		r.VmHWM, r.RssAnon = s.memory()
		r.ServerMS = float64(s.cpu().Microseconds()) / 1000
		if serr := s.stop(); err == nil {
			err = serr
		}
		if err != nil {
			return nil, err
		}
		rep.Runs = append(rep.Runs, r)
	}
	return rep, nil
}

// Print writes the report as a table.
func (rep *TreeReport) Print(out io.Writer) {
	n, total, header := rep.Tensors, rep.Bytes, rep.Header
	w := bufio.NewWriter(out)
	defer w.Flush()
	mf := strings.Join(rep.MountFlags, " ")
	if mf == "" {
		mf = "(defaults)"
	}
	m := rep.Machine
	fmt.Fprintf(w, "checkpoint: %d tensors, %s sparse safetensors file, %s header\n", n, bytesize.Format(total), bytesize.Format(header))
	fmt.Fprintf(w, "mount flags: %s\n", mf)
	fmt.Fprintf(w, "machine: %d CPUs (%s), %s memory, Linux %s, %s\n\n", m.CPUs, m.CPU, bytesize.Format(m.Memory), m.Kernel, m.Go)
	fmt.Fprintf(w, "  stored: the stored tree walked (hidden directories skipped); all: every view too, twice\n")
	fmt.Fprintf(w, "  %-3s %8s | %7s %8s %10s | %7s %8s %8s %10s %10s | %8s\n", "run", "ready", "stored", "walk", "VmHWM", "all", "walk", "again", "VmHWM", "RssAnon", "srv CPU")
	for i, r := range rep.Runs {
		fmt.Fprintf(w, "  %-3d %5.0f ms | %7d %5.0f ms %10s | %7d %5.0f ms %5.0f ms %10s %10s | %5.0f ms\n", i+1, r.ReadyMS,
			r.StoredEntries, r.StoredMS, bytesize.Format(r.StoredHWM),
			r.Entries, r.WalkMS, r.AgainMS, bytesize.Format(r.VmHWM), bytesize.Format(r.RssAnon), r.ServerMS)
	}
}

// walk reads every directory under root and stats every entry, as
// find -ls or ls -lR does; hidden directories (the views, .tensorfs) are
// skipped unless all. It returns the number of entries.
func walk(root string, all bool) (int, error) {
	n := 0
	err := filepath.WalkDir(root, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !all && d.IsDir() && p != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if _, err := d.Info(); err != nil {
			return err
		}
		n++
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("bench: walking %s: %v", root, err)
	}
	return n, nil
}
