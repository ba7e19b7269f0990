package dcpwrite

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// Kinds are the hostile checkpoints Hostile writes (issue 34), each of n:
//
//	shared-values  n values whose storage_data all name one item (a 1 MB str)
//	shared-chunks  n one-chunk tensors naming one item whose data.pkl also holds a 16 MiB str
//	dim1           an F32 [1, n] tensor in n [1,1] chunks (element i is i)
//	dim0           an F32 [n, 1] tensor in n [1,1] chunks
//	column         an F32 [n, 2] tensor: column 0 one chunk, column 1 n [1,1] chunks (element [r, c] is 2r+c)
//	names          {"a/b": t1, "a": {"b": t2}} as dcp.save writes it, and a value keyed "dcp.keys"
//	zstd-items     dim1, each chunk's item a zstd stream (torch >= 2.7's stream.zstd/1) declaring an 8 MiB window
var Kinds = []string{"shared-values", "shared-chunks", "dim1", "dim0", "column", "names", "zstd-items"}

// file accumulates one .distcp file's items.
type file struct {
	name string
	buf  bytes.Buffer
	zstd bool // tensors' items as zstd streams
}

// tensor appends torch.save of an F32 tensor of shape holding vals and
// returns its item; extra, if not empty, is pickled beside it in a tuple.
func (f *file) tensor(shape []int64, vals []float32, extra string) (Item, error) {
	w := &Writer{}
	w.Op("\x80\x02")
	if extra != "" {
		w.Op("(")
	}
	w.TensorOp("FloatStorage", int64(len(vals)), shape)
	if extra != "" {
		w.Str(extra)
		w.Op("t")
	}
	w.Op(".")
	data := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
	}
	at := int64(f.buf.Len())
	n, err := TorchSave(&f.buf, w.Bytes(), data)
	if err != nil || !f.zstd {
		return Item{File: f.name, Offset: at, Length: n}, err
	}
	// The item as torch >= 2.7 writes it: a zstd stream of its zip,
	// whose frame declares an 8 MiB window (a streaming writer's, as
	// Python's zstandard writes them; klauspost's EncodeAll would size
	// it to the item).
	e, err := zstd.NewWriter(nil, zstd.WithSingleSegment(false))
	if err != nil {
		return Item{}, err
	}
	z := e.EncodeAll(f.buf.Bytes()[at:], nil)
	e.Close()
	if len(z) < 6 || z[4]&0x20 != 0 {
		return Item{}, fmt.Errorf("zstd frame header %x: single segment", z[:min(len(z), 6)])
	}
	z[5] = (23 - 10) << 3 // window descriptor: 8 MiB
	f.buf.Truncate(int(at))
	f.buf.Write(z)
	return Item{f.name, at, int64(len(z)), true}, nil
}

// value appends torch.save of a str.
func (f *file) value(s string) (Item, error) {
	w := &Writer{}
	w.Op("\x80\x02")
	w.Str(s)
	w.Op(".")
	at := int64(f.buf.Len())
	n, err := TorchSave(&f.buf, w.Bytes())
	return Item{File: f.name, Offset: at, Length: n}, err
}

// Hostile writes the checkpoint of kind (Kinds) with n of what it
// repeats into dir.
func Hostile(dir, kind string, n int) error {
	f := &file{name: "__0_0.distcp"}
	c := &Checkpoint{Planner: map[string][]string{}}
	one := func(fqn string, vals []float32, extra string) error {
		shape := []int64{int64(len(vals))}
		it, err := f.tensor(shape, vals, extra)
		c.Tensors = append(c.Tensors, Tensor{FQN: fqn, DType: "float32", Size: shape, Chunks: []Chunk{{[]int64{0}, shape, it}}})
		return err
	}
	switch kind {
	case "shared-values":
		if err := one("w", []float32{1, 2, 3, 4}, ""); err != nil {
			return err
		}
		it, err := f.value(strings.Repeat("x", 1_000_000))
		if err != nil {
			return err
		}
		for i := range n {
			c.Values = append(c.Values, Value{fmt.Sprintf("v.%d", i), it})
		}
	case "shared-chunks":
		shape := []int64{4}
		it, err := f.tensor(shape, []float32{1, 2, 3, 4}, strings.Repeat("y", 16<<20))
		if err != nil {
			return err
		}
		for i := range n {
			c.Tensors = append(c.Tensors, Tensor{FQN: fmt.Sprintf("t.%d", i), DType: "float32", Size: shape, Chunks: []Chunk{{[]int64{0}, shape, it}}})
		}
	case "dim1", "dim0", "column", "zstd-items":
		t := Tensor{FQN: "w", DType: "float32"}
		switch kind {
		case "dim1", "zstd-items":
			f.zstd = kind == "zstd-items"
			t.Size = []int64{1, int64(n)}
		case "dim0":
			t.Size = []int64{int64(n), 1}
		case "column":
			t.Size = []int64{int64(n), 2}
			vals := make([]float32, n)
			for r := range vals {
				vals[r] = float32(2 * r)
			}
			it, err := f.tensor([]int64{int64(n), 1}, vals, "")
			if err != nil {
				return err
			}
			t.Chunks = append(t.Chunks, Chunk{[]int64{0, 0}, []int64{int64(n), 1}, it})
		}
		for i := range n {
			off := []int64{0, int64(i)}
			v := float32(i)
			switch kind {
			case "dim0":
				off = []int64{int64(i), 0}
			case "column":
				off, v = []int64{int64(i), 1}, float32(2*i+1)
			}
			it, err := f.tensor([]int64{1, 1}, []float32{v}, "")
			if err != nil {
				return err
			}
			t.Chunks = append(t.Chunks, Chunk{off, []int64{1, 1}, it})
		}
		c.Tensors = append(c.Tensors, t)
	case "names":
		if err := one("a/b", []float32{1, 2}, ""); err != nil {
			return err
		}
		if err := one("a.b", []float32{3, 4}, ""); err != nil {
			return err
		}
		c.Planner["a.b"] = []string{"a", "b"}
		it, err := f.value("mine")
		if err != nil {
			return err
		}
		c.Values = append(c.Values, Value{"dcp.keys", it})
	default:
		return fmt.Errorf("no hostile checkpoint %q (one of %s)", kind, strings.Join(Kinds, ", "))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, f.name), f.buf.Bytes(), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ".metadata"), c.Metadata(), 0o644)
}
