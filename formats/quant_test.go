package formats

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv"
	"github.com/lazyweights/tensorfs/quant"
)

func openPread(p string) (index.File, error) {
	return backing.Open(p, backing.Options{Mode: backing.Pread})
}

// loadQuant loads dir and reads it as quantized, with the scheme its
// configuration files name.
func loadQuant(t *testing.T, dir string) (*index.Index, []backing.Source) {
	t.Helper()
	idx, files, err := Load(dir, openPread, testOptions)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeAll(files) })
	cfgFiles := map[string][]byte{}
	for _, n := range []string{"config.json", "hf_quant_config.json", "quantize_config.json"} {
		if b, err := os.ReadFile(filepath.Join(dir, n)); err == nil {
			cfgFiles[n] = b
		}
	}
	cfg, err := quant.Find(cfgFiles)
	if err != nil {
		t.Fatal(err)
	}
	files, err = Quantize(idx, files, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return idx, files
}

// readRange reads [off, off+n) of f.
func readRange(t *testing.T, f index.File, off, n int64) []byte {
	t.Helper()
	b := make([]byte, n)
	if err := readFull(f, b, off); err != nil {
		t.Fatalf("%s: [%d, +%d): %v", f.Name(), off, n, err)
	}
	return b
}

// TestQuantizeSharedFixtures: every shared quantized fixture, loaded and
// quantized, has each logical weight as a tensor whose source serves
// EXPECTED.json's float32 bytes, and random sub-ranges of it (any
// offset, any length, unaligned buffers) equal the same bytes of the
// whole; the parts are RolePart, the broken weights are notes.
func TestQuantizeSharedFixtures(t *testing.T) {
	root := testenv.Path(t, "quant")
	b, err := os.ReadFile(filepath.Join(root, "EXPECTED.json"))
	if err != nil {
		testenv.SkipOrFail(t, err.Error())
	}
	var exp struct {
		Cases map[string]struct {
			Logical []struct {
				Name string   `json:"name"`
				F32  string   `json:"sha256_f32"`
				Part []string `json:"parts"`
			} `json:"logical"`
			Absent  []string `json:"absent"`
			Missing string   `json:"missing"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &exp); err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(35, 1))
	for name, tc := range exp.Cases {
		t.Run(name, func(t *testing.T) {
			idx, files := loadQuant(t, filepath.Join(root, name))
			if idx.Quantization == nil {
				t.Fatal("no quantization recorded")
			}
			byName := map[string][]*index.Tensor{}
			for i := range idx.Tensors {
				byName[idx.Tensors[i].Name] = append(byName[idx.Tensors[i].Name], &idx.Tensors[i])
			}
			listed := func(n string) *index.Tensor {
				for _, t := range byName[n] {
					if t.Listed(true) {
						return t
					}
				}
				return nil
			}
			for _, l := range tc.Logical {
				lt := listed(l.Name)
				if l.Name == tc.Missing {
					if lt != nil {
						t.Errorf("%s: a broken weight in the converted listing", l.Name)
					}
					continue
				}
				if lt == nil {
					t.Fatalf("%s: not in the converted listing", l.Name)
				}
				if lt.Role != index.RoleLogical {
					continue // unquantized: as stored
				}
				src := files[lt.Source]
				whole := readRange(t, src, 0, src.Size())
				if s := sha256.Sum256(whole); hex.EncodeToString(s[:]) != l.F32 {
					t.Errorf("%s: f32 sha256 differs", l.Name)
				}
				for k := 0; k < 200; k++ {
					off := rnd.Int64N(int64(len(whole)))
					n := 1 + rnd.Int64N(int64(len(whole))-off)
					buf := make([]byte, n+1)[1:] // unaligned
					if k%2 == 0 {
						buf = make([]byte, n)
					}
					got, err := src.ReadAt(buf, off)
					if got != int(n) || err != nil {
						t.Fatalf("%s: ReadAt [%d, +%d): %d, %v", l.Name, off, n, got, err)
					}
					if !bytes.Equal(buf, whole[off:off+n]) {
						t.Fatalf("%s: bytes [%d, +%d) differ from the whole's", l.Name, off, n)
					}
				}
				for _, p := range l.Part {
					for _, pt := range byName[p] {
						if pt.Role == index.RoleStored {
							t.Errorf("%s: part %s is RoleStored", l.Name, p)
						}
					}
				}
			}
			for _, a := range tc.Absent {
				if listed(a) != nil {
					t.Errorf("%s is in the converted listing", a)
				}
			}
			notes := 0
			for _, n := range idx.Notes {
				if bytes.Contains([]byte(n), []byte("left out of the converted views")) {
					notes++
				}
			}
			if want := map[bool]int{true: 1, false: 0}[tc.Missing != ""]; notes != want {
				t.Errorf("%d notes on weights left out, want %d: %q", notes, want, idx.Notes)
			}
		})
	}
}

// TestDequantizedBoundedMemory: reading a few bytes of a 64 MiB logical
// weight allocates nothing near its size.
func TestDequantizedBoundedMemory(t *testing.T) {
	const rows, cols = 4096, 4096
	b := stBuild(nil, true,
		stT{Name: "w.weight", DType: "F8_E4M3", Shape: []int{rows, cols}, Bytes: rows * cols},
		stT{Name: "w.weight_scale_inv", DType: "F32", Shape: []int{rows / 128, cols / 128}, Bytes: 4 * (rows / 128) * (cols / 128)})
	p := filepath.Join(t.TempDir(), "model.safetensors")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	idx, files, err := Load(p, openPread, testOptions)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(files)
	files, err = Quantize(idx, files, nil) // the unambiguous pair, no configuration
	if err != nil {
		t.Fatal(err)
	}
	var lt *index.Tensor
	for i := range idx.Tensors {
		if idx.Tensors[i].Role == index.RoleLogical {
			lt = &idx.Tensors[i]
		}
	}
	if lt == nil || lt.Size != 4*rows*cols {
		t.Fatalf("no logical weight of %d bytes: %+v", 4*rows*cols, lt)
	}
	src := files[lt.Source]
	buf := make([]byte, 4099)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for k := int64(0); k < 16; k++ {
		if n, err := src.ReadAt(buf, k*(lt.Size/16)+3); n != len(buf) || err != nil {
			t.Fatalf("ReadAt: %d, %v", n, err)
		}
	}
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > 4<<20 {
		t.Errorf("16 reads of 4099 bytes allocated %d bytes (the weight's values are %d)", d, lt.Size)
	}
}

// BenchmarkDequantizedRead reads a block-FP8 weight of 4096×4096 through
// its dequantized member in 128 KiB reads (FUSE's size) beside the stored
// codes read the same way from the file: bytes/s of output each (the
// member's are float32 values, 4 bytes an element; the codes 1 byte).
func BenchmarkDequantizedRead(b *testing.B) {
	const rows, cols = 4096, 4096
	st := stBuild(nil, true,
		stT{Name: "w.weight", DType: "F8_E4M3", Shape: []int{rows, cols}, Bytes: rows * cols},
		stT{Name: "w.weight_scale_inv", DType: "F32", Shape: []int{rows / 128, cols / 128}, Bytes: 4 * (rows / 128) * (cols / 128)})
	p := filepath.Join(b.TempDir(), "model.safetensors")
	if err := os.WriteFile(p, st, 0o644); err != nil {
		b.Fatal(err)
	}
	idx, files, err := Load(p, func(p string) (index.File, error) { return backing.Open(p, backing.Options{Mode: backing.Mmap}) }, testOptions)
	if err != nil {
		b.Fatal(err)
	}
	defer closeAll(files)
	if files, err = Quantize(idx, files, nil); err != nil {
		b.Fatal(err)
	}
	var stored, logical *index.Tensor
	for i := range idx.Tensors {
		switch t := &idx.Tensors[i]; {
		case t.Role == index.RoleLogical:
			logical = t
		case t.Name == "w.weight":
			stored = t
		}
	}
	buf := make([]byte, 128<<10)
	read := func(b *testing.B, f index.File, off, size int64) {
		b.SetBytes(size)
		for i := 0; i < b.N; i++ {
			for o := int64(0); o < size; o += int64(len(buf)) {
				n := min(int64(len(buf)), size-o)
				if _, err := f.ReadAt(buf[:n], off+o); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.Run("stored-F8", func(b *testing.B) { read(b, files[stored.Source], stored.Offset, stored.Size) })
	b.Run("dequantized-F32", func(b *testing.B) { read(b, files[logical.Source], 0, logical.Size) })
}

// TestDequantizedConcurrent: reads of one dequantized member from
// several goroutines at once (as a mount serves them) each get the
// bytes a lone read gets (go test -race checks the kernel's pooled
// scratch).
func TestDequantizedConcurrent(t *testing.T) {
	idx, files := loadQuant(t, testenv.Path(t, "quant/mxfp4"))
	var src index.File
	for i := range idx.Tensors {
		if idx.Tensors[i].Role == index.RoleLogical {
			src = files[idx.Tensors[i].Source]
			break
		}
	}
	if src == nil {
		t.Fatal("no logical weight")
	}
	whole := readRange(t, src, 0, src.Size())
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		go func(g int) {
			rnd := rand.New(rand.NewPCG(35, uint64(g)))
			for k := 0; k < 100; k++ {
				off := rnd.Int64N(int64(len(whole)))
				n := 1 + rnd.Int64N(int64(len(whole))-off)
				buf := make([]byte, n)
				if got, err := src.ReadAt(buf, off); got != int(n) || err != nil || !bytes.Equal(buf, whole[off:off+n]) {
					errs <- fmt.Errorf("[%d, +%d): %d, %v, or bytes differ", off, n, got, err)
					return
				}
			}
			errs <- nil
		}(g)
	}
	for g := 0; g < 4; g++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestQuantizeLoneShard: a weight whose part is in a shard that was not
// opened (one shard of two opened alone) is said to be so, not only
// "its weight is missing".
func TestQuantizeLoneShard(t *testing.T) {
	dir := testenv.Path(t, "quant/fp8_block")
	idx, files, err := Load(filepath.Join(dir, "model-00001-of-00002.safetensors"), openPread, testOptions)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeAll(files) })
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := quant.Find(map[string][]byte{"config.json": b})
	if err != nil {
		t.Fatal(err)
	}
	if files, err = Quantize(idx, files, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeAll(files) })
	notes := strings.Join(idx.Notes, "\n")
	if !strings.Contains(notes, "its weight is missing; model-00001-of-00002.safetensors is shard 1 of 2, opened alone") {
		t.Errorf("notes:\n%s", notes)
	}
	// The whole directory: nothing said of shards.
	idx, _ = loadQuant(t, dir)
	if strings.Contains(strings.Join(idx.Notes, "\n"), "opened alone") {
		t.Errorf("whole checkpoint: %q", idx.Notes)
	}
}

// TestQuantizeUnusableScheme: block FP8 whose weight_block_size cannot
// be used (issue 41: [0, 0] served every weight as its unscaled codes):
// every F8 weight and its scale is a part (in no converted view), each
// weight is a Problem, and the many weights left out for the one reason
// are one note, not a line each.
func TestQuantizeUnusableScheme(t *testing.T) {
	dir := t.TempDir()
	hdr := map[string]any{}
	var blob []byte
	const n = 6
	for i := range n {
		x := fmt.Sprintf("model.layers.%d.mlp.up_proj", i)
		hdr[x+".weight"] = map[string]any{"dtype": "F8_E4M3", "shape": []int{4, 64}, "data_offsets": []int{len(blob), len(blob) + 256}}
		blob = append(blob, bytes.Repeat([]byte{0x38}, 256)...) // 1.0: the weight is 2.0
		hdr[x+".weight_scale_inv"] = map[string]any{"dtype": "F32", "shape": []int{1, 1}, "data_offsets": []int{len(blob), len(blob) + 4}}
		blob = append(blob, 0, 0, 0, 0x40)
	}
	hdr["model.norm.weight"] = map[string]any{"dtype": "BF16", "shape": []int{4}, "data_offsets": []int{len(blob), len(blob) + 8}}
	blob = append(blob, make([]byte, 8)...)
	h, _ := json.Marshal(hdr)
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	f := append(binary.LittleEndian.AppendUint64(nil, uint64(len(h))), h...)
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), append(f, blob...), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := `{"quantization_config": {"quant_method": "fp8", "weight_block_size": [0, 0]}}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	idx, _ := loadQuant(t, dir)
	for _, tn := range idx.Tensors {
		if want := tn.Name != "model.norm.weight"; (tn.Role == index.RolePart) != want {
			t.Errorf("%s: role %v", tn.Name, tn.Role)
		}
	}
	if q := idx.Quantization; q == nil || len(q.Problems) != n || len(q.Weights) != 0 {
		t.Fatalf("quantization %+v", idx.Quantization)
	}
	if len(idx.Notes) != 1 || !strings.Contains(idx.Notes[0], fmt.Sprintf("%d weights left out of the converted views", n)) || !strings.Contains(idx.Notes[0], "weight_block_size [0,0]") {
		t.Errorf("notes %q", idx.Notes)
	}
}
