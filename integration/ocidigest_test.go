package integration

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/lazyweights/tensorfs/internal/testenv"
)

// TestOCICheckDataTamperedStore: check --data of a ModelPack artifact
// verifies every layer's blob against its digest, whatever the layer's
// kind: the registry (Debian's docker-registry) serves bytes changed in
// its filesystem store, same size, under the layer's right digest, and
// check --data exits 1 with one line naming that digest — a raw weight
// layer, a raw config layer (a file beside the checkpoint), an
// uncompressed .tar layer changed in an entry's bytes or in the padding
// between entries (which no entry's bytes cover: the blob is hashed
// whole), a .tar+gzip and a .tar+zstd layer changed in their compressed
// bytes (which then do not decode: the line says the digest differs,
// not only that the tar or the stream is corrupt), and the manifest's
// config blob. Each artifact passes check --data before it is changed.
// Without the whole-blob hash, the changed .tar entry and padding, the
// config blob and the changed config layer passed check --data (exit
// 0); without
// oci.digestMismatch, the compressed layers' lines said "archive/tar:
// invalid tar header" and "the zstd stream is corrupt".
func TestOCICheckDataTamperedStore(t *testing.T) {
	st := testenv.Path(t, "safetensors/swift/data.safetensors")
	weights, err := os.ReadFile(st)
	if err != nil {
		t.Fatal(err)
	}
	config := []byte(`{"architectures":["Test"]}`) // 26 bytes: 486 of padding in a tar
	tarred := modelTar(weights, config)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(tarred)
	zw.Close()
	ze, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	zstded := ze.EncodeAll(tarred, nil)
	// configAt is where config.json's bytes start in the tar: after
	// model.safetensors' header, bytes and padding, and its own header.
	configAt := 512 + (len(weights)+511)/512*512 + 512

	const (
		raw       = "application/vnd.cncf.model.weight.v1.raw"
		rawConfig = "application/vnd.cncf.model.weight.config.v1.raw"
	)
	type layer struct {
		media string
		data  []byte
		path  string // its org.cncf.model.filepath, "" for a tar
	}
	for _, c := range []struct {
		name   string
		layers []layer
		victim int // the layer changed (-1: the config blob)
		at     int // the byte changed in its blob
	}{
		{"raw weight layer", []layer{{raw, weights, "model.safetensors"}, {rawConfig, config, "config.json"}}, 0, len(weights) - 1},
		{"raw config layer", []layer{{raw, weights, "model.safetensors"}, {rawConfig, config, "config.json"}}, 1, 5},
		{"tar entry bytes", []layer{{"application/vnd.cncf.model.weight.v1.tar", tarred, ""}}, 0, 512 + len(weights) - 1},
		{"tar padding", []layer{{"application/vnd.cncf.model.weight.v1.tar", tarred, ""}}, 0, configAt + len(config) + 7},
		{"tar+gzip", []layer{{"application/vnd.cncf.model.weight.v1.tar+gzip", gz.Bytes(), ""}}, 0, gz.Len() / 2},
		{"tar+zstd", []layer{{"application/vnd.cncf.model.weight.v1.tar+zstd", zstded, ""}}, 0, len(zstded) / 2},
		{"config blob", []layer{{raw, weights, "model.safetensors"}}, -1, 3},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			reg := testenv.StartRegistry(t) // blobs are shared by digest: a registry each
			repo := "models/" + strings.NewReplacer(" ", "-", "+", "-").Replace(c.name)
			cfg := testenv.PushBlob(t, reg.Host, repo, "application/vnd.cncf.model.config.v1+json", []byte(`{"config":{"format":"safetensors"},"name":"`+c.name+`"}`), nil)
			var ds []testenv.OCIDescriptor
			for _, l := range c.layers {
				var ann map[string]string
				if l.path != "" {
					ann = map[string]string{"org.cncf.model.filepath": l.path}
				}
				ds = append(ds, testenv.PushBlob(t, reg.Host, repo, l.media, l.data, ann))
			}
			testenv.PushManifest(t, reg.Host, repo, "v1", "application/vnd.cncf.model.manifest.v1+json", cfg, ds)
			src := "oci://" + reg.Host + "/" + repo + ":v1"
			if r := runTensorfs(t, "check", "--data", src); r.code != 0 {
				t.Fatalf("check --data %s before the change: exit %d\n%s%s", src, r.code, r.stdout, r.stderr)
			}

			victim := cfg
			if c.victim >= 0 {
				victim = ds[c.victim]
			}
			tamperRegistryBlob(t, reg.Store, victim.Digest, c.at)
			r := runTensorfs(t, "check", "--data", src)
			lines := checkLines(r)
			hex := strings.TrimPrefix(victim.Digest, "sha256:")
			if r.code != 1 || len(lines) != 1 || !strings.Contains(lines[0], hex) || !strings.Contains(lines[0], "sha256 of ") {
				t.Errorf("check --data of %s with byte %d of layer %s changed in the registry's store: exit %d, want 1 with one line saying the bytes' sha256 is not the digest\n%s%s", src, c.at, victim.Digest, r.code, r.stdout, r.stderr)
			}
		})
	}
}

// tamperRegistryBlob flips byte at of the blob of digest in
// docker-registry's filesystem store (the blob's data file): the
// registry serves it as it is, under the same digest.
func tamperRegistryBlob(t *testing.T, store, digest string, at int) {
	t.Helper()
	hex := strings.TrimPrefix(digest, "sha256:")
	p := filepath.Join(store, "docker/registry/v2/blobs/sha256", hex[:2], hex, "data")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if at < 0 || at >= len(b) {
		t.Fatalf("byte %d of a %d-byte blob", at, len(b))
	}
	b[at] ^= 0x01
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestOllamaCheckDataTamperedBlob: check --data of an MLX-engine
// ollama:// model (a blob per tensor) verifies every blob against its
// name (blobs/sha256-HEX): a tensor blob, the config.json layer and the
// manifest's config blob each changed in place (same size) fail it,
// exit 1, with one line naming the blob and its digest.
func TestOllamaCheckDataTamperedBlob(t *testing.T) {
	for _, victim := range []string{"tensor", "json", "config"} {
		t.Run(victim, func(t *testing.T) {
			s, _, _ := ollamaFixtures(t)
			var m struct {
				Config testenv.OllamaLayer
				Layers []testenv.OllamaLayer
			}
			if err := json.Unmarshal(mustRead(t, filepath.Join(s.Root, "manifests/registry.ollama.ai/library/tiny/int4")), &m); err != nil {
				t.Fatal(err)
			}
			l := m.Config
			for _, x := range m.Layers {
				if victim != "config" && x.MediaType == "application/vnd.ollama.image."+victim {
					l = x
					break
				}
			}
			p := s.BlobPath(l)
			b := mustRead(t, p)
			b[len(b)-2] ^= 0x01
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			r := runTensorfs(t, "check", "--data", "ollama://tiny:int4")
			lines := checkLines(r)
			if r.code != 1 || len(lines) != 1 || !strings.Contains(lines[0], p+": sha256 of the file's") || !strings.Contains(lines[0], strings.TrimPrefix(l.Digest, "sha256:")) {
				t.Errorf("check --data with blob %s (%s) changed: exit %d, want 1 with one line naming it and its digest\n%s%s", p, l.MediaType, r.code, r.stdout, r.stderr)
			}
		})
	}
}
