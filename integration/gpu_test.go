package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/internal/testdata"
)

// fakeCUDA builds the stand-in CUDA runtime (client/cuda/testdata/
// fakecudart.c: host memory behind device pointers, strict about pinned
// and registered memory, every async copy deferred until a sync) and
// points $TENSORFS_CUDART at it for the rest of the test.
func fakeCUDA(t *testing.T) {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		testdata.SkipOrFail(t, "gcc not found (apt-get install gcc): the stand-in CUDA runtime is built with it")
	}
	lib := filepath.Join(t.TempDir(), "libcudart.so")
	src := filepath.Join(testdata.RepoRoot(), "client", "cuda", "testdata", "fakecudart.c")
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
	dir := testdata.Dir(t)
	files := []string{
		"safetensors/ollama-minicpm3/model.safetensors",
		"generated/torch_mixed_zip.pt",
		"generated/torch_mixed_legacy.pt",
		"generated/torch_nested_ckpt.pt",
		"generated/npz_compressed.npz",
		"generated/np_f4_fortran.npy",
		"gguf/quantized/ollama-ggml-q4_0.gguf",
		"gguf/quantized/ollama-ggml-q2_k.gguf",
		"pytorch/gopickle/tensor_bfloat16_proto2.pt",
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
		cmd.Dir = testdata.RepoRoot()
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
