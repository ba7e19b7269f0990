package source

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

const (
	modelPackConfig   = "application/vnd.cncf.model.config.v1+json"
	modelPackArtifact = "application/vnd.cncf.model.manifest.v1+json"
)

// sameTensors fails unless got has want's tensors, with their bytes.
func sameTensors(t *testing.T, src string, got, want *Checkpoint) {
	t.Helper()
	if len(want.Index.Tensors) == 0 || !slices.Equal(tensorNames(got), tensorNames(want)) || got.Index.Format != want.Index.Format {
		t.Fatalf("%s: tensors %v (%s), want %v (%s)", src, tensorNames(got), got.Index.Format, tensorNames(want), want.Index.Format)
	}
	for _, x := range want.Index.Tensors {
		if !bytes.Equal(readTensor(t, got, x.Name), readTensor(t, want, x.Name)) {
			t.Errorf("%s: tensor %s differs from the file's", src, x.Name)
		}
	}
}

// TestOCIRegistry: a ModelPack artifact (a raw safetensors weight layer
// and a config layer, named by their filepath annotations, the older
// org.cnai key for one) and a Docker Model Runner GGUF, pushed to a
// real registry (Debian's docker-registry), load by tag and by digest
// with the tensors and bytes of the files read from disk, every source
// stating its layer's digest (check --data), config.json beside.
func TestOCIRegistry(t *testing.T) {
	reg := StartRegistryForTest(t)
	st := testenv.Path(t, "safetensors/swift/data.safetensors")
	gguf := testenv.Path(t, "gguf/quantized/ollama-ggml-q4_k.gguf")
	stData, err := os.ReadFile(st)
	if err != nil {
		t.Fatal(err)
	}
	ggufData, err := os.ReadFile(gguf)
	if err != nil {
		t.Fatal(err)
	}
	cfgJSON := []byte(`{"architectures":["Test"]}`)

	repo := "models/swift"
	cfg := testenv.PushBlob(t, reg, repo, modelPackConfig, []byte(`{"descriptor":{"name":"swift"},"config":{"format":"safetensors"},"modelfs":{"type":"layers","diffIds":[]}}`), nil)
	weights := testenv.PushBlob(t, reg, repo, "application/vnd.cncf.model.weight.v1.raw", stData, map[string]string{"org.cncf.model.filepath": "model.safetensors"})
	conf := testenv.PushBlob(t, reg, repo, "application/vnd.cncf.model.weight.config.v1.raw", cfgJSON, map[string]string{"org.cnai.model.filepath": "config.json"})
	digest := testenv.PushManifest(t, reg, repo, "v1", modelPackArtifact, cfg, []testenv.OCIDescriptor{weights, conf})

	want, err := Load(context.Background(), st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	for _, src := range []string{"oci://" + reg + "/" + repo + ":v1", "oci://" + reg + "/" + repo + "@" + digest} {
		ck, err := Load(context.Background(), src, Options{})
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		sameTensors(t, src, ck, want)
		if ck.Index.Sources[0] != "oci://"+reg+"/"+repo+"@"+digest+"/model.safetensors" {
			t.Errorf("%s: source named %s, want it pinned to the manifest's digest", src, ck.Index.Sources[0])
		}
		d, ok := ck.Sources[0].(interface{ SHA256() (string, bool) })
		if !ok {
			t.Fatalf("%s: source %T states no digest", src, ck.Sources[0])
		}
		if h, ok := d.SHA256(); !ok || "sha256:"+h != weights.Digest {
			t.Errorf("%s: SHA256 %q %v, want %s", src, h, ok, weights.Digest)
		}
		beside, err := ck.Beside(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range beside {
			names = append(names, f.Name)
		}
		if !slices.Contains(names, "config.json") {
			t.Errorf("%s: beside %v, want config.json", src, names)
		}
		ck.Close()
	}

	// The same model as one uncompressed tar layer, read in place.
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for _, e := range []struct {
		name string
		data []byte
	}{{"model.safetensors", stData}, {"config.json", cfgJSON}} {
		tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), Typeflag: tar.TypeReg})
		tw.Write(e.data)
	}
	tw.Close()
	repo = "models/swift-tar"
	cfgT := testenv.PushBlob(t, reg, repo, modelPackConfig, []byte(`{"config":{"format":"safetensors"}}`), nil)
	tl := testenv.PushBlob(t, reg, repo, "application/vnd.cncf.model.weight.v1.tar", tb.Bytes(), map[string]string{"org.cncf.model.filepath": "."})
	testenv.PushManifest(t, reg, repo, "v1", modelPackArtifact, cfgT, []testenv.OCIDescriptor{tl})
	ckT, err := Load(context.Background(), "oci://"+reg+"/"+repo+":v1", Options{})
	if err != nil {
		t.Fatal(err)
	}
	sameTensors(t, "tar", ckT, want)
	// Its file is a range of the blob read as an object of its own
	// (the store offsets its GETs): a loader's runs of its tensors are
	// announced to it as plans, a GET each, as for a raw layer.
	if _, ok := ckT.Sources[0].(backing.Planner); !ok {
		t.Errorf("tar: the file's source %T takes no plans (backing.Planner)", ckT.Sources[0])
	}
	ckT.Close()

	// A sharded, block-FP8 quantized model: its shards weight layers,
	// its weight map and config.json config layers, under a directory.
	repo = "models/fp8"
	dir := testenv.Path(t, "quant/fp8_block")
	var layers []testenv.OCIDescriptor
	for _, f := range []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "model.safetensors.index.json", "config.json"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		mt := "application/vnd.cncf.model.weight.v1.raw"
		if !strings.HasSuffix(f, ".safetensors") {
			mt = "application/vnd.cncf.model.weight.config.v1.raw"
		}
		layers = append(layers, testenv.PushBlob(t, reg, repo, mt, b, map[string]string{"org.cncf.model.filepath": "fp8/" + f}))
	}
	cfg = testenv.PushBlob(t, reg, repo, modelPackConfig, []byte(`{"config":{"format":"safetensors"}}`), nil)
	testenv.PushManifest(t, reg, repo, "latest", modelPackArtifact, cfg, layers)
	wantQ, err := Load(context.Background(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer wantQ.Close()
	src := "oci://" + reg + "/" + repo
	ckQ, err := Load(context.Background(), src, Options{})
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	defer ckQ.Close()
	if len(ckQ.Sources) != len(wantQ.Sources) || len(ckQ.Index.Tensors) != len(wantQ.Index.Tensors) {
		t.Fatalf("%s: %d sources, %d tensors; want %d and %d", src, len(ckQ.Sources), len(ckQ.Index.Tensors), len(wantQ.Sources), len(wantQ.Index.Tensors))
	}
	for i, x := range wantQ.Index.Tensors {
		y := ckQ.Index.Tensors[i]
		if x.Name != y.Name || x.Role != y.Role || x.DType != y.DType || x.Path != y.Path {
			t.Errorf("%s: tensor %d is %s %v %s %s, want %s %v %s %s", src, i, y.Name, y.Role, y.DType, y.Path, x.Name, x.Role, x.DType, x.Path)
		}
	}

	// Docker Model Runner: one GGUF layer, no annotation.
	repo = "ai/spm"
	dcfg := testenv.PushBlob(t, reg, repo, "application/vnd.docker.ai.model.config.v0.1+json", []byte(`{"config":{"format":"gguf"}}`), nil)
	layer := testenv.PushBlob(t, reg, repo, "application/vnd.docker.ai.gguf.v3", ggufData, nil)
	lic := testenv.PushBlob(t, reg, repo, "application/vnd.docker.ai.license", []byte("MIT"), nil)
	testenv.PushManifest(t, reg, repo, "latest", "", dcfg, []testenv.OCIDescriptor{layer, lic})
	wantG, err := Load(context.Background(), gguf, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer wantG.Close()
	src = "oci://" + reg + "/" + repo
	ck, err := Load(context.Background(), src, Options{})
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	defer ck.Close()
	sameTensors(t, src, ck, wantG)
	h := sha256.New()
	b := make([]byte, ck.Sources[0].Size())
	if _, err := ck.Sources[0].ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	h.Write(b)
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != layer.Digest {
		t.Errorf("%s: bytes read hash to %s, want %s", src, got, layer.Digest)
	}
}

// StartRegistryForTest starts docker-registry; its host.
func StartRegistryForTest(t *testing.T) string {
	return testenv.StartRegistry(t).Host
}
