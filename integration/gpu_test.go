package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/client/cuda"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// fakeCUDA builds the stand-in CUDA runtime (client/cuda/testdata/
// fakecudart.c: host memory behind device pointers, strict about pinned
// and registered memory, every async copy deferred until a sync) and
// points $TENSORFS_CUDART at it for the rest of the test.
func fakeCUDA(t *testing.T) {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		testenv.SkipOrFail(t, "gcc not found (apt-get install gcc): the stand-in CUDA runtime is built with it")
	}
	lib := filepath.Join(t.TempDir(), "libcudart.so")
	src := filepath.Join(testenv.RepoRoot(), "client", "cuda", "testdata", "fakecudart.c")
	if out, err := exec.Command(gcc, "-shared", "-fPIC", "-O2", "-pthread", "-o", lib, src).CombinedOutput(); err != nil {
		t.Fatalf("building the stand-in libcudart: %v\n%s", err, out)
	}
	t.Setenv("TENSORFS_CUDART", lib)
	t.Setenv("FAKE_CUDART_LOG", "")
}

var (
	uploadedLine = regexp.MustCompile(`(?m)^uploaded (\d+) tensors? to cuda:0: .* in [0-9.]+ s, [0-9.]+ GB/s \(setup [0-9.]+ s, copying [0-9.]+ s at [0-9.]+ GB/s\); device memory .* in one allocation; .*; peak host memory .* \(RssAnon\), .* \(VmHWM\)$`)
	verifiedLine = regexp.MustCompile(`(?m)^verified (\d+) tensors? on cuda:0: the sha256 of every tensor copied back matches the host's`)
)

// TestLoadGPU runs `tensorfs load --gpu 0 --verify` over the stand-in
// runtime on real checkpoints of every format, by every read path, as
// stored and converted, and through a mount: every tensor is uploaded,
// copied back and its sha256 compared with the host's.
func TestLoadGPU(t *testing.T) {
	fakeCUDA(t)
	dir := testenv.Dir(t)
	files := []string{
		"safetensors/ollama-minicpm3/model.safetensors",
		"generated/torch_mixed_zip.pt",
		"generated/torch_mixed_legacy.pt",
		"generated/torch_nested_ckpt.pt",
		"generated/npz_compressed.npz",
		"generated/np_f4_fortran.npy",
		"gguf/quantized/ollama-ggml-q4_0.gguf",
		"gguf/quantized/ollama-ggml-q2_k.gguf",
		"gguf/types/types.gguf", // every ggml type, converted with --dtype f16
		"pytorch/gopickle/tensor_bfloat16_proto2.pt",
		"modern/dcp_ws4", // tensors tiled from chunks of 4 ranks
	}
	for _, f := range files {
		path := filepath.Join(dir, f)
		ls := runTensorfs(t, "ls", "--json", path)
		if ls.code != 0 {
			t.Fatalf("ls %s: %s", f, ls.stderr)
		}
		for _, flags := range [][]string{
			nil, {"--dtype", "f16"}, {"--io", "direct"}, {"--register"},
			{"--parallel", "3", "--buffers", "2", "--chunk", "4KiB", "--streams", "3"},
		} {
			args := append(append([]string{"load", "--gpu", "0", "--verify"}, flags...), path)
			r := runTensorfs(t, args...)
			if r.code != 0 {
				t.Fatalf("tensorfs %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
			}
			up, ver := uploadedLine.FindStringSubmatch(r.stderr), verifiedLine.FindStringSubmatch(r.stderr)
			if up == nil || ver == nil || up[1] != ver[1] || up[1] == "0" {
				t.Fatalf("tensorfs %s: report:\n%s", strings.Join(args, " "), r.stderr)
			}
		}
	}

	// O_DIRECT reads are said to be so.
	r := runTensorfs(t, "load", "--gpu", "0", "--io", "direct", filepath.Join(dir, files[0]))
	if !strings.Contains(r.stderr, "read model.safetensors: O_DIRECT") {
		t.Errorf("--io direct: %s", r.stderr)
	}

	t.Run("through a mount", func(t *testing.T) {
		needFUSE(t)
		m := mount(t, filepath.Join(dir, files[1]))
		r := runTensorfs(t, "load", "--gpu", "0", "--verify", "--dtype", "bf16", m.Dir)
		if r.code != 0 || verifiedLine.FindString(r.stderr) == "" {
			t.Fatalf("load --gpu 0 of the mount: exit %d: %s", r.code, r.stderr)
		}
	})
}

// TestLoadGPUErrors: each way a GPU upload cannot run is one line, exit
// 1 (2 for usage), and says which.
func TestLoadGPUErrors(t *testing.T) {
	fakeCUDA(t)
	src := filepath.Join(t.TempDir(), "model.safetensors")
	writeSafetensors(t, src, []stTensor{{Name: "w", DType: "F32", Shape: []int64{1000}, Data: pattern(4000, 1)}}, nil)
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"no runtime", []string{"TENSORFS_CUDART=/nonexistent/libcudart.so"}, []string{"--gpu", "0"}, 1, "tensorfs: load --gpu 0: CUDA runtime not found (/nonexistent/libcudart.so): "},
		{"no device", nil, []string{"--gpu", "1"}, 1, "tensorfs: load --gpu 1: no CUDA device 1: the machine has 1 CUDA device"},
		{"too big", []string{"FAKE_CUDART_MEM=1000"}, []string{"--gpu", "0"}, 1, "not enough free device memory: it needs 4.00 KiB on cuda:0, which has 1000 B free of 1000 B"},
		{"verify alone", nil, []string{"--verify"}, 2, "tensorfs: load: --verify needs --gpu"},
		{"sha256", nil, []string{"--gpu", "0", "--sha256"}, 2, "--sha256 does not go with --gpu"},
		{"bad io", nil, []string{"--gpu", "0", "--io", "fast"}, 2, `--io: unknown mode "fast" (want auto, pread, mmap or direct)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, kv := range tc.env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			r := runTensorfs(t, append(append([]string{"load"}, tc.args...), src)...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q in one line", r.code, r.stderr, tc.code, tc.want)
			}
		})
	}

	t.Run("built without cgo", func(t *testing.T) {
		bin := filepath.Join(t.TempDir(), "tensorfs-nocgo")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/tensorfs")
		cmd.Dir = testenv.RepoRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("CGO_ENABLED=0 go build: %v\n%s", err, out)
		}
		r := runCmd(t, nil, bin, "load", "--gpu", "0", src)
		if r.code != 1 || !strings.HasPrefix(r.stderr, "tensorfs: load --gpu 0: this tensorfs was built without cgo (CGO_ENABLED=0)") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
	})
}

// ipcConsumerEnv, when set to a mount point, makes the test binary the
// other process of TestMountGPU (see ipcConsumer).
const ipcConsumerEnv = "TENSORFS_TEST_IPC_CONSUMER"

// ipcConsumer opens every allocation of the --gpu mount at mnt through
// the CUDA API (cuda.OpenMount: cudaIpcOpenMemHandle), copies every
// tensor back from the mapped device memory and compares it with the
// mount's file at its path. It prints "ok N" and returns 0, or says what
// differs and returns 1.
func ipcConsumer(mnt string) int {
	rt, err := cuda.Open()
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer rt.Close()
	s, err := cuda.OpenMount(rt, mnt)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer s.Close()
	for _, t := range s.Tensors {
		idx, err := os.ReadFile(filepath.Join(mnt, cuda.IPCIndexPath))
		if err != nil {
			fmt.Println(err)
			return 1
		}
		var doc cuda.IPCIndex
		json.Unmarshal(idx, &doc)
		var path string
		for _, d := range doc.Tensors {
			if d.Name == t.Name {
				path = d.Path
			}
		}
		want, err := os.ReadFile(filepath.Join(mnt, path))
		if err != nil {
			fmt.Println(err)
			return 1
		}
		got := make([]byte, t.Size)
		if err := rt.CopyToHost(got, t.Ptr); err != nil {
			fmt.Println(t.Name, err)
			return 1
		}
		if !bytes.Equal(got, want) {
			fmt.Printf("%s: the device bytes at offset %d differ from %s\n", t.Name, t.Offset, path)
			return 1
		}
	}
	fmt.Printf("ok %d\n", len(s.Tensors))
	return 0
}

// TestMountGPU mounts checkpoints with --gpu 0 over the stand-in runtime
// (its device memory is a memory file another process can map, its IPC
// handles name it) and has a second process open every handle through
// the CUDA API and compare every tensor with the mount's files; checks
// .cuda/'s modes and document, and that the device memory is freed when
// the mount ends.
func TestMountGPU(t *testing.T) {
	needFUSE(t)
	fakeCUDA(t)
	dir := testenv.Dir(t)
	for _, tc := range []struct {
		file  string
		flags []string
	}{
		{"generated/torch_nested_ckpt.pt", nil},
		{"gguf/quantized/ollama-ggml-q4_0.gguf", []string{"--dtype", "f16"}},
		{"generated/torch_mixed_zip.pt", []string{"--dtype", "bf16", "--allow-other"}},
		{"generated/npz_compressed.npz", nil},
		{"modern/dcp_ws2", []string{"--dtype", "f32"}},
	} {
		t.Run(filepath.Base(tc.file)+strings.Join(tc.flags, ""), func(t *testing.T) {
			logPath := filepath.Join(t.TempDir(), "calls.log")
			t.Setenv("FAKE_CUDART_LOG", logPath)
			m := mount(t, filepath.Join(dir, tc.file), append([]string{"--gpu", "0"}, tc.flags...)...)
			if !strings.Contains(m.Stderr(), "uploaded ") || !strings.Contains(m.Stderr(), "shared through .cuda/index.json") {
				t.Errorf("no upload line: %s", m.Stderr())
			}
			data, err := os.ReadFile(m.Path(".cuda/index.json"))
			if err != nil {
				t.Fatal(err)
			}
			var doc cuda.IPCIndex
			if err := json.Unmarshal(data, &doc); err != nil {
				t.Fatal(err)
			}
			if doc.Device != 0 || !regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`).MatchString(doc.UUID) ||
				len(doc.Allocations) != 1 || len(doc.Allocations[0].Handle) != 128 || len(doc.Tensors) == 0 {
				t.Fatalf("document: %s", data)
			}
			var idx struct{ Tensors []struct{ Name string } }
			ij, _ := os.ReadFile(m.Path(".tensorfs/index.json"))
			json.Unmarshal(ij, &idx)
			if len(idx.Tensors) > len(doc.Tensors) || !sort.SliceIsSorted(doc.Tensors, func(i, j int) bool { return doc.Tensors[i].Name < doc.Tensors[j].Name }) {
				t.Fatalf("%d tensors in the document (want every one, in name order), %d in index.json", len(doc.Tensors), len(idx.Tensors))
			}
			for _, d := range doc.Tensors {
				if d.Offset%256 != 0 || d.Offset+d.Size > doc.Allocations[0].Size {
					t.Fatalf("tensor %+v: offset not a multiple of 256 or outside the allocation", d)
				}
			}
			wantDir, wantFile := os.FileMode(0o500), os.FileMode(0o400)
			if slices.Contains(tc.flags, "--allow-other") {
				wantDir, wantFile = 0o555, 0o444
			}
			if st, err := os.Stat(m.Path(".cuda")); err != nil || st.Mode().Perm() != wantDir {
				t.Errorf(".cuda: %v %v, want %v", st.Mode(), err, wantDir)
			}
			if st, err := os.Stat(m.Path(".cuda/index.json")); err != nil || st.Mode().Perm() != wantFile {
				t.Errorf(".cuda/index.json: %v %v, want %v", st.Mode(), err, wantFile)
			}

			self, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(self)
			cmd.Env = append(os.Environ(), ipcConsumerEnv+"="+m.Dir, "FAKE_CUDART_LOG=")
			out, err := cmd.CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != fmt.Sprintf("ok %d", len(doc.Tensors)) {
				t.Fatalf("second process: %v: %s", err, out)
			}

			m.Unmount()
			calls := readFakeLog(t, logPath)
			if !strings.Contains(calls, "cudaIpcGetMemHandle") || strings.Count(calls, "cudaMalloc ptr=") != 1 || strings.Count(calls, "cudaFree ptr=0x") != 1 {
				t.Fatalf("the server's CUDA calls: want one cudaMalloc freed at unmount, one IPC handle:\n%s", calls)
			}
		})
	}
}

// TestMountGPUSourceReplaced: a `mv` that replaces SOURCE after mount
// --gpu validated it and before it uploads (the stand-in runtime renames
// at its first call, which comes between the two) changes nothing: the
// device holds the bytes of the file the tree serves, the one validated,
// not the file now at SOURCE's name.
func TestMountGPUSourceReplaced(t *testing.T) {
	needFUSE(t)
	fakeCUDA(t)
	dir := t.TempDir()
	src, other := filepath.Join(dir, "model.safetensors"), filepath.Join(dir, "other.safetensors")
	const n = 1 << 16
	writeSafetensors(t, src, []stTensor{{Name: "w", DType: "F32", Shape: []int64{n}, Data: pattern(4*n, 1)}}, nil)
	writeSafetensors(t, other, []stTensor{{Name: "w", DType: "F32", Shape: []int64{n}, Data: pattern(4*n, 2)}}, nil)
	t.Setenv("FAKE_CUDART_RENAME", other+":"+src)
	m := mount(t, src, "--gpu", "0")
	if _, err := os.Stat(other); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the stand-in did not move %s over SOURCE: %v", other, err)
	}
	if got, err := os.ReadFile(m.Path("w")); err != nil || !bytes.Equal(got, pattern(4*n, 1)) {
		t.Fatalf("the tree does not serve the validated file: %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), ipcConsumerEnv+"="+m.Dir, "FAKE_CUDART_LOG=", "FAKE_CUDART_RENAME=")
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok 1" {
		t.Fatalf("the device does not hold what the tree serves: %v: %s", err, out)
	}
}

// TestMountGPUErrors: a --gpu mount that cannot upload mounts nothing.
func TestMountGPUErrors(t *testing.T) {
	fakeCUDA(t)
	src := filepath.Join(t.TempDir(), "model.safetensors")
	writeSafetensors(t, src, []stTensor{{Name: "w", DType: "F32", Shape: []int64{1000}, Data: pattern(4000, 1)}}, nil)
	for _, tc := range []struct {
		name, env, want string
		args            []string
	}{
		{"no device", "", "tensorfs: mount --gpu 2: no CUDA device 2: the machine has 1 CUDA device", []string{"--gpu", "2"}},
		{"too big", "FAKE_CUDART_MEM=1000", "not enough free device memory", []string{"--gpu", "0"}},
		{"no runtime", "TENSORFS_CUDART=/nonexistent/libcudart.so", "tensorfs: mount --gpu 0: CUDA runtime not found", []string{"--gpu", "0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if k, v, ok := strings.Cut(tc.env, "="); ok {
				t.Setenv(k, v)
			}
			mnt := t.TempDir()
			r := runTensorfs(t, append(append([]string{"mount"}, tc.args...), src, mnt)...)
			if r.code != 1 || !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Fatalf("exit %d, stderr %q; want exit 1 and %q in one line", r.code, r.stderr, tc.want)
			}
			if mountedAt(mnt) {
				t.Fatal("mounted anyway")
			}
		})
	}
}

func readFakeLog(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestLoadSplit: `load --split` (host and --gpu) delivers each rank only
// its part of the tensors the rules name, the bytes of
// numpy.array_split(...)[part]; the others whole.
func TestLoadSplit(t *testing.T) {
	fakeCUDA(t)
	src := filepath.Join(t.TempDir(), "model.safetensors")
	writeSafetensors(t, src, []stTensor{
		{Name: "model.embed_tokens.weight", DType: "F32", Shape: []int64{11, 5}, Data: pattern(220, 1)},
		{Name: "model.layers.0.self_attn.q_proj.weight", DType: "F32", Shape: []int64{7, 5}, Data: pattern(140, 2)},
		{Name: "model.layers.0.self_attn.o_proj.weight", DType: "BF16", Shape: []int64{5, 7}, Data: pattern(70, 3)},
		{Name: "model.norm.weight", DType: "F32", Shape: []int64{5}, Data: pattern(20, 4)},
	}, nil)
	const parts = 3
	want := runPy(t, `
import hashlib, json, struct, sys
import numpy as np
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8+n])
split = {"model.embed_tokens.weight": 0, "model.layers.0.self_attn.q_proj.weight": 0, "model.layers.0.self_attn.o_proj.weight": 1}
for part in range(int(sys.argv[2])):
    for name in sorted(k for k in hdr if k != "__metadata__"):
        h = hdr[name]
        a, b = h["data_offsets"]
        dt = {"F32": np.float32, "BF16": np.uint16}[h["dtype"]]
        x = np.frombuffer(raw[8+n+a:8+n+b], dtype=dt).reshape(h["shape"])
        if name in split:
            x = np.array_split(x, int(sys.argv[2]), axis=split[name])[part]
        print(part, hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest(), name)
`, src, fmt.Sprint(parts))
	var got strings.Builder
	for part := range parts {
		r := runTensorfs(t, "load", "--quiet", "--sha256", "--split", "llama", "--parts", fmt.Sprint(parts), "--part", fmt.Sprint(part), src)
		if r.code != 0 {
			t.Fatalf("load --split part %d: %s", part, r.stderr)
		}
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			fmt.Fprintf(&got, "%d %s\n", part, line)
		}
		g := runTensorfs(t, "load", "--gpu", "0", "--verify", "--split", "llama", "--parts", fmt.Sprint(parts), "--part", fmt.Sprint(part), src)
		if g.code != 0 || verifiedLine.FindString(g.stderr) == "" || !strings.Contains(g.stderr, fmt.Sprintf("part %d of %d: 3 tensors split, 1 tensor whole", part, parts)) {
			t.Fatalf("load --gpu 0 --split part %d: exit %d: %s", part, g.code, g.stderr)
		}
	}
	if strings.ReplaceAll(got.String(), "  ", " ") != want {
		t.Fatalf("load --split --sha256:\n%s\nnumpy.array_split:\n%s", got.String(), want)
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--split", "*.norm.weight=1", "--parts", "2", "--part", "0"}, 1, `tensor "model.norm.weight" matches --split rule "*.norm.weight" but has no dimension 1 (shape [5])`},
		{[]string{"--parts", "2", "--part", "0"}, 2, "--parts and --part need --split"},
		{[]string{"--split", "llama", "--parts", "2", "--part", "2"}, 2, "--split needs --parts N (1 or more) and --part K (0 to N-1)"},
		{[]string{"--split", "q_proj", "--parts", "2", "--part", "0"}, 2, `"q_proj" is not PATTERN=DIM`},
	} {
		r := runTensorfs(t, append(append([]string{"load", "--gpu", "0"}, tc.args...), src)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("load %v: exit %d, stderr %q; want exit %d and %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
}

// TestMountGPUModelDirectoryClash: with --gpu, a tensor named as a file
// of the model directory (config.json beside the checkpoint) is served at
// config.json#1, and .cuda/index.json names it there, where its bytes are.
func TestMountGPUModelDirectoryClash(t *testing.T) {
	needFUSE(t)
	fakeCUDA(t)
	t.Setenv("FAKE_CUDART_LOG", filepath.Join(t.TempDir(), "calls.log"))
	d := t.TempDir()
	clash := pattern(16, 9)
	writeSafetensors(t, filepath.Join(d, "model.safetensors"), []stTensor{
		{Name: "config.json", DType: "F32", Shape: []int64{4}, Data: clash},
		{Name: "w", DType: "F32", Shape: []int64{2}, Data: pattern(8, 3)},
	}, nil)
	if err := os.WriteFile(filepath.Join(d, "config.json"), []byte(`{"model_type": "llama"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	m := mount(t, d, "--gpu", "0")
	data, err := os.ReadFile(m.Path(".cuda/index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc cuda.IPCIndex
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	paths := map[string]string{}
	for _, d := range doc.Tensors {
		paths[d.Name] = d.Path
	}
	if paths["config.json"] != "config.json#1" || paths["w"] != "w" {
		t.Fatalf(".cuda/index.json: paths %v, want config.json at config.json#1\n%s", paths, data)
	}
	if got, err := os.ReadFile(m.Path(paths["config.json"])); err != nil || !bytes.Equal(got, clash) {
		t.Errorf("%s: %v, not the tensor's bytes", paths["config.json"], err)
	}
}
