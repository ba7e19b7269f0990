package integration

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/formats"
	"github.com/lazyweights/tensorfs/index"
)

// ikFile is an index.File over a byte slice.
type ikFile struct {
	*bytes.Reader
	name string
}

func (f ikFile) Name() string { return f.name }

// TestIKLlamaGGUF: ik_llama.cpp's IQ2_K..IQ6_K tensors and its row-scaled
// IQ4_KS, IQ2_KS, IQ4_KSS, IQ5_KS, IQ3_KS, IQ2_KL ones (a scale before
// each row's blocks; from its own quantizer, dtype/testdata/ikllama) are
// served like mainline quantized GGUF tensors: .f32 (bit for bit
// ik_llama.cpp's own dequantization, read whole, inside a row, and split
// along the columns) and .bf16 views, .npy, `load --dtype f32` and
// `convert --dtype f32`; index.json lists none unserved.
func TestIKLlamaGGUF(t *testing.T) {
	needFUSE(t)
	fixture := filepath.Join("..", "dtype", "testdata", "ikllama", "seed7.gguf")
	b, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	refb, err := os.ReadFile(fixture + ".f32ref")
	if err != nil {
		t.Fatal(err)
	}
	idx, err := formats.ParseFile(ikFile{bytes.NewReader(b), fixture})
	if err != nil {
		t.Fatal(err)
	}
	// The .f32ref holds every tensor, served or not, in file order.
	type part struct {
		name  string
		off   int64
		n     int64
		t     *index.Tensor
		typ   string
		shape []int64
	}
	var parts []part
	for i := range idx.Tensors {
		tn := &idx.Tensors[i]
		parts = append(parts, part{tn.Name, tn.Offset, tn.NumElements(), tn, tn.DType.String(), tn.Shape})
	}
	for _, u := range idx.Unserved {
		n := int64(1)
		for _, d := range u.Shape {
			n *= d
		}
		parts = append(parts, part{u.Name, u.Offset, n, nil, u.Type, u.Shape})
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i].off < parts[j].off })

	// A GGUF of the served tensors only (names without dots), and the
	// float32 bytes each must give.
	le32 := func(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }
	le64 := func(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }
	hdr := le64(le64(append([]byte("GGUF"), 3, 0, 0, 0), uint64(len(idx.Tensors))), 0)
	var data []byte
	want := map[string][]byte{}
	cols := map[string]int{}
	pos := int64(0)
	for _, p := range parts {
		ref := refb[4*pos : 4*(pos+p.n)]
		pos += p.n
		if p.t == nil {
			continue
		}
		name := strings.ReplaceAll(p.name, ".", "_")
		want[name] = ref
		cols[name] = int(p.shape[1])
		hdr = append(le64(hdr, uint64(len(name))), name...)
		hdr = le32(hdr, 2)
		hdr = le64(le64(hdr, uint64(p.shape[1])), uint64(p.shape[0]))
		code := uint32(p.t.DType.Info().GGML)
		hdr = le64(le32(hdr, code), uint64(len(data)))
		data = append(data, b[p.t.Offset:p.t.Offset+p.t.Size]...)
		for len(data)%32 != 0 {
			data = append(data, 0)
		}
	}
	if len(want) != 22 || 4*pos != int64(len(refb)) {
		t.Fatalf("%d served tensors, %d of %d reference bytes", len(want), 4*pos, len(refb))
	}
	for len(hdr)%32 != 0 {
		hdr = append(hdr, 0)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "ik.gguf")
	if err := os.WriteFile(src, append(hdr, data...), 0o644); err != nil {
		t.Fatal(err)
	}

	m := mount(t, src)
	for name, ref := range want {
		if got, err := os.ReadFile(m.Path(".f32/" + name)); err != nil || !bytes.Equal(got, ref) {
			t.Errorf(".f32/%s: %d bytes (%v), differs from ik_llama.cpp's", name, len(got), err)
		}
		bf := make([]byte, 0, len(ref)/2)
		for i := 0; i < len(ref); i += 4 {
			v := binary.LittleEndian.Uint32(ref[i:])
			bf = binary.LittleEndian.AppendUint16(bf, uint16((v+0x7fff+(v>>16&1))>>16))
		}
		if got, err := os.ReadFile(m.Path(".bf16/" + name)); err != nil || !bytes.Equal(got, bf) {
			t.Errorf(".bf16/%s: %d bytes (%v), differs from ik_llama.cpp's rounded", name, len(got), err)
		}
		if _, err := os.Stat(m.Path(".npy/" + name + ".npy")); err != nil {
			t.Errorf(".npy/%s.npy: %v", name, err)
		}
		// A read inside the second row (its scale, for a row-scaled
		// type), cut mid-element, and a part of the columns.
		if f, err := os.Open(m.Path(".f32/" + name)); err != nil {
			t.Error(err)
		} else {
			off := 4*cols[name] + 4*300 + 1
			buf := make([]byte, 2001)
			if n, err := f.ReadAt(buf, int64(off)); n != len(buf) || !bytes.Equal(buf, ref[off:off+len(buf)]) {
				t.Errorf(".f32/%s at %d: %d bytes (%v), differs from ik_llama.cpp's", name, off, n, err)
			}
			f.Close()
		}
		var part []byte // columns [c/2, c) of every row: part 1 of 2
		for r := 0; r < len(ref)/(4*cols[name]); r++ {
			part = append(part, ref[4*(r*cols[name]+cols[name]/2):4*(r+1)*cols[name]]...)
		}
		if got, err := os.ReadFile(m.Path(".f32/.split/1/2/1/" + name)); err != nil || !bytes.Equal(got, part) {
			t.Errorf(".f32/.split/1/2/1/%s: %d bytes (%v), differs from ik_llama.cpp's", name, len(got), err)
		}
	}
	m.Unmount()

	var sums []string
	for name, ref := range want {
		sums = append(sums, loadSum(ref)+"  "+name+"\n")
	}
	sort.Slice(sums, func(i, j int) bool { return sums[i][66:] < sums[j][66:] }) // index order: by name
	if r := runTensorfs(t, "load", "--sha256", "--quiet", "--dtype", "f32", src); r.code != 0 || r.stdout != strings.Join(sums, "") {
		t.Errorf("load --dtype f32: exit %d\n%s\nwant\n%s\n%s", r.code, r.stdout, strings.Join(sums, ""), r.stderr)
	}
	out := filepath.Join(dir, "ik.safetensors")
	if r := runTensorfs(t, "convert", "--quiet", "--dtype", "f32", src, out); r.code != 0 {
		t.Fatalf("convert --dtype f32: exit %d: %s", r.code, r.stderr)
	}
	got := stEntries(t, out)
	for name, ref := range want {
		if e := got[name]; e.DType != "F32" || !bytes.Equal(e.Data, ref) {
			t.Errorf("convert: %s: %s of %d bytes, differs from ik_llama.cpp's", name, e.DType, len(e.Data))
		}
	}

	// The fixture itself: every tensor served, none listed.
	m = mount(t, fixture)
	raw, err := os.ReadFile(m.Path(".tensorfs/index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tensors  []struct{ Name string } `json:"tensors"`
		Unserved []struct {
			Name, Type, Why string
		} `json:"unserved"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Tensors) != 22 || len(doc.Unserved) != 0 {
		t.Fatalf("index.json: %d tensors, %d unserved", len(doc.Tensors), len(doc.Unserved))
	}
	m.Unmount()
}
