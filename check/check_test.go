package check

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// memSource is a backing.Source over bytes; failAt, when >= 0, makes
// the reads that cover that byte fail.
type memSource struct {
	data   []byte
	failAt int64
}

func (m *memSource) ReadAt(p []byte, off int64) (int, error) {
	if m.failAt >= off && m.failAt < off+int64(len(p)) {
		return 0, errors.New("input/output error")
	}
	return bytes.NewReader(m.data).ReadAt(p, off)
}
func (m *memSource) Size() int64  { return int64(len(m.data)) }
func (m *memSource) Name() string { return "mem" }
func (m *memSource) Close() error { return nil }

// ckpt is a one-file checkpoint over src with tensors ts.
func ckpt(src *memSource, ts ...index.Tensor) *Checkpoint {
	idx := &index.Index{Format: "safetensors", Sources: []string{"/m/model.safetensors"}, Tensors: ts}
	return &Checkpoint{Source: "/m", Index: idx, Sources: []backing.Source{src}}
}

func f32s(vs ...float32) []byte {
	b := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

func TestProblemString(t *testing.T) {
	p := FromError(index.ErrorAt("/m/a.safetensors", `tensor "x"`, "bad"))
	if p != (Problem{File: "/m/a.safetensors", Where: `tensor "x"`, What: "bad"}) || p.String() != `/m/a.safetensors: bad (tensor "x")` {
		t.Errorf("%+v, %q", p, p)
	}
	p = FromError(index.Errorf("/m/a.gguf", 12, "short"))
	if p.Where != "at byte 12" || p.String() != "/m/a.gguf: short (at byte 12)" {
		t.Errorf("%+v, %q", p, p)
	}
	if p = FromError(errors.New("/m: no such file or directory")); p.String() != "/m: no such file or directory" {
		t.Errorf("%+v", p)
	}
}

// TestCheckers: each checker of the table finds what it checks, and a
// checker added to the table is run (the extension point).
func TestCheckers(t *testing.T) {
	src := &memSource{data: f32s(1, 2, 3, 4), failAt: -1}
	ok := index.Tensor{Name: "ok", DType: dtype.F32, Shape: []int64{4}, Size: 16}
	c := ckpt(src, ok)
	if ps := Run(c, Checkers); len(ps) != 0 {
		t.Fatalf("a whole checkpoint: %v", ps)
	}
	// A file that shrank since it was loaded.
	src.data = src.data[:8]
	if ps := Run(c, Checkers); len(ps) != 1 || !strings.Contains(ps[0].String(), "outside the file") || ps[0].Where != `tensor "ok"` {
		t.Errorf("a shrunk file: %v", ps)
	}
	src.data = f32s(1, 2, 3, 4)
	c.Index.Unserved = []index.Unserved{{Name: "q", Type: "ggml type 99", Source: 0, Why: "unknown type"}}
	c.Loading = []Problem{{File: "/m/model.safetensors.index.json", Where: `tensor "z"`, What: "the weight map puts this tensor in shard x, which does not hold it"}}
	ps := Run(c, Checkers)
	if len(ps) != 2 || ps[0] != c.Loading[0] || ps[1].String() != `/m/model.safetensors: not served (ggml type 99): unknown type (tensor "q")` {
		t.Errorf("loading and unserved problems: %v", ps)
	}
	extra := append(slices.Clone(Checkers), Checker{"every quantized weight has its parts", func(*Checkpoint) []Problem {
		return []Problem{{File: "f", What: "no scale"}}
	}})
	if ps := Run(c, extra); len(ps) != 3 || ps[2].What != "no scale" {
		t.Errorf("an added checker: %v", ps)
	}
}

// TestData: Data reads every byte, says which read failed and which
// member's CRC-32 does not match, and counts NaN and Inf on the values
// converted to float32 (BF16 here), only for tensors that have a
// float32 view.
func TestData(t *testing.T) {
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	data := f32s(1, nan, inf, float32(math.Inf(-1))) // 16 bytes: F32 "f"
	// BF16 "h": 1.0, NaN, -Inf, 2.0
	data = append(data, 0x80, 0x3f, 0xc0, 0x7f, 0x80, 0xff, 0x00, 0x40)
	data = append(data, 1, 2, 3, 4, 5, 6, 7, 8) // I64 "i"
	src := &memSource{data: data, failAt: -1}
	ts := []index.Tensor{
		{Name: "f", DType: dtype.F32, Shape: []int64{4}, Offset: 0, Size: 16},
		{Name: "h", DType: dtype.BF16, Shape: []int64{4}, Offset: 16, Size: 8},
		{Name: "i", DType: dtype.I64, Shape: []int64{1}, Offset: 24, Size: 8},
	}
	c := ckpt(src, ts...)
	rep, ps := Data(c, DataOptions{Values: true})
	want := []TensorValues{{"f", "F32", 4, 1, 2}, {"h", "BF16", 4, 1, 1}}
	if len(ps) != 0 || rep.Bytes != 32 || !slices.Equal(rep.Tensors, want) {
		t.Errorf("Data: %+v, %v; want values %+v", rep, ps, want)
	}
	// A read that fails: one problem naming the tensor and the byte.
	src.failAt = 20
	_, ps = Data(c, DataOptions{})
	if len(ps) != 1 || ps[0].Where != `tensor "h"` || !strings.Contains(ps[0].What, "input/output error") {
		t.Errorf("a failing read: %v", ps)
	}
	src.failAt = -1
	// A stored member whose CRC-32 does not match (the bytes of "i").
	c.Index.Tensors[2].Check = &index.Check{Member: "i.npy", Offset: 24, Size: 8, CRC32: crc32.ChecksumIEEE(data[24:32]) ^ 1}
	rep, ps = Data(c, DataOptions{})
	if len(ps) != 1 || ps[0].Where != `tensor "i"` || !strings.Contains(ps[0].What, "CRC-32") || rep.CRCs != 1 {
		t.Errorf("a bad CRC-32: %+v, %v", rep, ps)
	}
	c.Index.Tensors[2].Check.CRC32 ^= 1
	if rep, ps = Data(c, DataOptions{}); len(ps) != 0 || rep.CRCs != 1 || rep.Bytes != 32 {
		t.Errorf("a good CRC-32: %+v, %v", rep, ps)
	}
}

// digestSource is a memSource that states a sha256 of its whole bytes.
type digestSource struct {
	memSource
	sum string
}

func (d *digestSource) SHA256() (string, bool) { return d.sum, d.sum != "" }

func TestDataSHA256(t *testing.T) {
	// The tensor covers bytes 8..16 of 24: the whole file is hashed.
	data := []byte("headerxxTENSOR!!trailing")
	sum := sha256.Sum256(data)
	good := hex.EncodeToString(sum[:])
	src := &digestSource{memSource: memSource{data: data, failAt: -1}, sum: good}
	idx := &index.Index{Format: "safetensors", Sources: []string{"/m/model.safetensors"}, Tensors: []index.Tensor{
		{Name: "t", DType: dtype.U8, Shape: []int64{8}, Offset: 8, Size: 8},
	}}
	c := &Checkpoint{Source: "/m", Index: idx, Sources: []backing.Source{src}}
	rep, ps := Data(c, DataOptions{})
	if len(ps) != 0 || rep.Verified != 1 || rep.Bytes != 24 || len(rep.Files) != 1 || rep.Files[0] != (FileDigest{File: "/m/model.safetensors", SHA256: good, Status: "sha256 ok"}) {
		t.Errorf("a good file: %+v, %v", rep, ps)
	}
	// Other bytes outside the tensor: the file's hash differs, one
	// problem naming the file and both digests.
	data[0] = 'H'
	sum = sha256.Sum256(data)
	got := hex.EncodeToString(sum[:])
	rep, ps = Data(c, DataOptions{})
	if len(ps) != 1 || ps[0].File != "/m/model.safetensors" || !strings.Contains(ps[0].What, got) || !strings.Contains(ps[0].What, good) || rep.Verified != 0 || rep.Files[0].Status != "sha256 mismatch" {
		t.Errorf("a file with other bytes: %+v, %v", rep, ps)
	}
	// A read that fails: one problem, for the file.
	src.failAt = 20
	rep, ps = Data(c, DataOptions{})
	if len(ps) != 1 || ps[0].File != "/m/model.safetensors" || !strings.Contains(ps[0].What, "input/output error") || rep.Files[0].Status != "read error" {
		t.Errorf("a failing read: %+v, %v", rep, ps)
	}
	// A source that states no digest is not hashed.
	src.failAt, src.sum = -1, ""
	if rep, ps = Data(c, DataOptions{}); len(ps) != 0 || len(rep.Files) != 0 || rep.Bytes != 8 {
		t.Errorf("no digest: %+v, %v", rep, ps)
	}
}

// TestDataDequantized: the values a quantized weight dequantizes to are
// counted apart from the bytes read (`check --data` said 717872 bytes
// read of a block-FP8 checkpoint whose tensors hold 154192: its three
// weights' float32 values were counted as read).
func TestDataDequantized(t *testing.T) {
	codes := &memSource{data: []byte{1, 2, 3, 4}, failAt: -1}
	values := &memSource{data: f32s(1, 2, 3, 4), failAt: -1}
	idx := &index.Index{Format: "safetensors", Sources: []string{"/m/model.safetensors", ""}, Tensors: []index.Tensor{
		{Name: "w", DType: dtype.F32, Shape: []int64{4}, Source: 1, Size: 16, Role: index.RoleLogical},
		{Name: "w", DType: dtype.U8, Shape: []int64{4}, Size: 4, Role: index.RolePart},
	}}
	c := &Checkpoint{Source: "/m", Index: idx, Sources: []backing.Source{codes, values}}
	for _, o := range []DataOptions{{}, {Values: true}} {
		rep, ps := Data(c, o)
		if len(ps) != 0 || rep.Bytes != 4 || rep.Dequantized != 1 || rep.DequantizedBytes != 16 {
			t.Errorf("Data(%+v): %+v, %v; want 4 bytes read, 1 weight dequantized to 16 bytes", o, rep, ps)
		}
	}
}
