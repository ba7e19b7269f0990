package view

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

func TestNPYHeader(t *testing.T) {
	tests := []struct {
		descr string
		shape []int64
		dict  string
	}{
		{"<f4", []int64{2, 3}, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"},
		{"<f8", []int64{7}, "{'descr': '<f8', 'fortran_order': False, 'shape': (7,), }"},
		{"|b1", []int64{}, "{'descr': '|b1', 'fortran_order': False, 'shape': (), }"},
		{"<c16", []int64{0, 4, 1}, "{'descr': '<c16', 'fortran_order': False, 'shape': (0, 4, 1), }"},
		{"<i8", []int64{1 << 40}, "{'descr': '<i8', 'fortran_order': False, 'shape': (1099511627776,), }"},
	}
	for _, tt := range tests {
		h := npyHeader(tt.descr, tt.shape)
		if len(h)%64 != 0 || !bytes.HasPrefix(h, []byte("\x93NUMPY\x01\x00")) || h[len(h)-1] != '\n' {
			t.Errorf("%v: header %q: want version 1.0, a multiple of 64 bytes, ending in a newline", tt.shape, h)
			continue
		}
		if hl := int(binary.LittleEndian.Uint16(h[8:])); hl != len(h)-10 {
			t.Errorf("%v: header length field %d, want %d", tt.shape, hl, len(h)-10)
		}
		if got := strings.TrimRight(string(h[10:len(h)-1]), " "); got != tt.dict {
			t.Errorf("%v: dict %q, want %q", tt.shape, got, tt.dict)
		}
	}
	// Over 65535 bytes of header: version 2.0 with a 4-byte length.
	big := make([]int64, 25000)
	for i := range big {
		big[i] = 1
	}
	h := npyHeader("<f4", big)
	if !bytes.HasPrefix(h, []byte("\x93NUMPY\x02\x00")) || len(h)%64 != 0 || int(binary.LittleEndian.Uint32(h[8:])) != len(h)-12 {
		t.Errorf("big header: version %d.%d, %d bytes, length field %d", h[6], h[7], len(h), binary.LittleEndian.Uint32(h[8:]))
	}
	// Just under the limit stays 1.0.
	var versions [3]int
	for n := 21700; n < 21900; n++ {
		h := npyHeader("<f4", big[:n])
		v1 := h[6] == 1
		versions[h[6]]++
		if v1 && len(h)-10 > 65535 || !v1 && len(h)-10 <= 65535-64 || len(h)%64 != 0 {
			t.Errorf("%d dims: version %d with %d bytes of header", n, h[6], len(h))
		}
	}
	if versions[1] == 0 || versions[2] == 0 {
		t.Errorf("the sweep did not cross the 1.0/2.0 limit: %v", versions)
	}
}

// npyCase is a tensor and the data its .npy view must hold.
type npyCase struct {
	tcase
	descr string
	data  []byte
}

// genNPYCase returns a random tensor whose .npy view exists, with the
// expected data: native bytes where NumPy has the dtype, else float32 from
// dtype's converter over the whole tensor.
func genNPYCase(r *rand.Rand, dts []dtype.DType) (npyCase, bool) {
	c := genCase(r, genOpts{dtypes: dts, strided: true, bigDims: r.IntN(4) == 0})
	native := refNative(&c)
	if d := c.t.DType.Info().NumPy; d != "" {
		return npyCase{c, d, native}, true
	}
	conv, ok := dtype.ConverterFor(c.t.DType, dtype.F32)
	if !ok {
		return npyCase{}, false
	}
	out := make([]byte, c.t.NumElements()*4)
	conv(out, native)
	return npyCase{c, "<f4", out}, true
}

// refHeader is the .npy header built the plain way.
func refHeader(descr string, shape []int64) []byte {
	var dims []string
	for _, d := range shape {
		dims = append(dims, fmt.Sprint(d))
	}
	s := strings.Join(dims, ", ")
	if len(shape) == 1 {
		s += ","
	}
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, s)
	for (10+len(dict)+1)%64 != 0 {
		dict += " "
	}
	dict += "\n"
	h := []byte("\x93NUMPY\x01\x00")
	h = binary.LittleEndian.AppendUint16(h, uint16(len(dict)))
	return append(h, dict...)
}

// TestNPYProperty: the .npy file at every range, against the reference
// header followed by the reference data.
func TestNPYProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for i := range iters(300) {
		c, ok := genNPYCase(r, nil)
		if !ok {
			continue
		}
		rd, err := NewNPY(&c.t, &memSource{b: c.src, name: "s"})
		if err != nil {
			t.Fatalf("case %d %v: NewNPY: %v", i, &c.tcase, err)
		}
		want := append(refHeader(c.descr, c.t.Shape), c.data...)
		sweep(t, fmt.Sprintf("npy case %d %v", i, &c.tcase), rd, want, r)
		// Reads spanning the header's end.
		hl := int64(len(want) - len(c.data))
		for _, off := range []int64{hl - 1, hl - 3, hl} {
			buf := make([]byte, 7)
			n, err := rd.ReadAt(buf, off)
			if (err != nil && err != io.EOF) || !bytes.Equal(buf[:n], want[off:min(int64(len(want)), off+7)]) {
				t.Errorf("case %d: read across the header's end at %d: %d, %v", i, off, n, err)
			}
		}
		if t.Failed() {
			return
		}
	}
}

// TestNPYNumpy writes .npy views of many tensors and has NumPy load them
// all (mmap_mode="r") in one subprocess and compare dtype, shape and data.
func TestNPYNumpy(t *testing.T) {
	py := testenv.Python(t, "numpy")
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(23, 24))
	var manifest bytes.Buffer
	count := 0
	// Every dtype a few times, so each NumPy descr and each float32
	// conversion is covered.
	var jobs []dtype.DType
	for range 4 {
		jobs = append(jobs, dtype.All()...)
	}
	for i, dt := range jobs {
		c, ok := genNPYCase(r, []dtype.DType{dt})
		if !ok {
			continue
		}
		rd, err := NewNPY(&c.t, &memSource{b: c.src, name: "s"})
		if err != nil {
			t.Fatalf("%v: NewNPY: %v", &c.tcase, err)
		}
		// Write the file through reads of odd sizes.
		var file []byte
		buf := make([]byte, 1+r.IntN(200))
		for off := int64(0); ; {
			n, err := rd.ReadAt(buf, off)
			file = append(file, buf[:n]...)
			off += int64(n)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		npy := filepath.Join(dir, fmt.Sprintf("%d_%s.npy", i, dt))
		bin := filepath.Join(dir, fmt.Sprintf("%d_%s.bin", i, dt))
		if err := os.WriteFile(npy, file, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, c.data, 0o644); err != nil {
			t.Fatal(err)
		}
		shape := c.t.Shape
		if shape == nil {
			shape = []int64{}
		}
		line, _ := json.Marshal(map[string]any{"npy": npy, "bin": bin, "descr": c.descr, "shape": shape, "what": c.tcase.String()})
		manifest.Write(append(line, '\n'))
		count++
	}
	mpath := filepath.Join(dir, "manifest.jsonl")
	if err := os.WriteFile(mpath, manifest.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	const script = `
import json, sys
import numpy as np
bad = n = 0
for line in open(sys.argv[1]):
    m = json.loads(line)
    n += 1
    try:
        a = np.load(m["npy"], mmap_mode="r")
        want = open(m["bin"], "rb").read()
        problems = []
        if a.dtype.str != m["descr"]:
            problems.append("dtype %s, want %s" % (a.dtype.str, m["descr"]))
        if a.shape != tuple(m["shape"]):
            problems.append("shape %s, want %s" % (a.shape, m["shape"]))
        if a.size and not a.flags.c_contiguous:
            problems.append("not C order")
        if a.tobytes() != want:
            problems.append("data differs")
    except Exception as e:
        problems = ["%s: %s" % (type(e).__name__, e)]
    if problems:
        bad += 1
        print("%s (%s): %s" % (m["npy"], m["what"], "; ".join(problems)))
print("checked %d" % n)
sys.exit(1 if bad else 0)
`
	out, err := exec.Command(py, "-c", script, mpath).CombinedOutput()
	if err != nil {
		t.Fatalf("numpy disagrees:\n%s", out)
	}
	if want := fmt.Sprintf("checked %d", count); !strings.Contains(string(out), want) {
		t.Fatalf("numpy output %q, want %q", out, want)
	}
	t.Logf("numpy loaded %d .npy views", count)
}

func TestNPYDType(t *testing.T) {
	for _, dt := range dtype.All() {
		tn := &index.Tensor{DType: dt}
		got, ok := NPYDType(tn)
		switch {
		case dt.Info().NumPy != "":
			if !ok || got != dt {
				t.Errorf("NPYDType(%s) = %s, %v; want itself", dt, got, ok)
			}
		case dtype.CanConvert(dt, dtype.F32), dt.RowMeta() != 0, dt.RowGroup() != 0:
			if !ok || got != dtype.F32 {
				t.Errorf("NPYDType(%s) = %s, %v; want F32", dt, got, ok)
			}
		default:
			if ok {
				t.Errorf("NPYDType(%s) = %s, true; want none", dt, got)
			}
		}
	}
	if _, ok := NPYDType(&index.Tensor{DType: dtype.BF16}); !ok && dtype.CanConvert(dtype.BF16, dtype.F32) {
		t.Errorf("BF16 has no .npy view")
	}
}
