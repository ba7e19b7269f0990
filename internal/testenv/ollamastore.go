package testenv

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// OllamaLayer is a layer of an Ollama manifest, as Ollama writes it
// (manifest/layer.go).
type OllamaLayer struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
	Name      string `json:"name,omitempty"`
}

// OllamaStore writes an Ollama model store under Root as Ollama writes it
// (manifest/layer.go NewLayer, manifest/manifest.go WriteManifest): each
// blob at blobs/sha256-HEX, each manifest at
// manifests/HOST/NAMESPACE/MODEL/TAG, a JSON object of schemaVersion 2.
type OllamaStore struct{ Root string }

// Blob stores data as a blob and returns its layer.
func (s OllamaStore) Blob(t testing.TB, mediaType, name string, data []byte) OllamaLayer {
	t.Helper()
	sum := sha256.Sum256(data)
	d := "sha256:" + hex.EncodeToString(sum[:])
	p := filepath.Join(s.Root, "blobs", "sha256-"+hex.EncodeToString(sum[:]))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return OllamaLayer{MediaType: mediaType, Digest: d, Size: int64(len(data)), Name: name}
}

// BlobPath is where the blob of l is.
func (s OllamaStore) BlobPath(l OllamaLayer) string {
	return filepath.Join(s.Root, "blobs", strings.Replace(l.Digest, ":", "-", 1))
}

// Manifest writes the manifest of HOST/NAMESPACE/MODEL:TAG (name in that
// form) and returns its path.
func (s OllamaStore) Manifest(t testing.TB, name string, config OllamaLayer, layers []OllamaLayer) string {
	t.Helper()
	var m struct {
		SchemaVersion int           `json:"schemaVersion"`
		MediaType     string        `json:"mediaType"`
		Config        OllamaLayer   `json:"config"`
		Layers        []OllamaLayer `json:"layers"`
	}
	m.SchemaVersion, m.MediaType = 2, "application/vnd.docker.distribution.manifest.v2+json"
	m.Config, m.Layers = config, layers
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	rest, tag, _ := strings.Cut(name, ":")
	p := filepath.Join(append([]string{s.Root, "manifests"}, append(strings.Split(rest, "/"), tag)...)...)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// OllamaConfig stores a model's config blob as Ollama's create writes one
// (model.ConfigV2) and returns its layer.
func (s OllamaStore) OllamaConfig(t testing.TB, format string) OllamaLayer {
	b, _ := json.Marshal(map[string]any{"model_format": format, "model_family": "llama", "file_type": "", "rootfs": map[string]any{"type": "layers", "diff_ids": []string{}}})
	return s.Blob(t, "application/vnd.docker.container.image.v1+json", "", b)
}

// OllamaTensor is one tensor of a safetensors file: its dtype as safetensors
// names it, its shape and its bytes.
type OllamaTensor struct {
	Name  string
	DType string
	Shape []int64
	Data  []byte
}

// ReadSafetensors returns the tensors of a safetensors file, in header
// order of their offsets, and its __metadata__.
func ReadSafetensors(t testing.TB, b []byte) ([]OllamaTensor, map[string]string) {
	t.Helper()
	n := binary.LittleEndian.Uint64(b)
	var h map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &h); err != nil {
		t.Fatal(err)
	}
	var meta map[string]string
	var out []OllamaTensor
	var offs []int64
	for k, v := range h {
		if k == "__metadata__" {
			json.Unmarshal(v, &meta)
			continue
		}
		var e struct {
			DType   string  `json:"dtype"`
			Shape   []int64 `json:"shape"`
			Offsets []int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(v, &e); err != nil {
			t.Fatal(err)
		}
		base := 8 + int64(n)
		out = append(out, OllamaTensor{Name: k, DType: e.DType, Shape: e.Shape, Data: b[base+e.Offsets[0] : base+e.Offsets[1]]})
		offs = append(offs, e.Offsets[0])
	}
	sort.Sort(byOff{out, offs})
	return out, meta
}

type byOff struct {
	t []OllamaTensor
	o []int64
}

func (b byOff) Len() int           { return len(b.t) }
func (b byOff) Less(i, j int) bool { return b.o[i] < b.o[j] }
func (b byOff) Swap(i, j int) {
	b.t[i], b.t[j] = b.t[j], b.t[i]
	b.o[i], b.o[j] = b.o[j], b.o[i]
}

// WriteSafetensors is a safetensors file of ts, in that order, with meta
// as its __metadata__ when not nil (as MLX's save_safetensors writes).
func WriteSafetensors(ts []OllamaTensor, meta map[string]string) []byte {
	h := map[string]any{}
	if meta != nil {
		h["__metadata__"] = meta
	}
	var off int64
	var data []byte
	for _, t := range ts {
		shape := t.Shape
		if shape == nil {
			shape = []int64{}
		}
		h[t.Name] = map[string]any{"dtype": t.DType, "shape": shape, "data_offsets": []int64{off, off + int64(len(t.Data))}}
		off += int64(len(t.Data))
		data = append(data, t.Data...)
	}
	hdr, _ := json.Marshal(h)
	for len(hdr)%8 != 0 {
		hdr = append(hdr, ' ')
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	return append(append(b, hdr...), data...)
}
