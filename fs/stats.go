package fs

import (
	"encoding/json"
	"sync/atomic"
	"time"
)

// stats are the live counters shown in .tensorfs/stats.json.
type stats struct {
	start  time.Time // constant
	opens  atomic.Uint64
	reads  atomic.Uint64
	bytes  atomic.Uint64
	errors atomic.Uint64
	panics atomic.Uint64
	// spliced counts reads handed to go-fuse to splice; copiedTails the
	// reads that could have been but were copied, the pipe being unable
	// to take them whole (read.go: splicedWhole).
	spliced     atomic.Uint64
	copiedTails atomic.Uint64
	// flushes: FLUSH requests received (raw.go: none is wanted); not
	// in stats.json, for tests
	flushes atomic.Uint64
}

// Stats is a snapshot of a mounted tree's counters.
type Stats struct {
	Reads   uint64 `json:"reads"`   // READ requests answered with data or EOF
	Bytes   uint64 `json:"bytes"`   // bytes returned by them
	Errors  uint64 `json:"errors"`  // requests that failed with an I/O error
	Panics  uint64 `json:"panics"`  // requests that panicked (answered EIO)
	Opens   uint64 `json:"opens"`   // files opened
	Tensors int    `json:"tensors"` // tensors in the index
	Files   uint64 `json:"files"`   // regular files in the tree
	Dropped int    `json:"dropped"` // tensors left out of a view (see the log)
	// BackingDropped is the bytes of backing-file chunks dropped from the
	// page cache once served (see Options.KeepBackingCache).
	BackingDropped uint64 `json:"backing_dropped_bytes"`
	// Spliced is the reads answered by splicing from a backing file;
	// SpliceCopied the reads that would have been, but were copied since
	// go-fuse's pipe could not have taken them whole (a file's last,
	// partial request, at some offsets: docs/BENCHMARKS.md).
	Spliced      uint64  `json:"spliced_reads"`
	SpliceCopied uint64  `json:"splice_copied_reads"`
	Uptime       float64 `json:"uptime_s"` // seconds since the tree was built
}

func (s *stats) snapshot(r *Root) Stats {
	return Stats{
		Reads:          s.reads.Load(),
		Bytes:          s.bytes.Load(),
		Errors:         s.errors.Load(),
		Panics:         s.panics.Load(),
		Opens:          s.opens.Load(),
		Tensors:        len(r.idx.Tensors),
		Files:          r.files,
		Dropped:        r.dropped,
		BackingDropped: r.cache.droppedBytes(),
		Spliced:        s.spliced.Load(),
		SpliceCopied:   s.copiedTails.Load(),
		Uptime:         time.Since(s.start).Seconds(),
	}
}

// statsJSON renders the counters as stats.json.
func (r *Root) statsJSON() []byte {
	b, _ := json.MarshalIndent(r.Stats(), "", "  ")
	return append(b, '\n')
}
