package view

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// TestNativeProperty: the native view of random tensors (contiguous,
// strided, big-endian, every dtype) matches the reference at every range.
func TestNativeProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ranged := 0
	for i := range iters(800) {
		c := genCase(r, genOpts{strided: true, bigDims: i%4 == 0})
		src := &memSource{b: c.src, name: "src.bin"}
		want := refNative(&c)
		for _, to := range []dtype.DType{dtype.Invalid, c.t.DType} {
			rd, err := New(&c.t, src, to)
			if err != nil {
				t.Fatalf("case %d %v: New: %v", i, &c, err)
			}
			sweep(t, fmt.Sprintf("case %d %v", i, &c), rd, want, r)
			rg, ok := rd.(Ranger)
			if c.t.Contiguous() && !ok {
				t.Errorf("case %d %v: contiguous tensor's reader is not a Ranger", i, &c)
			}
			if c.t.BigEndian && c.t.DType.Info().Unit > 1 && ok {
				t.Errorf("case %d %v: big-endian tensor's reader is a Ranger", i, &c)
			}
			if ok {
				s, off, ok := rg.FileRange()
				if !ok || s != src || off < 0 || off+rd.Size() > src.Size() ||
					!bytes.Equal(c.src[off:off+rd.Size()], want) {
					t.Errorf("case %d %v: FileRange() = %d, %v: not the tensor's bytes", i, &c, off, ok)
				}
				ranged++
			}
		}
		if t.Failed() {
			return
		}
	}
	if ranged == 0 {
		t.Errorf("no reader was a Ranger")
	}
}

// Named layouts, checked against values computed by hand.
func TestStridedLayouts(t *testing.T) {
	// A 3x4 U16 storage holding 0..11.
	storage := make([]byte, 2+24)
	for i := range 12 {
		binary.LittleEndian.PutUint16(storage[2+2*i:], uint16(i))
	}
	tests := []struct {
		name    string
		shape   []int64
		strides []int64
		offset  int64
		want    []uint16
		ranger  bool
	}{
		{"transpose", []int64{4, 3}, []int64{1, 4}, 2, []uint16{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}, false},
		{"column", []int64{3}, []int64{4}, 2 + 2*1, []uint16{1, 5, 9}, false},
		{"rows 1..2", []int64{2, 4}, []int64{4, 1}, 2 + 2*4, []uint16{4, 5, 6, 7, 8, 9, 10, 11}, true},
		{"every other", []int64{3, 2}, []int64{4, 2}, 2, []uint16{0, 2, 4, 6, 8, 10}, false},
		{"expand", []int64{3, 4}, []int64{0, 1}, 2 + 2*4, []uint16{4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6, 7}, false},
		{"broadcast scalar", []int64{2, 3}, []int64{0, 0}, 2 + 2*7, []uint16{7, 7, 7, 7, 7, 7}, false},
		{"size-1 dims", []int64{1, 3, 1, 4, 1}, []int64{99, 4, 7, 1, 5}, 2, []uint16{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, true},
		{"reversed", []int64{4}, []int64{-1}, 2 + 2*3, []uint16{3, 2, 1, 0}, false},
		{"scalar", []int64{}, []int64{}, 2 + 2*5, []uint16{5}, true},
		{"empty", []int64{0, 3}, []int64{3, 1}, 2, []uint16{}, true},
	}
	src := &memSource{b: storage, name: "s"}
	r := rand.New(rand.NewPCG(3, 4))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, _ := index.Elements(tt.shape)
			tn := &index.Tensor{Name: tt.name, DType: dtype.U16, Shape: tt.shape, Strides: tt.strides, Offset: tt.offset, Size: 2 * n}
			rd, err := New(tn, src, dtype.Invalid)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]byte, 2*len(tt.want))
			for i, v := range tt.want {
				binary.LittleEndian.PutUint16(want[2*i:], v)
			}
			sweep(t, tt.name, rd, want, r)
			if _, ok := rd.(Ranger); ok != tt.ranger {
				t.Errorf("Ranger: %v, want %v", ok, tt.ranger)
			}
		})
	}
}

// fakeConverter is a deterministic Converter for any dtype pair: each
// output element is a hash of its whole source block and its place in it,
// so a wrong block, a wrong place or a torn block shows.
func fakeConverter(from, to dtype.DType) dtype.Converter {
	bb := int(from.Info().BlockBytes)
	be := int(from.Info().BlockElems)
	oes := int(to.ElemSize())
	return func(dst, src []byte) {
		if len(src)%bb != 0 || len(dst) < len(src)/bb*be*oes {
			panic("fakeConverter: bad lengths")
		}
		o := 0
		for b := 0; b < len(src); b += bb {
			h := uint64(14695981039346656037)
			for _, x := range src[b : b+bb] {
				h = (h ^ uint64(x)) * 1099511628211
			}
			for j := range be {
				var v [8]byte
				binary.LittleEndian.PutUint64(v[:], (h^uint64(j))*0x9E3779B97F4A7C15)
				o += copy(dst[o:o+oes], v[:])
			}
		}
	}
}

// TestConvertedFake drives the conversion read path with a fake converter
// for every source dtype (scalar, F4, quant blocks) and layout, against the
// whole native file converted in one go and sliced.
func TestConvertedFake(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	targets := []dtype.DType{dtype.F32, dtype.F16, dtype.BF16, dtype.F64}
	for i := range iters(400) {
		c := genCase(r, genOpts{strided: true, bigDims: i%3 == 0})
		to := targets[r.IntN(len(targets))]
		conv := fakeConverter(c.t.DType, to)
		src := &memSource{b: c.src, name: "src.bin"}
		base, err := newRaw(&c.t, src)
		if err != nil {
			t.Fatalf("case %d %v: %v", i, &c, err)
		}
		cv, err := newConverted(base, c.t.Size, c.t.DType, to, conv)
		if err != nil {
			t.Fatalf("case %d %v: %v", i, &c, err)
		}
		native := refNative(&c)
		want := make([]byte, c.t.NumElements()*to.ElemSize())
		conv(want, native)
		sweep(t, fmt.Sprintf("case %d %v -> %s", i, &c, to), &reader{raw: cv, size: cv.size}, want, r)
		if t.Failed() {
			return
		}
	}
}

// TestConvertedLarge reads a tensor much larger than one conversion step
// in odd-sized pieces.
func TestConvertedLarge(t *testing.T) {
	for _, dt := range []dtype.DType{dtype.BF16, dtype.Q4_K, dtype.F4, dtype.Q8_0} {
		t.Run(dt.String(), func(t *testing.T) {
			info := dt.Info()
			n := info.BlockElems * (3*srcStep/info.BlockBytes + 7) // several steps
			size, _ := dt.ByteSize(n)
			c := tcase{t: index.Tensor{Name: "big", DType: dt, Shape: []int64{n}, Offset: 3, Size: size}, src: make([]byte, size+3)}
			fill(c.src, 7)
			conv := fakeConverter(dt, dtype.F32)
			base, _ := newRaw(&c.t, &memSource{b: c.src})
			cv, err := newConverted(base, size, dt, dtype.F32, conv)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]byte, n*4)
			conv(want, refNative(&c))
			rd := &reader{raw: cv, size: cv.size}
			got := make([]byte, 0, len(want))
			buf := make([]byte, 70001)
			for off := int64(0); ; {
				k, err := rd.ReadAt(buf, off)
				got = append(got, buf[:k]...)
				off += int64(k)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(got, want) {
				t.Errorf("sequential read of the converted view differs")
			}
			sweep(t, dt.String(), rd, want, rand.New(rand.NewPCG(9, 10)))
		})
	}
}

// TestConvertedReal checks New's converted views with dtype's real
// converters, against the whole tensor converted with the same converter.
func TestConvertedReal(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	var from []dtype.DType
	for _, d := range dtype.All() {
		if (d.Kind() == dtype.KindFloat || d.Kind() == dtype.KindQuant) && d.RowMeta() == 0 && d.RowGroup() == 0 { // row meta, groups: rowmeta_test.go, rowgroup_test.go
			from = append(from, d)
		}
	}
	tested := 0
	for i := range iters(400) {
		c := genCase(r, genOpts{dtypes: from, strided: true})
		for _, to := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16, dtype.F64} {
			conv, ok := dtype.ConverterFor(c.t.DType, to)
			if Convertible(&c.t, to) != (ok || c.t.DType == to) {
				t.Errorf("Convertible(%s, %s) disagrees with ConverterFor", c.t.DType, to)
			}
			if !ok || to == c.t.DType {
				continue
			}
			src := &memSource{b: c.src, name: "src.bin"}
			rd, err := New(&c.t, src, to)
			if err != nil {
				t.Fatalf("case %d %v -> %s: %v", i, &c, to, err)
			}
			want := make([]byte, c.t.NumElements()*to.ElemSize())
			conv(want, refNative(&c))
			sweep(t, fmt.Sprintf("case %d %v -> %s", i, &c, to), rd, want, r)
			tested++
		}
		if t.Failed() {
			return
		}
	}
	if tested == 0 {
		t.Skip("converter not available yet")
	}
}

func TestConvertible(t *testing.T) {
	tn := func(d dtype.DType) *index.Tensor { return &index.Tensor{DType: d, Shape: []int64{32}} }
	tests := []struct {
		from, to dtype.DType
		want     bool
	}{
		{dtype.F32, dtype.F32, true},
		{dtype.BF16, dtype.BF16, true},
		{dtype.I32, dtype.F32, false},
		{dtype.Bool, dtype.F16, false},
		{dtype.C64, dtype.F32, false},
		{dtype.F32, dtype.I32, false},
		{dtype.F32, dtype.Invalid, false},
		{dtype.I8, dtype.I8, false},
		{dtype.Invalid, dtype.F32, false},
	}
	for _, tt := range tests {
		if got := Convertible(tn(tt.from), tt.to); got != tt.want {
			t.Errorf("Convertible(%s, %s) = %v, want %v", tt.from, tt.to, got, tt.want)
		}
	}
	if dtype.CanConvert(dtype.BF16, dtype.F32) && !Convertible(tn(dtype.BF16), dtype.F32) {
		t.Errorf("Convertible(BF16, F32) = false")
	}
}

func TestNewErrors(t *testing.T) {
	src := &memSource{b: make([]byte, 100), name: "src.bin"}
	tests := []struct {
		name string
		t    *index.Tensor
		to   dtype.DType
		want string
	}{
		{"nil", nil, 0, "nil tensor"},
		{"dtype", &index.Tensor{Name: "x", DType: 200, Shape: []int64{1}, Size: 1}, 0, "unknown dtype"},
		{"size", &index.Tensor{Name: "x", DType: dtype.F32, Shape: []int64{2, 3}, Size: 20}, 0, "does not match"},
		{"negative dim", &index.Tensor{Name: "x", DType: dtype.F32, Shape: []int64{-1}, Size: 4}, 0, "negative dim"},
		{"partial block", &index.Tensor{Name: "x", DType: dtype.Q4_0, Shape: []int64{31}, Size: 18}, 0, "does not match"},
		{"offset", &index.Tensor{Name: "x", DType: dtype.U8, Shape: []int64{1}, Size: 1, Offset: -1}, 0, "negative offset"},
		{"past end", &index.Tensor{Name: "x", DType: dtype.F32, Shape: []int64{20}, Size: 80, Offset: 21}, 0, "outside src.bin"},
		{"huge offset", &index.Tensor{Name: "x", DType: dtype.F32, Shape: []int64{1}, Size: 4, Offset: 1 << 62}, 0, "outside src.bin"},
		{"strided past end", &index.Tensor{Name: "x", DType: dtype.F32, Shape: []int64{3, 3}, Strides: []int64{20, 1}, Size: 36}, 0, "outside src.bin"},
		{"strided before start", &index.Tensor{Name: "x", DType: dtype.F32, Shape: []int64{3}, Strides: []int64{-1}, Size: 12, Offset: 4}, 0, "outside src.bin"},
		{"strided overflow", &index.Tensor{Name: "x", DType: dtype.F32, Shape: []int64{3, 3}, Strides: []int64{1 << 62, 1}, Size: 36}, 0, "overflow"},
		{"strided block", &index.Tensor{Name: "x", DType: dtype.Q8_0, Shape: []int64{32}, Strides: []int64{1}, Size: 34}, 0, "cannot be strided"},
		{"strided F4", &index.Tensor{Name: "x", DType: dtype.F4, Shape: []int64{2}, Strides: []int64{1}, Size: 1}, 0, "cannot be strided"},
		{"strides rank", &index.Tensor{Name: "x", DType: dtype.F32, Shape: []int64{2, 2}, Strides: []int64{1}, Size: 16}, 0, "2 dims"},
		{"not a view dtype", &index.Tensor{Name: "x", DType: dtype.F32, Shape: []int64{2}, Size: 8}, dtype.I32, "not a view dtype"},
		{"int to float", &index.Tensor{Name: "x", DType: dtype.I32, Shape: []int64{2}, Size: 8}, dtype.F32, "cannot be converted"},
		{"complex to float", &index.Tensor{Name: "x", DType: dtype.C64, Shape: []int64{2}, Size: 16}, dtype.F32, "cannot be converted"},
	}
	for _, tt := range tests {
		_, err := New(tt.t, src, tt.to)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: New: %v, want an error containing %q", tt.name, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error has a newline: %q", tt.name, err)
		}
	}
	if _, err := New(&index.Tensor{Name: "x", DType: dtype.U8, Shape: []int64{1}, Size: 1}, nil, 0); err == nil {
		t.Errorf("New with nil source: no error")
	}
	for _, dt := range []dtype.DType{dtype.C32, dtype.Q4_0} {
		n := dt.Info().BlockElems
		size, _ := dt.ByteSize(n)
		tn := &index.Tensor{Name: "x", DType: dt, Shape: []int64{n}, Size: size}
		if dt == dtype.Q4_0 && Convertible(tn, dtype.F32) {
			continue // has a dequantizer
		}
		if _, err := NewNPY(tn, src); err == nil || !strings.Contains(err.Error(), "no .npy view") {
			t.Errorf("NewNPY(%s): %v, want no .npy view", dt, err)
		}
	}
}

// TestBacking serves tensors through real backing files in every mode,
// then truncates the file under them: reads fail with backing.ErrFault.
func TestBacking(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	var cases []tcase
	var file []byte
	for range 40 {
		c := genCase(r, genOpts{strided: true, bigDims: true})
		// Move the tensor to its own place in one shared file.
		shift := int64(len(file))
		file = append(file, c.src...)
		c.t.Offset += shift
		c.src = nil
		cases = append(cases, c)
	}
	file = append(file, make([]byte, 8192)...)
	path := filepath.Join(t.TempDir(), "ckpt.bin")
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []backing.Mode{backing.Mmap, backing.Pread, backing.Direct} {
		t.Run(mode.String(), func(t *testing.T) {
			src, err := backing.Open(path, backing.Options{Mode: mode})
			if errors.Is(err, backing.ErrDirectUnsupported) {
				t.Skipf("%v (the temp dir's filesystem refuses O_DIRECT)", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			for i := range cases {
				c := cases[i]
				c.src = file
				rd, err := New(&c.t, src, dtype.Invalid)
				if err != nil {
					t.Fatalf("%v: %v", &c, err)
				}
				if mode == backing.Direct {
					// Every read is a disk read: check less.
					quickCheck(t, c.String(), rd, refNative(&c), r)
				} else {
					sweep(t, c.String(), rd, refNative(&c), r)
				}
			}
		})
	}
	// Truncation under a live reader.
	for _, mode := range []backing.Mode{backing.Mmap, backing.Pread, backing.Direct} {
		t.Run("truncate/"+mode.String(), func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "t.bin")
			data := make([]byte, 64<<10)
			for i := range data {
				data[i] = byte(i%251 + 1)
			}
			os.WriteFile(p, data, 0o644)
			src, err := backing.Open(p, backing.Options{Mode: mode})
			if errors.Is(err, backing.ErrDirectUnsupported) {
				t.Skipf("%v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			tn := &index.Tensor{Name: "w", DType: dtype.F32, Shape: []int64{16 << 10}, Size: 64 << 10}
			tt := &index.Tensor{Name: "wt", DType: dtype.F32, Shape: []int64{128, 128}, Strides: []int64{1, 128}, Size: 64 << 10}
			var readers []Reader
			for _, x := range []*index.Tensor{tn, tt} {
				rd, err := New(x, src, dtype.Invalid)
				if err != nil {
					t.Fatal(err)
				}
				readers = append(readers, rd)
			}
			os.Truncate(p, 10000)
			buf := make([]byte, 64<<10)
			for _, rd := range readers {
				if _, err := rd.ReadAt(buf, 0); !errors.Is(err, backing.ErrFault) {
					t.Errorf("read of a truncated tensor: %v, want backing.ErrFault", err)
				} else if !strings.Contains(err.Error(), p) {
					t.Errorf("fault error %q does not name the file", err)
				}
			}
			if n, err := readers[0].ReadAt(buf[:100], 400); err != nil || n != 100 || !bytes.Equal(buf[:100], data[400:500]) {
				t.Errorf("read of bytes that still exist: %d, %v", n, err)
			}
		})
	}
}

// TestConcurrentReaders reads one reader of each kind from many goroutines.
func TestConcurrentReaders(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	type rw struct {
		rd   Reader
		want []byte
	}
	var all []rw
	for len(all) < 12 {
		c := genCase(r, genOpts{dtypes: []dtype.DType{dtype.F16, dtype.F32, dtype.C64, dtype.BF16}, strided: true, bigDims: true})
		if c.t.Size < 200 {
			continue
		}
		src := &memSource{b: c.src}
		rd, err := New(&c.t, src, dtype.Invalid)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, rw{rd, refNative(&c)})
		base, _ := newRaw(&c.t, src)
		conv := fakeConverter(c.t.DType, dtype.F64)
		cv, err := newConverted(base, c.t.Size, c.t.DType, dtype.F64, conv)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]byte, cv.size)
		conv(want, refNative(&c))
		all = append(all, rw{&reader{raw: cv, size: cv.size}, want})
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 17))
			buf := make([]byte, 4096)
			for range 500 {
				x := all[r.IntN(len(all))]
				off := r.Int64N(x.rd.Size())
				n, err := x.rd.ReadAt(buf[:r.IntN(len(buf))], off)
				if (err != nil && err != io.EOF) || !bytes.Equal(buf[:n], x.want[off:off+int64(n)]) {
					errs <- fmt.Sprintf("concurrent ReadAt at %d: %d, %v", off, n, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestNoAllocs: no representation allocates per read.
func TestNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	data := make([]byte, 1<<20)
	fill(data, 18)
	src := &memSource{b: data}
	tensors := map[string]*index.Tensor{
		"contiguous": {DType: dtype.F32, Shape: []int64{256, 256}, Size: 256 * 256 * 4, Offset: 7},
		"transposed": {DType: dtype.F16, Shape: []int64{256, 256}, Strides: []int64{1, 256}, Size: 256 * 256 * 2},
		"bigendian":  {DType: dtype.F64, Shape: []int64{100, 100}, Strides: []int64{1, 100}, Size: 100 * 100 * 8, BigEndian: true},
		"expand":     {DType: dtype.C64, Shape: []int64{100, 100}, Strides: []int64{0, 1}, Size: 100 * 100 * 8},
	}
	buf := make([]byte, 100000)
	check := func(name string, rd Reader) {
		for _, off := range []int64{0, 3, 1001} {
			allocs := testing.AllocsPerRun(20, func() {
				if _, err := rd.ReadAt(buf, off); err != nil && err != io.EOF {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("%s: ReadAt at %d: %v allocations per read, want 0", name, off, allocs)
			}
		}
	}
	for name, tn := range tensors {
		tn.Name = name
		rd, err := New(tn, src, dtype.Invalid)
		if err != nil {
			t.Fatal(err)
		}
		check(name, rd)
		base, _ := newRaw(tn, src)
		cv, err := newConverted(base, tn.Size, tn.DType, dtype.F32, fakeConverter(tn.DType, dtype.F32))
		if err != nil {
			t.Fatal(err)
		}
		check(name+" converted (fake)", &reader{raw: cv, size: cv.size})
		if Convertible(tn, dtype.BF16) {
			rd, err := New(tn, src, dtype.BF16)
			if err != nil {
				t.Fatal(err)
			}
			check(name+" converted", rd)
		}
	}
	qt := &index.Tensor{Name: "q", DType: dtype.Q4_K, Shape: []int64{256 * 100}, Size: 144 * 100}
	base, _ := newRaw(qt, src)
	cv, _ := newConverted(base, qt.Size, qt.DType, dtype.F32, fakeConverter(qt.DType, dtype.F32))
	check("quant converted (fake)", &reader{raw: cv, size: cv.size})
	npy, err := NewNPY(tensors["contiguous"], src)
	if err != nil {
		t.Fatal(err)
	}
	check("npy", npy)
}

// TestTransposedTiles covers the tiled gather of transposed layouts: whole
// rows in tiles of several column chunks, partial rows around them, and
// carries from a tile into a batch dim, for each element size.
func TestTransposedTiles(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	for _, dt := range []dtype.DType{dtype.U8, dtype.F16, dtype.F32, dtype.F64, dtype.C128} {
		for _, dims := range [][3]int64{{1, 300, 50}, {3, 70, 33}, {2, 600, 9}, {4, 5, 700}} {
			b, rows, cols := dims[0], dims[1], dims[2]
			es := dt.ElemSize()
			// Batches of (rows x cols) matrices stored as (cols x rows):
			// the transpose of each.
			c := tcase{t: index.Tensor{
				Name: "t", DType: dt, Shape: []int64{b, rows, cols},
				Strides: []int64{rows*cols + 3, 1, rows}, Offset: 5,
				Size: b * rows * cols * es,
			}}
			c.src = make([]byte, 5+(b*(rows*cols+3))*es)
			fill(c.src, uint64(rows))
			c.t.BigEndian = r.IntN(2) == 0
			rd, err := New(&c.t, &memSource{b: c.src}, dtype.Invalid)
			if err != nil {
				t.Fatal(err)
			}
			want := refNative(&c)
			sweep(t, c.String(), rd, want, r)
			quickCheck(t, c.String(), rd, want, r)
		}
	}
}
