package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIKTrellisGGUF: a GGUF of ik_llama.cpp's types (dtype/testdata/ikllama2,
// from ik_llama.cpp's own quantizers) serves its Q6_0 tensor and its _KT
// ones (a float32 scale heads each row) in the .f32/ and .bf16/ views
// (whole, read inside a row, and a part of the columns), through load
// --dtype and convert --dtype, exactly as ik_llama.cpp's dequantize_row_*
// gives them; ls names nothing as not served.
func TestIKTrellisGGUF(t *testing.T) {
	ikGGUFServed(t, "seed44", []string{"Q6_0", "IQ1_KT", "IQ2_KT", "IQ3_KT", "IQ4_KT"})
}

// TestIKBNGGUF: the same for ik_llama.cpp's IQ1_BN and IQ2_BN (an fp16 or
// float32 scale heads each row of blocks of 64 ternary codes), served as
// the row's scale times ik_llama.cpp's dequantize_row_iq1_bn/_iq2_bn of
// the row's blocks (dtype/testdata/ikllama2/README.md).
func TestIKBNGGUF(t *testing.T) {
	ikGGUFServed(t, "seed47bn", []string{"IQ1_BN", "IQ2_BN"})
}

// TestIKRepackedGGUF: the same for ik_llama.cpp's row-interleaved types
// (dtype/testdata/ikllama2/seed45r: Q4_0_R8, Q8_0_R8, IQ4_XS_R8, Q4_K_R4,
// Q6_K_R4, IQ4_K_R4, IQ2_K_R4, IQ3_K_R4, 8 rows of 512 each, a block
// holding 8 or 4 rows), their reads cut inside a group and their parts
// of the rows and of the columns, bit for bit ik_llama.cpp's
// dequantize_row_*_r8/_r4; and load --gpu --dtype f32 uploads every one
// (through the stand-in CUDA runtime), each verified against the host's.
func TestIKRepackedGGUF(t *testing.T) {
	ikGGUFServed(t, "seed45r", []string{"Q4_0_R8", "Q8_0_R8", "IQ4_XS_R8", "Q4_K_R4", "Q6_K_R4", "IQ4_K_R4", "IQ2_K_R4", "IQ3_K_R4"})
	fakeCUDA(t)
	src, err := filepath.Abs(filepath.Join("..", "dtype", "testdata", "ikllama2", "seed45r.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	r := runTensorfs(t, "load", "--gpu", "0", "--verify", "--dtype", "f32", src)
	up, ver := uploadedLine.FindStringSubmatch(r.stderr), verifiedLine.FindStringSubmatch(r.stderr)
	if r.code != 0 || up == nil || ver == nil || up[1] != "8" || ver[1] != "8" {
		t.Errorf("load --gpu --dtype f32: exit %d, want 8 tensors uploaded and verified:\n%s", r.code, r.stderr)
	}
}

// TestIKRepackedMoreGGUF: the same through a mount for the other
// row-interleaved fixtures (dtype/testdata/ikllama2/seed46r, seed48r,
// seed49r, seed50r), among them the types whose groups start with their rows'
// scales (IQ4_KS_R4, IQ5_KS_R4, IQ2_BN_R4, IQ1_S_R4, IQ1_M_R4,
// Q8_KV_R8), read cut inside a group's head and blocks.
func TestIKRepackedMoreGGUF(t *testing.T) {
	for name, types := range map[string][]string{
		"seed46r": {"IQ4_KS_R4", "IQ5_KS_R4", "IQ5_K_R4", "Q5_K_R4", "Q3_K_R4", "Q2_K_R4", "IQ4_NL_R4", "Q5_0_R4", "Q6_0_R4", "IQ2_BN_R4"},
		"seed48r": {"IQ1_S_R4", "IQ1_M_R4", "IQ2_XXS_R4", "IQ3_XXS_R4", "IQ2_XS_R4", "IQ2_S_R4", "IQ3_S_R4"},
		"seed49r": {"Q8_K_R8", "Q8_KV_R8"},
		"seed50r": {"MXFP4_R8", "BF16_R16"},
	} {
		t.Run(name, func(t *testing.T) { ikGGUFServed(t, name, types) })
	}
}

// ikGGUFServed checks dtype/testdata/ikllama2/NAME.gguf, whose tensors are
// of types (in file order), against its .f32ref in every way
// TestIKTrellisGGUF names.
func ikGGUFServed(t *testing.T, name string, types []string) {
	t.Helper()
	base, err := filepath.Abs(filepath.Join("..", "dtype", "testdata", "ikllama2", name))
	if err != nil {
		t.Fatal(err)
	}
	src := base + ".gguf"
	refAll, err := os.ReadFile(base + ".f32ref")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tensors []struct {
			Name, Type string
			Shape      []int64
			SHA256F32  string `json:"sha256_f32"`
		}
	}
	js, err := os.ReadFile(base + ".json")
	if err != nil || json.Unmarshal(js, &doc) != nil || len(doc.Tensors) != len(types) {
		t.Fatalf("%s.json: %v", name, err)
	}
	for i, tn := range doc.Tensors {
		if tn.Type != types[i] {
			t.Fatalf("%s.json: tensor %d is %s, want %s", name, i, tn.Type, types[i])
		}
	}
	refs := map[string][]byte{} // in file order, as the .f32ref
	pos := 0
	for _, tn := range doc.Tensors {
		n := 4 * int(tn.Shape[0]*tn.Shape[1])
		refs[tn.Name] = refAll[pos : pos+n]
		pos += n
	}
	if pos != len(refAll) {
		t.Fatalf("%s.json: %d of %d reference bytes", name, pos, len(refAll))
	}
	bf16 := func(ref []byte) []byte {
		var out []byte
		for i := 0; i < len(ref); i += 4 {
			b := binary.LittleEndian.Uint32(ref[i:])
			if math.IsNaN(float64(math.Float32frombits(b))) {
				t.Fatal("NaN in the reference")
			}
			out = binary.LittleEndian.AppendUint16(out, uint16((b+0x7fff+(b>>16&1))>>16))
		}
		return out
	}

	r := runTensorfs(t, "ls", src)
	if r.code != 0 || strings.Contains(r.stderr, "not served") {
		t.Errorf("ls: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, tn := range doc.Tensors {
		if !strings.Contains(r.stdout, tn.Name) {
			t.Errorf("ls lacks %s:\n%s", tn.Name, r.stdout)
		}
	}
	r = runTensorfs(t, "load", "--dtype", "f32", "--sha256", "--quiet", src)
	for _, tn := range doc.Tensors {
		if !strings.Contains(r.stdout, tn.SHA256F32+"  "+tn.Name) {
			t.Errorf("load --dtype f32: want %s for %s:\n%s%s", tn.SHA256F32, tn.Name, r.stdout, r.stderr)
		}
	}
	if r.code != 0 {
		t.Errorf("load: exit %d:\n%s", r.code, r.stderr)
	}
	r = runTensorfs(t, "load", "--dtype", "bf16", "--sha256", "--quiet", src)
	for _, tn := range doc.Tensors {
		if sum := sha256.Sum256(bf16(refs[tn.Name])); !strings.Contains(r.stdout, hex.EncodeToString(sum[:])+"  "+tn.Name) {
			t.Errorf("load --dtype bf16: want %x for %s:\n%s%s", sum, tn.Name, r.stdout, r.stderr)
		}
	}
	out := filepath.Join(t.TempDir(), "out.safetensors")
	if r := runTensorfs(t, "convert", "--quiet", "--dtype", "f32", src, out); r.code != 0 {
		t.Fatalf("convert --dtype f32: exit %d: %s", r.code, r.stderr)
	}
	got := stEntries(t, out)
	for name, ref := range refs {
		if e := got[name]; e.DType != "F32" || !bytes.Equal(e.Data, ref) {
			t.Errorf("convert: %s: %s of %d bytes, differs from ik_llama.cpp's", name, e.DType, len(e.Data))
		}
	}

	needFUSE(t)
	m := mount(t, src)
	for _, tn := range doc.Tensors {
		ref, cols := refs[tn.Name], int(tn.Shape[1])
		for view, want := range map[string][]byte{".f32": ref, ".bf16": bf16(ref)} {
			got, err := os.ReadFile(m.Path(filepath.Join(view, tn.Name)))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s/%s: %d bytes (%v), differs from ik_llama.cpp's dequantization", view, tn.Name, len(got), err)
			}
		}
		if f, err := os.Open(m.Path(filepath.Join(".f32", tn.Name))); err != nil {
			t.Error(err)
		} else {
			off := 4*2*cols + 4*300 + 3 // inside the third row, mid-element
			buf := make([]byte, 1501)
			if n, err := f.ReadAt(buf, int64(off)); n != len(buf) || !bytes.Equal(buf, ref[off:off+len(buf)]) {
				t.Errorf(".f32/%s at %d: %d bytes (%v), differs", tn.Name, off, n, err)
			}
			f.Close()
		}
		var part []byte // columns [c/2, c): part 1 of 2 along dim 1
		for r := 0; r < len(ref)/(4*cols); r++ {
			part = append(part, ref[4*(r*cols+cols/2):4*(r+1)*cols]...)
		}
		if got, err := os.ReadFile(m.Path(filepath.Join(".f32", ".split", "1", "2", "1", tn.Name))); err != nil || !bytes.Equal(got, part) {
			t.Errorf(".f32/.split/1/2/1/%s: %d bytes (%v), differs", tn.Name, len(got), err)
		}
		// rows [r/2, r): part 1 of 2 along dim 0, from mid-group for the _R8 types
		if got, err := os.ReadFile(m.Path(filepath.Join(".bf16", ".split", "0", "2", "1", tn.Name))); err != nil || !bytes.Equal(got, bf16(ref[len(ref)/2:])) {
			t.Errorf(".bf16/.split/0/2/1/%s: %d bytes (%v), differs", tn.Name, len(got), err)
		}
	}
}
