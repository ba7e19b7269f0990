// Package ollama reads Ollama's local model store, as Ollama's own source
// lays it out (manifest/paths.go, manifest/manifest.go, types/model/name.go,
// x/imagegen/manifest): the store is $OLLAMA_MODELS, else ~/.ollama/models,
// else the system service's /usr/share/ollama/.ollama/models; a model
// HOST/NAMESPACE/NAME:TAG has its manifest at
// manifests/HOST/NAMESPACE/NAME/TAG (a Docker v2 manifest: config and
// layers, each a media type, a sha256 digest and a size) and every layer's
// bytes at blobs/sha256-HEX.
//
// A model's weights are either one application/vnd.ollama.image.model
// layer (a GGUF file) or application/vnd.ollama.image.tensor layers (the
// MLX engine's store: each a safetensors blob holding one tensor, or a
// group of them, named in the blob's header; the layer's name is the
// tensor's, or the group's prefix). Every other layer (template, params,
// license, system, projector, the model's JSON files...) is metadata.
//
// Everything is validated before it is used: a name Ollama would not
// accept, a manifest over MaxManifest bytes or with more than MaxLayers
// layers, a digest that is not sha256 and 64 hex digits, a missing blob,
// a blob whose size is not the layer's, a manifest or blob reached
// through a symbolic link that leaves the store, is one error naming the
// manifest and the layer. Nothing here knows a checkpoint format: the
// caller (package source) parses the blobs.
package ollama

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Media types of a manifest's layers (manifest/layer.go, server/images.go).
const (
	MediaModel  = "application/vnd.ollama.image.model"
	MediaTensor = "application/vnd.ollama.image.tensor"
	MediaJSON   = "application/vnd.ollama.image.json"
	mediaPrefix = "application/vnd.ollama.image."
)

// Defaults of a name's parts (types/model/name.go).
const (
	DefaultHost      = "registry.ollama.ai"
	DefaultNamespace = "library"
	DefaultTag       = "latest"
)

// Limits.
const (
	// MaxManifest bounds the bytes of a manifest read (a tensor model of
	// thousands of layers is a few megabytes).
	MaxManifest = 32 << 20
	// MaxLayers bounds a manifest's layers.
	MaxLayers = 1 << 17
	// MaxModels bounds the manifests List reads.
	MaxModels = 1 << 14
)

// Name is a model's name in the store.
type Name struct {
	Host, Namespace, Model, Tag string
}

// String is the name in full, HOST/NAMESPACE/MODEL:TAG.
func (n Name) String() string {
	return n.Host + "/" + n.Namespace + "/" + n.Model + ":" + n.Tag
}

// Short is the name as `ollama list` shows it: without the default host
// and namespace.
func (n Name) Short() string {
	switch {
	case !strings.EqualFold(n.Host, DefaultHost):
		return n.Host + "/" + n.Namespace + "/" + n.Model + ":" + n.Tag
	case !strings.EqualFold(n.Namespace, DefaultNamespace):
		return n.Namespace + "/" + n.Model + ":" + n.Tag
	}
	return n.Model + ":" + n.Tag
}

// ParseName reads NAME[:TAG], NAMESPACE/NAME[:TAG] or
// HOST/NAMESPACE/NAME[:TAG] as Ollama does (model.ParseName): the tag
// after the last ':' past the last '/', missing parts from the defaults;
// each part is checked as Ollama checks it (a letter, digit or '_' first,
// then those and '-', '.' except in a namespace, ':' only in a host; at
// most 80 bytes, 350 for a host), so that no part is "..", empty or holds
// a separator.
func ParseName(s string) (Name, error) {
	n := Name{Host: DefaultHost, Namespace: DefaultNamespace, Tag: DefaultTag}
	rest := s
	if i := strings.LastIndex(rest, ":"); i > strings.LastIndex(rest, "/") {
		rest, n.Tag = rest[:i], rest[i+1:]
	}
	parts := strings.Split(rest, "/")
	switch len(parts) {
	case 1:
		n.Model = parts[0]
	case 2:
		n.Namespace, n.Model = parts[0], parts[1]
	case 3:
		n.Host, n.Namespace, n.Model = parts[0], parts[1], parts[2]
	default:
		return Name{}, fmt.Errorf("%q: not a model name (want NAME[:TAG], NAMESPACE/NAME[:TAG] or HOST/NAMESPACE/NAME[:TAG])", s)
	}
	for _, p := range []struct {
		kind, s string
	}{{"host", n.Host}, {"namespace", n.Namespace}, {"model", n.Model}, {"tag", n.Tag}} {
		if why := badPart(p.kind, p.s); why != "" {
			return Name{}, fmt.Errorf("%q: its %s %q %s", s, p.kind, p.s, why)
		}
	}
	return n, nil
}

// badPart says why s is not a valid part of kind (types/model/name.go
// isValidPart), "" when it is.
func badPart(kind, s string) string {
	max := 80
	if kind == "host" {
		max = 350
	}
	if len(s) < 1 || len(s) > max {
		return fmt.Sprintf("is not 1 to %d bytes", max)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		word := c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_'
		switch {
		case word:
		case i == 0:
			return "does not start with a letter, digit or '_'"
		case c == '-':
		case c == '.' && kind != "namespace":
		case c == ':' && kind == "host":
		default:
			return fmt.Sprintf("holds %q", c)
		}
	}
	return ""
}

// Layer is one layer of a manifest (manifest.Layer).
type Layer struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
	From      string `json:"from,omitempty"`
	Name      string `json:"name,omitempty"` // a tensor layer's tensor or group; a JSON layer's file path
}

// Hex is the layer's digest's 64 hex digits, lower case.
func (l Layer) Hex() string { return strings.ToLower(l.Digest[len("sha256:"):]) }

// Manifest is a model's manifest (manifest.Manifest).
type Manifest struct {
	SchemaVersion int     `json:"schemaVersion"`
	MediaType     string  `json:"mediaType"`
	Config        Layer   `json:"config"`
	Layers        []Layer `json:"layers"`
}

// Store is an Ollama model store: the directory holding manifests/ and
// blobs/.
type Store struct {
	Root string

	resolved map[string]string // a store directory -> its path with links followed
}

// resolve is dir with every link followed, once per directory.
func (s *Store) resolve(dir string) (string, error) {
	if r, ok := s.resolved[dir]; ok {
		return r, nil
	}
	r, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", err
	}
	if s.resolved == nil {
		s.resolved = map[string]string{}
	}
	s.resolved[dir] = r
	return r, nil
}

// DefaultRoot is the store Ollama itself uses (envconfig.Models): the
// directory $OLLAMA_MODELS names, else ~/.ollama/models, else (when
// that is not there) the system service's /usr/share/ollama/.ollama/models.
func DefaultRoot() string {
	if s := os.Getenv("OLLAMA_MODELS"); s != "" {
		return s
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".ollama", "models")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if _, err := os.Stat(SystemRoot); err == nil {
		return SystemRoot
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".ollama", "models")
	}
	return SystemRoot
}

// SystemRoot is the store of Ollama's Linux system service.
const SystemRoot = "/usr/share/ollama/.ollama/models"

// ManifestPath is where n's manifest is in the store.
func (s *Store) ManifestPath(n Name) string {
	return filepath.Join(s.Root, "manifests", n.Host, n.Namespace, n.Model, n.Tag)
}

var digestRE = regexp.MustCompile(`^sha256:[0-9a-fA-F]{64}$`)

// inside reports whether path, every link in it followed, is within the
// store's directory dir (itself resolved).
func (s *Store) inside(path, dir string) (bool, error) {
	rp, err := filepath.EvalSymlinks(path)
	if err != nil {
		return false, err
	}
	rd, err := s.resolve(dir)
	if err != nil {
		return false, err
	}
	rel, err := filepath.Rel(rd, rp)
	if err != nil {
		return false, nil
	}
	return rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel), nil
}

// ReadManifest reads and validates n's manifest: at most MaxManifest
// bytes and MaxLayers layers, read from within the store's manifests/,
// every digest sha256 and 64 hex digits, every size not negative.
//
// A name that is not in the store as given is looked up without regard
// to case, as Ollama canonicalizes names (server/routes.go
// getExistingName): one model that matches is read, two are an error
// naming both.
func (s *Store) ReadManifest(n Name) (*Manifest, string, error) {
	p := s.ManifestPath(n)
	st, err := os.Stat(p)
	if err != nil && errors.Is(err, os.ErrNotExist) {
		var alike []Name
		if all, lerr := s.List(); lerr == nil {
			for _, o := range all {
				if strings.EqualFold(o.String(), n.String()) {
					alike = append(alike, o)
				}
			}
		}
		switch len(alike) {
		case 0:
			return nil, p, fmt.Errorf("%s: no model %s in the Ollama store %s (no manifest %s)", "ollama://"+n.Short(), n.String(), s.Root, p)
		case 1:
			p = s.ManifestPath(alike[0])
			st, err = os.Stat(p)
		default:
			return nil, p, fmt.Errorf("%s: %s and %s differ only in case: name one exactly", "ollama://"+n.Short(), alike[0], alike[1])
		}
	}
	if err != nil {
		return nil, p, err
	}
	if !st.Mode().IsRegular() {
		return nil, p, fmt.Errorf("%s: not a regular file", p)
	}
	if st.Size() > MaxManifest {
		return nil, p, fmt.Errorf("%s: manifest of %d bytes (over %d)", p, st.Size(), MaxManifest)
	}
	if ok, err := s.inside(p, filepath.Join(s.Root, "manifests")); err != nil {
		return nil, p, err
	} else if !ok {
		return nil, p, fmt.Errorf("%s: a symbolic link out of the store's manifests/", p)
	}
	m, err := ParseManifest(p)
	return m, p, err
}

// ParseManifest reads the manifest file at p and validates it (see
// ReadManifest).
func ParseManifest(p string) (*Manifest, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxManifest+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", p, err)
	}
	if len(b) > MaxManifest {
		return nil, fmt.Errorf("%s: manifest over %d bytes", p, MaxManifest)
	}
	return DecodeManifest(p, b)
}

// DecodeManifest decodes and validates the manifest b read from p.
func DecodeManifest(p string, b []byte) (*Manifest, error) {
	var head struct {
		MediaType string            `json:"mediaType"`
		Manifests []json.RawMessage `json:"manifests"`
		Layers    []json.RawMessage `json:"layers"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("%s: not a JSON manifest: %v", p, err)
	}
	if head.Manifests != nil || strings.Contains(head.MediaType, "manifest.list") || strings.Contains(head.MediaType, "image.index") {
		return nil, fmt.Errorf("%s: a manifest list (%s): not read yet (Ollama writes none; pull the model for this platform)", p, head.MediaType)
	}
	if len(head.Layers) > MaxLayers {
		return nil, fmt.Errorf("%s: %d layers (over %d)", p, len(head.Layers), MaxLayers)
	}
	var m Manifest
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: not a manifest: %v", p, err)
	}
	check := func(where string, l Layer) error {
		if !digestRE.MatchString(l.Digest) {
			return fmt.Errorf("%s: %s: digest %q is not sha256:<64 hex digits>", p, where, printable(l.Digest))
		}
		if l.Size < 0 {
			return fmt.Errorf("%s: %s: size %d", p, where, l.Size)
		}
		return nil
	}
	if m.Config.Digest != "" {
		if err := check("config", m.Config); err != nil {
			return nil, err
		}
	}
	for i, l := range m.Layers {
		if err := check(fmt.Sprintf("layer %d (%s)", i, printable(l.MediaType)), l); err != nil {
			return nil, err
		}
	}
	return &m, nil
}

// printable clips s to 120 bytes and quotes nothing: a manifest's strings
// in a message, with control bytes replaced.
func printable(s string) string {
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

// BlobPath is where the blob of a layer with this digest (validated by
// ReadManifest) is: blobs/sha256-HEX.
func (s *Store) BlobPath(digest string) string {
	return filepath.Join(s.Root, "blobs", "sha256-"+strings.ToLower(digest[len("sha256:"):]))
}

// Blob returns the path of l's blob after checking that it is there, a
// regular file of l.Size bytes, within the store's blobs/ (a symbolic
// link into it is followed; one out of it is refused). manifest and where
// name the layer in the error.
func (s *Store) Blob(manifest, where string, l Layer) (string, error) {
	p := s.BlobPath(l.Digest)
	st, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("%s: %s: blob %s is missing (the store is incomplete: pull the model again)", manifest, where, p)
		}
		return "", fmt.Errorf("%s: %s: %v", manifest, where, err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s: %s: blob %s is not a regular file", manifest, where, p)
	}
	if ok, err := s.inside(p, filepath.Join(s.Root, "blobs")); err != nil {
		return "", fmt.Errorf("%s: %s: %v", manifest, where, err)
	} else if !ok {
		return "", fmt.Errorf("%s: %s: blob %s is a symbolic link out of the store's blobs/", manifest, where, p)
	}
	if st.Size() != l.Size {
		return "", fmt.Errorf("%s: %s: blob %s is %d bytes, the manifest says %d", manifest, where, p, st.Size(), l.Size)
	}
	return p, nil
}

// List returns the names of the models in the store, sorted: the
// manifests at manifests/HOST/NAMESPACE/NAME/TAG whose four parts are a
// valid name (Ollama's Manifests). A store without manifests/ has none.
func (s *Store) List() ([]Name, error) {
	root := filepath.Join(s.Root, "manifests")
	matches, err := filepath.Glob(filepath.Join(root, "*", "*", "*", "*"))
	if err != nil {
		return nil, err
	}
	var out []Name
	for _, m := range matches {
		rel, err := filepath.Rel(root, m)
		if err != nil {
			continue
		}
		parts := strings.Split(rel, string(filepath.Separator))
		if len(parts) != 4 {
			continue
		}
		n := Name{parts[0], parts[1], parts[2], parts[3]}
		if badPart("host", n.Host) != "" || badPart("namespace", n.Namespace) != "" || badPart("model", n.Model) != "" || badPart("tag", n.Tag) != "" {
			continue
		}
		if st, err := os.Stat(m); err != nil || !st.Mode().IsRegular() {
			continue
		}
		if len(out) >= MaxModels {
			return nil, fmt.Errorf("%s: more than %d manifests", root, MaxModels)
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// Model is a manifest sorted into what a reader of the model needs.
type Model struct {
	Name     Name
	Manifest string // the manifest's path
	// GGUF is the one model layer, when the weights are a GGUF file.
	GGUF *Layer
	// Tensors are the tensor layers, in manifest order, a digest once
	// (Ollama's MLX runner loads a blob once however many layers name it).
	Tensors []Layer
	// Meta are the other layers and the config, each with a file name
	// (MetaFile).
	Meta []MetaFile
}

// MetaFile is a metadata layer and the file name it is listed as.
type MetaFile struct {
	Name  string
	Layer Layer
}

// Classify sorts m's layers: one model layer (a GGUF), or tensor layers,
// never both and never neither; every other layer is a MetaFile named by
// its media type's last word (template, params, license...) or, for a
// JSON layer, by its file name (config.json), "-2", "-3"... added where
// two would have one name; the config blob is "config".
func Classify(n Name, path string, m *Manifest) (*Model, error) {
	md := &Model{Name: n, Manifest: path}
	used := map[string]int{}
	meta := func(base string, l Layer) {
		if base == "" || base == "." || base == ".." || len(base) > 200 || strings.ContainsAny(base, "/\\") ||
			strings.ContainsFunc(base, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			base = "layer"
		}
		name := base
		for used[name] > 0 {
			used[base]++
			name = fmt.Sprintf("%s-%d", base, used[base])
		}
		used[name]++
		md.Meta = append(md.Meta, MetaFile{Name: name, Layer: l})
	}
	seen := map[string]bool{}
	for i, l := range m.Layers {
		switch l.MediaType {
		case MediaModel:
			if md.GGUF != nil {
				return nil, fmt.Errorf("%s: layers %s and %d are both the model's weights (%s)", path, md.GGUF.Digest, i, MediaModel)
			}
			l := l
			md.GGUF = &l
		case MediaTensor:
			if l.Name == "" {
				return nil, fmt.Errorf("%s: layer %d (%s): no name", path, i, MediaTensor)
			}
			if !seen[l.Digest] {
				seen[l.Digest] = true
				md.Tensors = append(md.Tensors, l)
			}
		case MediaJSON:
			base := l.Name
			if strings.Contains(base, "/") {
				base = strings.ReplaceAll(base, "/", "--")
			}
			meta(base, l)
		default:
			meta(printable(l.MediaType[strings.LastIndex(l.MediaType, ".")+1:]), l)
		}
	}
	if md.GGUF != nil && len(md.Tensors) > 0 {
		return nil, fmt.Errorf("%s: both a GGUF layer (%s) and %d tensor layers (%s)", path, MediaModel, len(md.Tensors), MediaTensor)
	}
	if md.GGUF == nil && len(md.Tensors) == 0 {
		return nil, fmt.Errorf("%s: no weights: no %s or %s layer", path, MediaModel, MediaTensor)
	}
	if m.Config.Digest != "" {
		meta("config", m.Config)
	}
	return md, nil
}
