package bench

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/lazyweights/tensorfs/bytesize"
)

// median returns, for every row name, the median of each figure
// over the runs.
func median(runs []RunResult) []Row {
	var out []Row
	for i, first := range runs[0].Rows {
		col := func(get func(Row) float64) float64 {
			var v []float64
			for _, r := range runs {
				if i < len(r.Rows) {
					v = append(v, get(r.Rows[i]))
				}
			}
			sort.Float64s(v)
			if len(v)%2 == 1 {
				return v[len(v)/2]
			}
			return (v[len(v)/2-1] + v[len(v)/2]) / 2
		}
		m := first
		m.BaselineGBps = col(func(r Row) float64 { return r.BaselineGBps })
		m.GBps = col(func(r Row) float64 { return r.GBps })
		m.Ratio = col(func(r Row) float64 { return r.Ratio })
		m.Seconds = col(func(r Row) float64 { return r.Seconds })
		m.ReaderCPU = col(func(r Row) float64 { return r.ReaderCPU })
		m.ServerCPU = col(func(r Row) float64 { return r.ServerCPU })
		m.Requests = uint64(col(func(r Row) float64 { return float64(r.Requests) }))
		m.RequestKiB = col(func(r Row) float64 { return r.RequestKiB })
		out = append(out, m)
	}
	return out
}

// Print writes the report as tables.
func (rep *Report) Print(w io.Writer) {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	origin := ""
	if rep.Generated {
		origin = ", generated"
	}
	fmt.Fprintf(bw, "checkpoint: %s: %s, %s (%s)%s", rep.Source, countOf(rep.Tensors, "tensor"), bytesize.Format(rep.Bytes), rep.DTypes, origin)
	if rep.Skipped > 0 {
		fmt.Fprintf(bw, "; %s left out", countOf(rep.Skipped, "non-contiguous tensor"))
	}
	folios := ""
	if rep.LargeFolios >= 0 {
		folios = fmt.Sprintf(", %.0f%% of it in large folios", 100*rep.LargeFolios)
	}
	fmt.Fprintf(bw, "\nreaders: %d, %s reads; page cache: %.0f%% of the checkpoint resident%s\n", rep.Readers, bytesize.Format(int64(rep.Block)), 100*rep.Resident, folios)
	mf := strings.Join(rep.MountFlags, " ")
	if mf == "" {
		mf = "(defaults)"
	}
	fmt.Fprintf(bw, "mount flags: %s\n", mf)
	m := rep.Machine
	fmt.Fprintf(bw, "machine: %d CPUs (%s), %s memory, Linux %s, %s\n", m.CPUs, m.CPU, bytesize.Format(m.Memory), m.Kernel, m.Go)
	for i, r := range rep.Runs {
		var ready []string
		for _, ms := range r.ReadyMS {
			ready = append(ready, fmt.Sprintf("%.0f ms", ms))
		}
		folios := ""
		if r.MountLargeFolios >= 0 {
			folios = fmt.Sprintf("; mount's cache %.0f%% in large folios", 100*r.MountLargeFolios)
		}
		fmt.Fprintf(bw, "\nrun %d of %d (mounts ready in %s; server RssAnon %s%s; load average %.1f, then %.1f)\n", i+1, len(rep.Runs), strings.Join(ready, ", "), bytesize.Format(r.ServerAnon), folios, r.Load[0], r.Load[1])
		table(bw, r.Rows)
		cacheTable(bw, r.Cache)
	}
	if len(rep.Median) > 0 {
		fmt.Fprintf(bw, "\nmedian of %d runs\n", len(rep.Runs))
		table(bw, rep.Median)
	}
}

func table(w io.Writer, rows []Row) {
	fmt.Fprintf(w, "  %-34s %-18s %9s %9s %7s %-13s %8s %8s %9s %7s\n", "measurement", "baseline", "base GB/s", "GB/s", "ratio", "target", "rdr CPU", "srv CPU", "requests", "KiB/req")
	for _, r := range rows {
		target := ""
		if r.Target > 0 {
			target = fmt.Sprintf(">=%.2f %s", r.Target, metWord(r.Ratio >= r.Target))
		}
		reqSize := "-"
		if r.Requests > 0 {
			reqSize = fmt.Sprintf("%.0f", r.RequestKiB)
		}
		fmt.Fprintf(w, "  %-34s %-18s %9.2f %9.2f %7.2f %-13s %7.2fs %7.2fs %9d %7s\n", r.Label, r.Baseline, r.BaselineGBps, r.GBps, r.Ratio, target, r.ReaderCPU, r.ServerCPU, r.Requests, reqSize)
	}
}

// metWord says whether a row's figure met its target: "met" or
// "MISSED" (a target printed alone left the reader to compare).
func metWord(met bool) string {
	if met {
		return "met"
	}
	return "MISSED"
}

// cacheTable prints the page cache growth rows, if any.
func cacheTable(w io.Writer, rows []CacheRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "  %-34s %12s %12s %9s %-13s  %s\n", "page cache growth, fresh mount", "read", "cache grew", "per byte", "target", "counted by")
	for _, r := range rows {
		fmt.Fprintf(w, "  %-34s %12s %12s %9.2f %-13s  %s\n", r.Label, bytesize.Format(r.Bytes), bytesize.Format(r.Growth), r.PerByte, fmt.Sprintf("<=%.2f %s", r.Target, metWord(r.PerByte <= r.Target)), r.Meter)
	}
}

// countOf is "1 tensor", "2 tensors": n and noun, plural unless n is 1.
func countOf(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
