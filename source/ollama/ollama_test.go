package ollama

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseName: names are read as Ollama reads them (model.ParseName:
// defaults, the tag after the last ':' past the last '/'), and a part
// Ollama would refuse is refused, so that no part is a path step.
func TestParseName(t *testing.T) {
	ok := []struct{ in, want string }{
		{"llama3.2", "registry.ollama.ai/library/llama3.2:latest"},
		{"llama3.2:1b", "registry.ollama.ai/library/llama3.2:1b"},
		{"someone/model:q4_K_M", "registry.ollama.ai/someone/model:q4_K_M"},
		{"hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M", "hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M"},
		{"localhost:5000/ns/m:t", "localhost:5000/ns/m:t"},
		{"localhost:5000/ns/m", "localhost:5000/ns/m:latest"},
	}
	for _, c := range ok {
		n, err := ParseName(c.in)
		if err != nil || n.String() != c.want {
			t.Errorf("ParseName(%q) = %q, %v; want %q", c.in, n, err, c.want)
		}
	}
	for _, in := range []string{"", ":", "a:", "..", "a/..", "../a", "a/b/c/d", "a b", "a/b.c/d", ".hidden", "a:b/c", "m:../x", strings.Repeat("a", 81)} {
		if n, err := ParseName(in); err == nil {
			t.Errorf("ParseName(%q) = %q; want an error", in, n)
		}
	}
}

// TestClassifyNames: metadata layers are named by their media type's last
// word, JSON layers by their file name, twice-used names numbered, the
// config last; tensor layers sharing a digest are one blob.
func TestClassifyNames(t *testing.T) {
	d := func(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }
	m := &Manifest{Config: Layer{Digest: d('c')}, Layers: []Layer{
		{MediaType: MediaTensor, Digest: d('1'), Name: "a.weight"},
		{MediaType: MediaTensor, Digest: d('1'), Name: "b.weight"},
		{MediaType: MediaTensor, Digest: d('2'), Name: "c.weight"},
		{MediaType: MediaJSON, Digest: d('3'), Name: "config.json"},
		{MediaType: MediaJSON, Digest: d('4'), Name: "draft/config.json"},
		{MediaType: "application/vnd.ollama.image.license", Digest: d('5')},
		{MediaType: "application/vnd.ollama.image.license", Digest: d('6')},
		{MediaType: "application/vnd.ollama.image.template", Digest: d('7')},
		{MediaType: "weird/../../x", Digest: d('8')},
		{MediaType: MediaJSON, Digest: d('9'), Name: "a\nb.json"},
	}}
	md, err := Classify(Name{}, "m", m)
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Tensors) != 2 {
		t.Errorf("%d tensor blobs, want 2", len(md.Tensors))
	}
	var names []string
	for _, f := range md.Meta {
		names = append(names, f.Name)
	}
	if got, want := strings.Join(names, " "), "config.json draft--config.json license license-2 template layer layer-2 config"; got != want {
		t.Errorf("meta %q, want %q", got, want)
	}
}

// TestDecodeManifestBounds: more than MaxLayers layers is refused before
// they are decoded; a negative size too.
func TestDecodeManifestBounds(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"layers":[`)
	for i := 0; i <= MaxLayers; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("{}")
	}
	b.WriteString("]}")
	if _, err := DecodeManifest("m", []byte(b.String())); err == nil || !strings.Contains(err.Error(), "layers (over") {
		t.Errorf("%d layers: %v", MaxLayers+1, err)
	}
	neg := `{"layers":[{"mediaType":"x","digest":"sha256:` + strings.Repeat("a", 64) + `","size":-1}]}`
	if _, err := DecodeManifest("m", []byte(neg)); err == nil || !strings.Contains(err.Error(), "size -1") {
		t.Errorf("negative size: %v", err)
	}
}

// TestDefaultRoot: $OLLAMA_MODELS first, then ~/.ollama/models when it
// is there.
func TestDefaultRoot(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("OLLAMA_MODELS", "/x/models")
	if got := DefaultRoot(); got != "/x/models" {
		t.Errorf("with OLLAMA_MODELS: %s", got)
	}
	t.Setenv("OLLAMA_MODELS", "")
	want := filepath.Join(home, ".ollama", "models")
	if err := os.MkdirAll(want, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := DefaultRoot(); got != want {
		t.Errorf("with ~/.ollama/models: %s, want %s", got, want)
	}
}

// FuzzDecodeManifest: any bytes decode to a validated manifest or an
// error; a manifest that decodes has only sha256 digests, which name
// blobs inside blobs/.
func FuzzDecodeManifest(f *testing.F) {
	f.Add([]byte(`{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json","config":{"mediaType":"application/vnd.docker.container.image.v1+json","digest":"sha256:` + strings.Repeat("a", 64) + `","size":1},"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:` + strings.Repeat("b", 64) + `","size":2}]}`))
	f.Add([]byte(`{"layers":[{"mediaType":"application/vnd.ollama.image.tensor","digest":"sha256:../../x","size":2,"name":"../w"}]}`))
	f.Add([]byte(`{"manifests":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeManifest("m", b)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("two lines: %q", err)
			}
			return
		}
		s := &Store{Root: "/store"}
		for _, l := range append(m.Layers, m.Config) {
			if l.Digest == "" {
				continue
			}
			if p := s.BlobPath(l.Digest); filepath.Dir(p) != "/store/blobs" {
				t.Errorf("digest %q: blob %s", l.Digest, p)
			}
		}
		Classify(Name{}, "m", m)
	})
}

// TestReadManifestCase: a name not in the store as given is found without
// regard to case when one model matches; two that differ only in case
// are an error naming both.
func TestReadManifestCase(t *testing.T) {
	s := &Store{Root: t.TempDir()}
	write := func(parts ...string) {
		p := filepath.Join(append([]string{s.Root, "manifests"}, parts...)...)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(`{"schemaVersion":2,"layers":[]}`), 0o644)
	}
	write("hf.co", "Bartowski", "Llama-GGUF", "Q4_K_M")
	n, _ := ParseName("hf.co/bartowski/llama-gguf:q4_k_m")
	if _, p, err := s.ReadManifest(n); err != nil || !strings.HasSuffix(p, filepath.Join("Bartowski", "Llama-GGUF", "Q4_K_M")) {
		t.Errorf("case-insensitive: %s, %v", p, err)
	}
	write("hf.co", "bartowski", "Llama-GGUF", "Q4_K_M")
	n, _ = ParseName("hf.co/BARTOWSKI/llama-gguf:q4_k_m")
	if _, _, err := s.ReadManifest(n); err == nil || !strings.Contains(err.Error(), "differ only in case") {
		t.Errorf("two alike: %v", err)
	}
}

// FuzzParseName: a name that parses has four parts that are each one
// path component, never "." or "..", so ManifestPath stays in manifests/.
func FuzzParseName(f *testing.F) {
	for _, s := range []string{"llama3.2:1b", "hf.co/u/r:Q4", "a/b", "../x", "a/../b:c", "h:1/n/m:t", ":"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseName(s)
		if err != nil {
			return
		}
		st := &Store{Root: "/store"}
		rel, err := filepath.Rel("/store/manifests", st.ManifestPath(n))
		if err != nil || len(strings.Split(rel, string(filepath.Separator))) != 4 || strings.HasPrefix(rel, "..") {
			t.Errorf("%q: manifest at %s", s, st.ManifestPath(n))
		}
		for _, p := range []string{n.Host, n.Namespace, n.Model, n.Tag} {
			if p == "." || p == ".." || strings.ContainsAny(p, "/\\\x00") {
				t.Errorf("%q: part %q", s, p)
			}
		}
	})
}
