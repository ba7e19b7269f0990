package bench

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/view"
)

// Generate writes a safetensors checkpoint of about size bytes:
// tensors of size/64 (1 MiB to 64 MiB), BF16 and F16 alternately, of
// weight-like values (normal, standard deviation 0.02), the file synced
// so that writeback does not run during the measurements.
func Generate(path string, size int64) error {
	const mib = 1 << 20
	tsize := max(mib, min(64*mib, size/64/mib*mib))
	n := max(1, int(size/tsize))
	const cols = 4096
	rows := tsize / 2 / cols
	suffixes := []string{"self_attn.q_proj", "self_attn.o_proj", "mlp.up_proj", "mlp.down_proj"}
	type ent struct {
		name string
		dt   dtype.DType
	}
	ents := make([]ent, n)
	for i := range ents {
		dt := dtype.BF16
		if i%2 == 1 {
			dt = dtype.F16
		}
		ents[i] = ent{fmt.Sprintf("model.layers.%d.%s.weight", i/len(suffixes), suffixes[i%len(suffixes)]), dt}
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].name < ents[j].name })
	hts := make([]view.HeaderTensor, len(ents))
	for i, e := range ents {
		hts[i] = view.HeaderTensor{Name: e.name, DType: e.dt, Shape: []int64{rows, cols}, Size: tsize}
	}
	h, err := view.SafetensorsHeader(map[string]string{"format": "pt", "generator": "tensorfs bench"}, hts)
	if err != nil {
		return err
	}
	blocks := map[dtype.DType][]byte{}
	rng := rand.New(rand.NewPCG(1, 2))
	f64 := make([]byte, 8*(mib/2))
	for i := 0; i < mib/2; i++ {
		binary.LittleEndian.PutUint64(f64[8*i:], math.Float64bits(rng.NormFloat64()*0.02))
	}
	for _, dt := range []dtype.DType{dtype.BF16, dtype.F16} {
		c, ok := dtype.ConverterFor(dtype.F64, dt)
		if !ok {
			return fmt.Errorf("no converter to %s", dt)
		}
		blk := make([]byte, mib)
		c(blk, f64)
		blocks[dt] = blk
	}

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 4*mib)
	w.Write(h)
	for _, e := range ents {
		blk := blocks[e.dt]
		for done := int64(0); done < tsize; done += mib {
			if _, err := w.Write(blk); err != nil {
				f.Close()
				return err
			}
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// shardTensors is the most tensors the tree checkpoint puts in one
// safetensors file: a header of 400,000 such entries is about 48 MB,
// well under the format's 100 MB cap (index.MaxSafetensorsHeader).
const shardTensors = 400_000

// generateTree writes the tree checkpoint of n BF16 tensors named like a
// Hugging Face model's (model.layers.L.<part>.weight, one flat
// directory), each [rows, 4096], about size bytes in all, sparse. Up to
// shardTensors tensors it is the one safetensors file path; beyond, as
// Hugging Face shards a large model, a directory (path without
// ".safetensors") of shards of at most that many tensors (1.safetensors,
// 2.safetensors...: short names keep the weight map under its 64 MiB
// cap) and their weight map, model.safetensors.index.json. It returns
// the files written, the one to mount first and the directory last (the
// order to remove them in), the bytes of the shards and of their headers.
func generateTree(path string, n int, size int64) (files []string, total, header int64, err error) {
	parts := []string{"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", "input_layernorm"}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("model.layers.%d.%s.weight", i/len(parts), parts[i%len(parts)])
	}
	sort.Strings(names)
	if n <= shardTensors {
		total, header, err = generateSparse(path, names, size)
		return []string{path}, total, header, err
	}
	dir := strings.TrimSuffix(path, ".safetensors")
	if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
		return nil, 0, 0, err
	}
	index := filepath.Join(dir, "model.safetensors.index.json")
	files = []string{index}
	shards := (n + shardTensors - 1) / shardTensors
	weightMap := make(map[string]string, n)
	for k := 0; k < shards; k++ {
		name := fmt.Sprintf("%d.safetensors", k+1)
		files = append(files, filepath.Join(dir, name))
		part := names[k*shardTensors : min(n, (k+1)*shardTensors)]
		t, h, err := generateSparse(files[len(files)-1], part, size*int64(len(part))/int64(n))
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

// generateSparse writes a safetensors file of the tensors names, each
// [rows, 4096] BF16, about size bytes in all: the header, then a hole.
// It returns the file's size and the header's.
func generateSparse(path string, names []string, size int64) (int64, int64, error) {
	const cols = 4096
	n := len(names)
	rowBytes := int64(2 * cols)
	rows := max(1, size/int64(n)/rowBytes)
	tsize := rows * rowBytes
	hts := make([]view.HeaderTensor, n)
	for i, name := range names {
		hts[i] = view.HeaderTensor{Name: name, DType: dtype.BF16, Shape: []int64{rows, cols}, Size: tsize}
	}
	h, err := view.SafetensorsHeader(map[string]string{"format": "pt", "generator": "tensorfs bench --tree"}, hts)
	if err != nil {
		return 0, 0, err
	}
	f, err := os.Create(path)
	if err != nil {
		return 0, 0, err
	}
	total := int64(len(h)) + int64(n)*tsize
	_, err = f.Write(h)
	if err == nil {
		err = f.Truncate(total)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return total, int64(len(h)), err
}
