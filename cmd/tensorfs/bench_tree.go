package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// benchTreeReport is what `tensorfs bench --tree` measured.
type benchTreeReport struct {
	Source     string         `json:"source"`
	Tensors    int            `json:"tensors"`
	Bytes      int64          `json:"bytes"`
	Header     int64          `json:"header_bytes"`
	MountFlags []string       `json:"mount_flags"`
	Machine    benchMachine   `json:"machine"`
	Runs       []benchTreeRun `json:"runs"`
}

// benchTreeRun is one mount of the tree checkpoint: the time to ready, a
// walk of the stored tree (hidden directories skipped), then two full
// walks (every view too), with the server's memory after each stage.
type benchTreeRun struct {
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
func (b *bench) runTree(n int, size int64, count int, jsonOut bool) error {
	// Cheap to write again, but kept like the read checkpoint in a --dir
	// of the caller's, for mounting by hand.
	b.source = filepath.Join(b.dir, fmt.Sprintf("tree-%d-%d.safetensors", n, size))
	b.logf("writing a sparse %s checkpoint of %d tensors to %s", loadHumanBytes(size), n, b.source)
	files, total, header, err := benchGenerateTree(b.source, n, size)
	if !b.keep {
		defer func() {
			for _, f := range files {
				os.Remove(f)
			}
		}()
	}
	if err != nil {
		return fmt.Errorf("bench: %v", err)
	}
	b.source = files[0]
	rep := &benchTreeReport{Source: b.source, Tensors: n, Bytes: total, Header: header, MountFlags: b.mountFlags, Machine: benchMachineInfo()}
	if rep.MountFlags == nil {
		rep.MountFlags = []string{}
	}
	for run := 1; run <= count; run++ {
		b.logf("run %d of %d", run, count)
		s, err := b.startServer()
		if err != nil {
			return err
		}
		r := benchTreeRun{ReadyMS: float64(s.ready.Microseconds()) / 1000}
		ms := func(start time.Time) float64 { return float64(time.Since(start).Microseconds()) / 1000 }
		start := time.Now()
		r.StoredEntries, err = benchWalk(s.mnt, false)
		r.StoredMS = ms(start)
		r.StoredHWM, r.StoredAnon = s.memory()
		if err == nil {
			start = time.Now()
			r.Entries, err = benchWalk(s.mnt, true)
			r.WalkMS = ms(start)
		}
		if err == nil {
			start = time.Now()
			_, err = benchWalk(s.mnt, true)
			r.AgainMS = ms(start)
		}
		r.VmHWM, r.RssAnon = s.memory()
		r.ServerMS = float64(s.cpu().Microseconds()) / 1000
		if serr := s.stop(); err == nil {
			err = serr
		}
		if err != nil {
			return err
		}
		rep.Runs = append(rep.Runs, r)
	}
	if jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	mf := strings.Join(rep.MountFlags, " ")
	if mf == "" {
		mf = "(defaults)"
	}
	m := rep.Machine
	fmt.Fprintf(w, "checkpoint: %d tensors, %s sparse safetensors file, %s header\n", n, loadHumanBytes(total), loadHumanBytes(header))
	fmt.Fprintf(w, "mount flags: %s\n", mf)
	fmt.Fprintf(w, "machine: %d CPUs (%s), %s memory, Linux %s, %s\n\n", m.CPUs, m.CPU, loadHumanBytes(m.Memory), m.Kernel, m.Go)
	fmt.Fprintf(w, "  stored: the stored tree walked (hidden directories skipped); all: every view too, twice\n")
	fmt.Fprintf(w, "  %-3s %8s | %7s %8s %10s | %7s %8s %8s %10s %10s | %8s\n", "run", "ready", "stored", "walk", "VmHWM", "all", "walk", "again", "VmHWM", "RssAnon", "srv CPU")
	for i, r := range rep.Runs {
		fmt.Fprintf(w, "  %-3d %5.0f ms | %7d %5.0f ms %10s | %7d %5.0f ms %5.0f ms %10s %10s | %5.0f ms\n", i+1, r.ReadyMS,
			r.StoredEntries, r.StoredMS, loadHumanBytes(r.StoredHWM),
			r.Entries, r.WalkMS, r.AgainMS, loadHumanBytes(r.VmHWM), loadHumanBytes(r.RssAnon), r.ServerMS)
	}
	return nil
}

// benchWalk reads every directory under root and stats every entry, as
// find -ls or ls -lR does; hidden directories (the views, .tensorfs) are
// skipped unless all. It returns the number of entries.
func benchWalk(root string, all bool) (int, error) {
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

// benchShardTensors is the most tensors the tree checkpoint puts in one
// safetensors file: a header of 400,000 such entries is about 48 MB,
// well under the format's 100 MB cap (index.MaxSafetensorsHeader).
const benchShardTensors = 400_000

// benchGenerateTree writes the tree checkpoint of n BF16 tensors named
// like a Hugging Face model's (model.layers.L.<part>.weight, one flat
// directory), each [rows, 4096], about size bytes in all, sparse. Up to
// benchShardTensors tensors it is the one safetensors file path; beyond,
// as Hugging Face shards a large model, a directory (path without
// ".safetensors") of shards of at most that many tensors (1.safetensors,
// 2.safetensors...: short names keep the weight map under its 64 MiB
// cap) and their weight map, model.safetensors.index.json. It returns
// the files written, the one to mount first and the directory last (the
// order to remove them in), the bytes of the shards and of their headers.
func benchGenerateTree(path string, n int, size int64) (files []string, total, header int64, err error) {
	parts := []string{"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", "input_layernorm"}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("model.layers.%d.%s.weight", i/len(parts), parts[i%len(parts)])
	}
	sort.Strings(names)
	if n <= benchShardTensors {
		total, header, err = benchGenerateSparse(path, names, size)
		return []string{path}, total, header, err
	}
	dir := strings.TrimSuffix(path, ".safetensors")
	if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
		return nil, 0, 0, err
	}
	index := filepath.Join(dir, "model.safetensors.index.json")
	files = []string{index}
	shards := (n + benchShardTensors - 1) / benchShardTensors
	weightMap := make(map[string]string, n)
	for k := 0; k < shards; k++ {
		name := fmt.Sprintf("%d.safetensors", k+1)
		files = append(files, filepath.Join(dir, name))
		part := names[k*benchShardTensors : min(n, (k+1)*benchShardTensors)]
		t, h, err := benchGenerateSparse(files[len(files)-1], part, size*int64(len(part))/int64(n))
		if err != nil {
			return append(files, dir), 0, 0, err
		}
		total, header = total+t, header+h
		for _, p := range part {
			weightMap[p] = name
		}
	}
	idx, err := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": total}, "weight_map": weightMap})
	if err == nil {
		err = os.WriteFile(index, idx, 0o644)
	}
	return append(files, dir), total, header, err
}

// benchGenerateSparse writes a safetensors file of the tensors names,
// each [rows, 4096] BF16, about size bytes in all: the header, then a
// hole. It returns the file's size and the header's.
func benchGenerateSparse(path string, names []string, size int64) (int64, int64, error) {
	const cols = 4096
	n := len(names)
	rowBytes := int64(2 * cols)
	rows := max(1, size/int64(n)/rowBytes)
	tsize := rows * rowBytes
	header := map[string]any{"__metadata__": map[string]string{"format": "pt", "generator": "tensorfs bench --tree"}}
	for i, name := range names {
		off := int64(i) * tsize
		header[name] = map[string]any{"dtype": "BF16", "shape": []int64{rows, cols}, "data_offsets": []int64{off, off + tsize}}
	}
	h, err := json.Marshal(header)
	if err != nil {
		return 0, 0, err
	}
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	f, err := os.Create(path)
	if err != nil {
		return 0, 0, err
	}
	var hl [8]byte
	binary.LittleEndian.PutUint64(hl[:], uint64(len(h)))
	total := 8 + int64(len(h)) + int64(n)*tsize
	_, err = f.Write(append(hl[:], h...))
	if err == nil {
		err = f.Truncate(total)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return total, 8 + int64(len(h)), err
}
