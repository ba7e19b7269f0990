package formats

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// rfFile is an in-memory File.
type rfFile struct {
	name string
	data []byte
}

func (f rfFile) ReadAt(p []byte, off int64) (int, error) {
	return bytes.NewReader(f.data).ReadAt(p, off)
}
func (f rfFile) Size() int64  { return int64(len(f.data)) }
func (f rfFile) Name() string { return f.name }

// rfCat concatenates byte slices; rfU32 is a little-endian uint32, as the
// ggml writers stored every header field (fout.write(struct.pack("i", v))
// in whisper.cpp's convert-pt-to-ggml.py, file.write_u32 in llama.cpp).
func rfCat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
func rfU32(vs ...uint32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	return b
}

// rfSafetensors is a small valid safetensors file, to put inside archives.
func rfSafetensors() []byte {
	h := `{"w":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}}      `
	return rfCat(binary.LittleEndian.AppendUint64(nil, uint64(len(h))), []byte(h), []byte("01234567"))
}

// checkRefused parses data as name and checks the error is one line
// naming the file with every fragment of want, and no hex dump of the
// first bytes (the message for a file nothing knows).
func checkRefused(t *testing.T, name string, data []byte, want ...string) {
	t.Helper()
	_, err := ParseFile(rfFile{name: name, data: data})
	if err == nil {
		t.Errorf("%s: accepted", name)
		return
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, name+": ") {
		t.Errorf("%s: want one line starting with the file's name: %q", name, msg)
	}
	if strings.Contains(msg, "it starts with") {
		t.Errorf("%s: a hex dump instead of what the file is: %s", name, msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("%s: error does not say %q: %s", name, w, msg)
		}
	}
}

// TestRefusedFormats: the older formats of the tools whose checkpoints
// tensorfs reads, and files that are no checkpoint but that users point
// it at, are each refused in one line that says what they are and what
// to do, detected by content (the names here say nothing).
func TestRefusedFormats(t *testing.T) {
	// A whisper.cpp model as convert-pt-to-ggml.py writes it: the magic
	// 0x67676d6c as a little-endian int, the hyperparameters (tiny.en:
	// n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer,
	// n_text_ctx, n_text_state, n_text_head, n_text_layer, n_mels,
	// use_f16), then the mel filters (n_mel, n_fft, floats).
	whisper := rfCat(rfU32(0x67676d6c, 51864, 1500, 384, 6, 4, 448, 384, 6, 4, 80, 1), rfU32(80, 201), make([]byte, 256))
	// A llama.cpp model as llama_file_saver wrote it: magic, version,
	// hparams (n_vocab, n_embd, n_mult, n_head, n_layer, n_rot, ftype),
	// then the vocabulary (length, bytes, score).
	llama := func(magic, version uint32) []byte {
		return rfCat(rfU32(magic, version, 32000, 4096, 256, 32, 32, 128, 2), rfU32(3), []byte("<s>"), rfU32(0))
	}
	llamaUnversioned := rfCat(rfU32(0x67676d6c, 32000, 4096, 256, 32, 32, 128, 2), rfU32(3), []byte("<s>"))
	// convert-lora-to-ggml.py: magic 'ggla', version 1, r, alpha.
	lora := rfCat(rfU32(0x67676c61, 1, 8, 16), make([]byte, 64))
	// llama_save_session_file: magic 'ggsn', version 1, then the state.
	session := rfCat(rfU32(0x6767736e, 1), make([]byte, 64))
	bigEndian := func(b []byte) []byte { // the magic and version as a big-endian machine wrote them
		out := bytes.Clone(b)
		for i := 0; i < 8; i += 4 {
			binary.BigEndian.PutUint32(out[i:], binary.LittleEndian.Uint32(b[i:]))
		}
		return out
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Name, zw.ModTime = "model.safetensors", time.Unix(1700000000, 0)
	zw.Write(rfSafetensors())
	zw.Close()
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	st := rfSafetensors()
	tw.WriteHeader(&tar.Header{Name: "model/model.safetensors", Mode: 0o644, Size: int64(len(st)), Format: tar.FormatPAX, PAXRecords: map[string]string{"comment": "x"}})
	tw.Write(st)
	tw.Close()
	var zb bytes.Buffer
	zz := zip.NewWriter(&zb)
	for _, name := range []string{"metadata.json", "config.json", "model.weights.h5"} { // a Keras 3 .keras file, its weights in bzip2
		w, _ := zz.CreateRaw(&zip.FileHeader{Name: name, Method: 12, CompressedSize64: 2, UncompressedSize64: 2})
		w.Write([]byte("{}"))
	}
	zz.Close()
	var empty bytes.Buffer
	zip.NewWriter(&empty).Close()
	hdf5 := rfCat([]byte("\x89HDF\r\n\x1a\n"), []byte{0, 0, 0, 0, 0, 8, 8, 0}, make([]byte, 128))
	onnx := rfCat([]byte("\x08\x07\x12\x07pytorch\x1a\x061.13.0:\xd6\x01\n\\\n\x0connx::Gemm_0"), make([]byte, 32))

	cases := []struct {
		name string
		data []byte
		want []string
	}{
		{"whisper", whisper, []string{"GGML model file", "'ggml'", "whisper.cpp", "not GGUF", "Whisper's PyTorch .pt"}},
		{"llama-ggml", llamaUnversioned, []string{"GGML model file", "convert_llama_ggml_to_gguf.py"}},
		{"llama-ggmf", llama(0x67676d66, 1), []string{"GGMF model file", "version 1", "convert_llama_ggml_to_gguf.py"}},
		{"llama-ggjt-v1", llama(0x67676a74, 1), []string{"GGJT model file", "version 1", "convert_llama_ggml_to_gguf.py"}},
		{"llama-ggjt-v3", llama(0x67676a74, 3), []string{"GGJT model file", "version 3", "not GGUF"}},
		{"llama-ggjt-v3-be", bigEndian(llama(0x67676a74, 3)), []string{"GGJT model file", "version 3, big-endian"}},
		{"whisper-be", bigEndian(whisper), []string{"GGML model file", "big-endian"}},
		{"lora", lora, []string{"LoRA adapter", "GGLA", "convert_lora_to_gguf.py"}},
		{"session", session, []string{"session file", "not a model"}},
		{"state", rfCat(rfU32(0x67677371, 1), make([]byte, 16)), []string{"sequence state file"}}, // 'ggsq'
		{"gguf-swapped-v1", rfCat([]byte("FUGG"), rfU32(1, 0, 0)), []string{"GGUF with its magic byte-swapped", "version 1", "convert the model again"}},
		{"gguf-swapped-be", rfCat([]byte("FUGG"), []byte{0, 0, 0, 3}, make([]byte, 16)), []string{"byte-swapped", "version 3, big-endian"}},
		{"gguf-v1", rfCat([]byte("GGUF"), rfU32(1, 0, 0)), []string{"version 1", "not supported", "convert_hf_to_gguf.py"}},
		{"gguf-be", rfCat([]byte("GGUF"), []byte{0, 0, 0, 3}, make([]byte, 16)), []string{"big-endian", "gguf_convert_endian.py"}},
		{"archive", tb.Bytes(), []string{"a tar archive", `"model/model.safetensors"`, "tar -xf"}},
		{"keras", zb.Bytes(), []string{"compressed with zip method 12", "unzip the file and mount model.weights.h5"}}, // a .keras zip: read since issue 37 when stored or deflated
		{"empty-zip", empty.Bytes(), []string{"empty ZIP archive"}},
		{"gzipped", gz.Bytes(), []string{"gzip-compressed", `"model.safetensors"`, "gunzip"}},
		{"zstd", rfCat([]byte("\x28\xb5\x2f\xfd\x24\x08\x41\x00"), st), []string{"zstd-compressed", "zstd -d"}},
		{"xz", rfCat([]byte("\xfd7zXZ\x00\x00\x04\xe6\xd6\xb4\x46"), st), []string{"xz-compressed", "xz -d"}},
		{"bzip2", rfCat([]byte("BZh91AY&SY"), st), []string{"bzip2-compressed", "bunzip2"}},
		{"keras-h5", hdf5, []string{"HDF5: object header version 137"}}, // read since issue 37: this one is broken
		{"h5-userblock", rfCat(make([]byte, 512), hdf5), []string{"HDF5 file after a user block of 512 bytes", "tail -c +513"}},
		{"model-onnx", onnx, []string{"ONNX model", "past the end of its message"}}, // read since issue 37: this one is cut off
	}
	for _, c := range cases {
		checkRefused(t, c.name, c.data, c.want...)
	}
	// Files nothing knows keep the message that shows their first bytes.
	for _, data := range [][]byte{[]byte("hello, world\n"), []byte(`{"architectures": ["LlamaForCausalLM"]}`), {0x08, 0x01}} {
		if _, err := ParseFile(rfFile{name: "x", data: data}); err == nil || !strings.Contains(err.Error(), "not a checkpoint tensorfs knows") {
			t.Errorf("%q: %v", data, err)
		}
	}
}

// TestRefusedFromPython: files as their own tools write them. A PyTorch
// checkpoint in the tar format of torch.save before 0.1.10 (built here
// with Python's tarfile as torch 0.1 did, and checked to load in the
// installed PyTorch, which still reads it: so the advice the error gives
// works); a tar, gzip, bzip2 and xz of a checkpoint from Python's own
// modules. An ONNX model from torch.onnx.export, refused before issue 37,
// is read: its two initializers, float32.
func TestRefusedFromPython(t *testing.T) {
	py := testenv.Python(t, "torch")
	dir := t.TempDir()
	cmd := exec.Command(py, "-c", rfTorchTarPy, dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	want := map[string][]string{
		"old.pt":      {"PyTorch checkpoint in the tar format", "before PyTorch 0.1.10", "torch.load(path, weights_only=False)", "torch.save"},
		"ckpt.tar":    {"a tar archive", `"model.safetensors"`},
		"ckpt.tar.gz": {"gzip-compressed"},
		"ckpt.bz2":    {"bzip2-compressed"},
		"ckpt.xz":     {"xz-compressed"},
	}
	for name, frags := range want {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		checkRefused(t, name, data, frags...)
	}
	data, err := os.ReadFile(filepath.Join(dir, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := ParseFile(rfFile{name: "model.onnx", data: data})
	if err != nil {
		t.Fatalf("torch.onnx.export's model: %v", err)
	}
	if len(idx.Tensors) != 2 || idx.Format != "onnx" {
		t.Errorf("torch.onnx.export's model: %d tensors (%+v), want 2", len(idx.Tensors), idx.Tensors)
	}
	for _, tn := range idx.Tensors {
		if tn.DType.String() != "F32" {
			t.Errorf("%s: %s, want F32", tn.Name, tn.DType)
		}
	}
}

// rfTorchTarPy writes the files of TestRefusedFromPython into argv[1].
// save_tar is torch.save of PyTorch 0.1.1 to 0.1.9 (torch/serialization.py,
// _save): a PAX tar of four members, sys_info, pickle, tensors and
// storages, each written to a temporary file and added with tar.add.
const rfTorchTarPy = `
import bz2, gzip, lzma, os, pickle, struct, sys, tarfile, tempfile
import torch

def save_tar(obj, path):
    tensors, storages = {}, {}
    def persistent_id(o):
        if torch.is_tensor(o):
            tensors[id(o)] = o
            storages[o.storage().data_ptr()] = o.storage()
            return str(id(o))
        return None
    def add(tar, name, fn):
        tmp = tempfile.NamedTemporaryFile(delete=False)
        fn(tmp)
        tmp.close()
        tar.add(tmp.name, arcname=name)
        os.unlink(tmp.name)
    def sys_info(f):
        pickle.dump(dict(protocol_version=1000, little_endian=sys.byteorder == "little",
                         type_sizes=dict(short=2, int=4, long=8)), f, protocol=2)
    def pickle_objects(f):
        p = pickle.Pickler(f, protocol=2)
        p.persistent_id = persistent_id
        p.dump(obj)
    def save_tensors(f):
        pickle.dump(len(tensors), f, protocol=2)
        for key, t in tensors.items():
            pickle.dump((key, t.storage().data_ptr(), "torch." + t.type().split(".")[-1]), f, protocol=2)
            f.write(struct.pack("<i", t.dim()) + b"\0\0\0\0")
            f.write(struct.pack("<%dq" % t.dim(), *t.size()))
            f.write(struct.pack("<%dq" % t.dim(), *t.stride()))
            f.write(struct.pack("<q", t.storage_offset()))
    def save_storages(f):
        pickle.dump(len(storages), f, protocol=2)
        for key, s in storages.items():
            legacy = {torch.float32: torch.FloatStorage, torch.float64: torch.DoubleStorage, torch.int64: torch.LongStorage}[s.dtype]
            pickle.dump((key, "cpu", legacy), f, protocol=2)
            f.write(struct.pack("<q", s.size()))
            f.write(bytes(s._untyped()) if hasattr(s, "_untyped") else bytes(s.untyped()))
        pickle.dump([], f, protocol=2)  # storage views
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        add(tar, "sys_info", sys_info)
        add(tar, "pickle", pickle_objects)
        add(tar, "tensors", save_tensors)
        add(tar, "storages", save_storages)

d = sys.argv[1]
sd = {"weight": torch.arange(12, dtype=torch.float32).reshape(3, 4), "bias": torch.tensor([0.5, -1.0], dtype=torch.float64),
      "steps": torch.tensor([7])}
save_tar(sd, os.path.join(d, "old.pt"))
try:
    back = torch.load(os.path.join(d, "old.pt"), weights_only=False)
except TypeError:  # a PyTorch before weights_only
    back = torch.load(os.path.join(d, "old.pt"))
assert set(back) == set(sd) and all(torch.equal(back[k], sd[k]) for k in sd), back

torch.onnx.export(torch.nn.Linear(2, 2), torch.zeros(1, 2), os.path.join(d, "model.onnx"))

st = os.path.join(d, "model.safetensors")
h = b'{"w":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}}      '
open(st, "wb").write(struct.pack("<Q", len(h)) + h + b"01234567")
with tarfile.open(os.path.join(d, "ckpt.tar"), "w") as tar:
    tar.add(st, arcname="model.safetensors")
with tarfile.open(os.path.join(d, "ckpt.tar.gz"), "w:gz") as tar:
    tar.add(st, arcname="model.safetensors")
data = open(st, "rb").read()
open(os.path.join(d, "ckpt.bz2"), "wb").write(bz2.compress(data))
open(os.path.join(d, "ckpt.xz"), "wb").write(lzma.compress(data))
`

// FuzzRefused: DescribeRefused on any bytes never panics and says at most
// one line; ParseFile of them is one line too.
func FuzzRefused(f *testing.F) {
	f.Add(rfCat(rfU32(0x67676a74, 3, 32000)))
	f.Add(rfCat([]byte("FUGG"), []byte{0, 0, 0, 3}))
	f.Add([]byte("\x1f\x8b\x08\x0c\x00\x00\x00\x00\x00\xff\x02\x00ab" + "model\x00"))
	f.Add([]byte("\x08\x07\x12\x07pytorch\x1a\x061.13.0:"))
	f.Add(rfCat(make([]byte, 512), []byte("\x89HDF\r\n\x1a\n")))
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	tw.WriteHeader(&tar.Header{Name: "sys_info", Mode: 0o644, Size: 3, Format: tar.FormatPAX, PAXRecords: map[string]string{"comment": "x"}})
	tw.Write([]byte("abc"))
	tw.Close()
	f.Add(tb.Bytes())
	f.Fuzz(func(t *testing.T, head []byte) {
		if msg, ok := DescribeRefused(head); ok && (msg == "" || strings.ContainsAny(msg, "\n\r")) {
			t.Fatalf("%q", msg)
		}
		if _, err := ParseFile(rfFile{name: "f", data: head}); err != nil && strings.Contains(err.Error(), "\n") {
			t.Fatalf("two lines: %q", err)
		}
	})
}

// TestRefusedInDirectory: a directory SOURCE whose only model is in a
// refused format says so, naming the file; beside a checkpoint such a
// file is ignored like any other non-checkpoint file.
func TestRefusedInDirectory(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("config.json", []byte(`{"model_type": "llama"}`))
	write("ggml-model-q4_0.bin", rfCat(rfU32(0x67676a74, 3, 32000, 4096, 256, 32, 32, 128, 2)))
	open := func(p string) (index.File, error) {
		data, err := os.ReadFile(p)
		return &rfFile{name: p, data: data}, err // a pointer: the loader compares Files
	}
	_, _, err := Load(dir, open, testOptions)
	if err == nil || !strings.Contains(err.Error(), "no checkpoint in the directory: ggml-model-q4_0.bin is a GGJT model file") {
		t.Errorf("Load(dir) = %v", err)
	}
	write("model.safetensors", rfSafetensors())
	if idx, _, err := Load(dir, open, testOptions); err != nil || len(idx.Tensors) != 1 {
		t.Errorf("with a checkpoint beside it: %v", err)
	}
}
