package quant

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"unsafe"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/safetensors"
)

type memFile struct {
	name string
	b    []byte
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(f.b)) {
		return 0, fmt.Errorf("EOF")
	}
	n := copy(p, f.b[off:])
	if n < len(p) {
		return n, fmt.Errorf("EOF")
	}
	return n, nil
}
func (f *memFile) Size() int64  { return int64(len(f.b)) }
func (f *memFile) Name() string { return f.name }

// ckpt is a checkpoint read into memory: its tensors and each one's bytes.
type ckpt struct {
	tensors []index.Tensor
	data    map[string][]byte
	files   map[string][]byte // config.json etc.
}

func loadDir(t testing.TB, dir string) *ckpt {
	t.Helper()
	c := &ckpt{data: map[string][]byte{}, files: map[string][]byte{}}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		switch {
		case strings.HasSuffix(e.Name(), ".safetensors"):
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			c.addSafetensors(t, p, b)
		case e.Name() == "config.json" || e.Name() == "hf_quant_config.json" || e.Name() == "quantize_config.json":
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			c.files[e.Name()] = b
		}
	}
	sort.Slice(c.tensors, func(i, j int) bool { return c.tensors[i].Name < c.tensors[j].Name })
	return c
}

func (c *ckpt) addSafetensors(t testing.TB, name string, b []byte) {
	idx, err := safetensors.Parse(&memFile{name, b})
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range idx.Tensors {
		c.tensors = append(c.tensors, tn)
		c.data[tn.Name] = b[tn.Offset : tn.Offset+tn.Size]
	}
}

func (c *ckpt) small(name string) ([]byte, error) {
	b, ok := c.data[name]
	if !ok {
		return nil, fmt.Errorf("no tensor %s", name)
	}
	return b, nil
}

// reader returns w's ReadFunc over c, checking every read is in bounds.
func (c *ckpt) reader(t testing.TB, w *Weight) ReadFunc {
	return func(part int, off int64, p []byte) error {
		b := c.data[w.Parts[part]]
		if off < 0 || off+int64(len(p)) > int64(len(b)) {
			t.Fatalf("%s: read of part %d (%s) [%d, %d) outside its %d bytes", w.Name, part, w.Parts[part], off, off+int64(len(p)), len(b))
		}
		copy(p, b[off:])
		return nil
	}
}

func (c *ckpt) plan(t testing.TB) *Result {
	t.Helper()
	cfg, err := Find(c.files)
	if err != nil {
		t.Fatal(err)
	}
	return Plan(cfg, c.tensors, c.small)
}

func (c *ckpt) whole(t testing.TB, w *Weight) []float32 {
	t.Helper()
	out := make([]float32, w.NumElements())
	if err := w.Dequantize(c.reader(t, w), 0, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func f32Bytes(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f))
}

// shas returns the sha256 of f as float32, bfloat16 and float16 bytes
// (rounded to nearest even by dtype's converters).
func shas(f []float32) (string, string, string) {
	b := f32Bytes(f)
	h := func(x []byte) string { s := sha256.Sum256(x); return hex.EncodeToString(s[:]) }
	bf := make([]byte, 2*len(f))
	hf := make([]byte, 2*len(f))
	cb, _ := dtype.ConverterFor(dtype.F32, dtype.BF16)
	ch, _ := dtype.ConverterFor(dtype.F32, dtype.F16)
	if len(f) > 0 {
		cb(bf, b)
		ch(hf, b)
	}
	return h(b), h(bf), h(hf)
}

// weightByName finds a weight by a linear scan, and checks that
// Result.Weight's binary search agrees.
func weightByName(r *Result, name string) *Weight {
	var w *Weight
	for i := range r.Weights {
		if r.Weights[i].Name == name {
			w = &r.Weights[i]
		}
	}
	if r.Weight(name) != w {
		panic("Result.Weight disagrees with a scan for " + name)
	}
	return w
}

// checkRanges compares Dequantize over odd sub-ranges with the whole.
func checkRanges(t *testing.T, c *ckpt, w *Weight, whole []float32) {
	t.Helper()
	n := int64(len(whole))
	rd := c.reader(t, w)
	cases := [][2]int64{{0, 1}, {n - 1, 1}, {1, n - 2}, {n / 3, n / 3}, {7, min(n-7, 131)}, {w.cols - 1, min(n-w.cols+1, 2*w.cols+3)}}
	seed := uint64(n)*2654435761 + 1
	for i := 0; i < 12; i++ {
		seed = seed*6364136223846793005 + 1442695040888963407
		a := int64(seed>>33) % n
		seed = seed*6364136223846793005 + 1442695040888963407
		l := int64(seed>>33)%(n-a) + 1
		cases = append(cases, [2]int64{a, l})
	}
	for _, cs := range cases {
		a, l := cs[0], cs[1]
		if a < 0 || l <= 0 || a+l > n {
			continue
		}
		got := make([]float32, l)
		if err := w.Dequantize(rd, a, got); err != nil {
			t.Fatalf("%s [%d, +%d): %v", w.Name, a, l, err)
		}
		for i := range got {
			if f32bits(got[i]) != f32bits(whole[a+int64(i)]) {
				t.Fatalf("%s [%d, +%d): element %d is %v, the whole read has %v", w.Name, a, l, a+int64(i), got[i], whole[a+int64(i)])
			}
		}
	}
	if err := w.Dequantize(rd, n, nil); err != nil {
		t.Errorf("%s: empty read at the end: %v", w.Name, err)
	}
	if err := w.Dequantize(rd, n-1, make([]float32, 2)); err == nil {
		t.Errorf("%s: a read past the end did not fail", w.Name)
	}
}

func f32bits(f float32) uint32 { return *(*uint32)(unsafe.Pointer(&f)) }

func (c *ckpt) tensorNamed(name string) *index.Tensor {
	for i := range c.tensors {
		if c.tensors[i].Name == name {
			return &c.tensors[i]
		}
	}
	return nil
}
