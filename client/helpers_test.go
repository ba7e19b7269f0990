package client

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// patternByte is the byte at offset off of a patternSource: a mixed
// 64-bit word per 8 bytes, so every chunk delivered at a wrong offset is
// caught, and a source can fill buffers a word at a time.
func patternByte(off int64) byte { return byte(patternWord(off>>3) >> (8 * (off & 7))) }

func patternWord(w int64) uint64 {
	x := uint64(w) + 0x9E3779B97F4A7C15
	x = (x ^ x>>30) * 0xBF58476D1CE4E5B9
	x = (x ^ x>>27) * 0x94D049BB133111EB
	return x ^ x>>31
}

// fillPattern writes the pattern bytes of [off, off+len(b)) into b.
func fillPattern(b []byte, off int64) {
	i := 0
	for ; i < len(b) && (off+int64(i))&7 != 0; i++ {
		b[i] = patternByte(off + int64(i))
	}
	for ; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], patternWord((off+int64(i))>>3))
	}
	for ; i < len(b); i++ {
		b[i] = patternByte(off + int64(i))
	}
}

// patternSource is a backing.Source of size bytes generated on the fly,
// so a test can stream gigabytes that occupy no memory. Reads touching
// failAt (when >= 0) fail; bytes at or past shortAt (when >= 0) are
// missing, as in a file truncated under the reader.
type patternSource struct {
	name    string
	size    int64
	failAt  int64
	shortAt int64
}

var errInjected = errors.New("injected I/O error")

func newPattern(name string, size int64) *patternSource {
	return &patternSource{name: name, size: size, failAt: -1, shortAt: -1}
}

func (p *patternSource) Name() string { return p.name }
func (p *patternSource) Size() int64  { return p.size }
func (p *patternSource) Close() error { return nil }

func (p *patternSource) ReadAt(b []byte, off int64) (int, error) {
	if off >= p.size {
		return 0, io.EOF
	}
	end := off + int64(len(b))
	if p.failAt >= 0 && off <= p.failAt && p.failAt < end {
		return 0, errInjected
	}
	limit := p.size
	if p.shortAt >= 0 && p.shortAt < limit {
		limit = p.shortAt
	}
	n := len(b)
	if int64(n) > limit-off {
		n = int(max(limit-off, 0))
	}
	fillPattern(b[:n], off)
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

// memSource is a backing.Source over bytes in memory.
type memSource struct {
	name string
	data []byte
}

func (m *memSource) Name() string { return m.name }
func (m *memSource) Size() int64  { return int64(len(m.data)) }
func (m *memSource) Close() error { return nil }
func (m *memSource) ReadAt(b []byte, off int64) (int, error) {
	if off >= int64(len(m.data)) {
		return 0, io.EOF
	}
	n := copy(b, m.data[off:])
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

var _ backing.Source = (*memSource)(nil)
var _ backing.Source = (*patternSource)(nil)

// spec is one tensor of a generated checkpoint: U8 with shape [size].
type spec struct {
	name string
	size int64
}

// patternCheckpoint lays the tensors out back to back in one
// patternSource and wraps them as a Checkpoint with FromIndex.
func patternCheckpoint(t testing.TB, specs []spec) (*Checkpoint, *patternSource) {
	t.Helper()
	var total int64
	idx := &index.Index{Format: "test", Sources: []string{"pattern.bin"}, Metadata: map[string]any{"k": "v"}}
	for _, s := range specs {
		idx.Tensors = append(idx.Tensors, index.Tensor{
			Name: s.name, Path: s.name, DType: dtype.U8, Shape: []int64{s.size},
			Offset: total, Size: s.size,
		})
		total += s.size
	}
	sort.Slice(idx.Tensors, func(i, j int) bool { return idx.Tensors[i].Name < idx.Tensors[j].Name })
	src := newPattern("pattern.bin", total)
	c, err := FromIndex("pattern.bin", idx, []backing.Source{src})
	if err != nil {
		t.Fatal(err)
	}
	return c, src
}

// expected returns the bytes of tensor ti of a pattern checkpoint.
func expected(ti TensorInfo) []byte {
	b := make([]byte, ti.Size)
	fillPattern(b, ti.Offset)
	return b
}

// stTensor is one tensor for writeSafetensors.
type stTensor struct {
	name  string
	dtype string
	shape []int64
	data  []byte
}

// writeSafetensors writes a safetensors file holding ts in order.
func writeSafetensors(t testing.TB, path string, meta map[string]string, ts []stTensor) {
	t.Helper()
	hdr := map[string]any{}
	if meta != nil {
		hdr["__metadata__"] = meta
	}
	var off int64
	for _, x := range ts {
		shape := x.shape
		if shape == nil {
			shape = []int64{}
		}
		hdr[x.name] = map[string]any{"dtype": x.dtype, "shape": shape, "data_offsets": []int64{off, off + int64(len(x.data))}}
		off += int64(len(x.data))
	}
	h, err := json.Marshal(hdr)
	if err != nil {
		t.Fatal(err)
	}
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(h)))
	f.Write(n[:])
	f.Write(h)
	for _, x := range ts {
		if _, err := f.Write(x.data); err != nil {
			t.Fatal(err)
		}
	}
}

// randomBytes returns n deterministic pseudo-random bytes.
func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x5555))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// f16Bytes encodes finite, moderate float values as IEEE half precision
// (exactly representable ones: k/8 for small k) so conversions are exact.
func f16Bytes(vals []float32) []byte {
	out := make([]byte, 2*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint16(out[2*i:], halfBits(v))
	}
	return out
}

// halfBits converts a float32 that is exactly representable in half
// precision (normal range) to its bits.
func halfBits(v float32) uint16 {
	if v == 0 {
		return 0
	}
	b := math.Float32bits(v)
	sign := uint16(b>>16) & 0x8000
	exp := int((b>>23)&0xff) - 127 + 15
	mant := uint16((b >> 13) & 0x3ff)
	return sign | uint16(exp)<<10 | mant
}

func tempDir(t testing.TB) string {
	t.Helper()
	return filepath.Clean(t.TempDir())
}
