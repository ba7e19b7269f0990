package source

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/formats"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/quant"
	"github.com/lazyweights/tensorfs/source/ollama"
)

// OllamaPrefix starts a SOURCE naming a model of Ollama's local store.
const OllamaPrefix = "ollama://"

// loadOllama loads ollama://NAME[:TAG] from the store (ollama.DefaultRoot):
// every layer's blob is checked (there, a regular file of its size, in
// the store) before any is parsed; a GGUF model is its blob, read as a
// local file is (the blob is the backing file: no copy); a tensor-blob
// model is one tree of its blobs, read as a directory of safetensors
// files is, each tensor named by its blob and under its layer's name,
// its quantized weights (.scale, .bias, the blob's quant_type) read as
// MLX's; the other layers are the files beside it.
func loadOllama(ctx context.Context, source string, opts Options) (*Checkpoint, error) {
	rest := source[len(OllamaPrefix):]
	if rest == "" {
		return nil, fmt.Errorf("%s: no model named (want ollama://NAME[:TAG]; `ollama list` names them)", source)
	}
	n, err := ollama.ParseName(rest)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", source, err)
	}
	st := &ollama.Store{Root: ollama.DefaultRoot()}
	m, mpath, err := st.ReadManifest(n)
	if err != nil {
		return nil, err
	}
	md, err := ollama.Classify(n, mpath, m)
	if err != nil {
		return nil, err
	}
	// Every blob is checked before any is opened: nothing half-loaded.
	digests := map[string]string{} // blob path -> sha256 hex
	blob := func(where string, l ollama.Layer) (string, error) {
		p, err := st.Blob(mpath, where, l)
		if err == nil {
			digests[p] = l.Hex()
			if abs, err := filepath.Abs(p); err == nil {
				digests[abs] = l.Hex() // a local file's source name is absolute
			}
		}
		return p, err
	}
	var ggufPath string
	if md.GGUF != nil {
		if ggufPath, err = blob("layer "+ollama.MediaModel, *md.GGUF); err != nil {
			return nil, err
		}
	}
	tensorPaths := make([]string, len(md.Tensors))
	for i, l := range md.Tensors {
		if tensorPaths[i], err = blob(fmt.Sprintf("tensor layer %q", l.Name), l); err != nil {
			return nil, err
		}
	}
	metaPaths := make([]string, len(md.Meta))
	for i, f := range md.Meta {
		if metaPaths[i], err = blob(fmt.Sprintf("layer %s (%s)", f.Name, f.Layer.MediaType), f.Layer); err != nil {
			return nil, err
		}
	}

	var ck *Checkpoint
	if md.GGUF != nil {
		ck, err = loadLocal(ggufPath, opts.Backing, opts.formats())
	} else {
		ck, err = loadOllamaTensors(md, tensorPaths, opts)
	}
	if err != nil {
		return nil, err
	}
	ck.digests = make([]string, len(ck.Sources))
	for i := range ck.Sources {
		if i < len(ck.Index.Sources) {
			if abs, err := filepath.Abs(ck.Index.Sources[i]); err == nil {
				ck.digests[i] = digests[abs]
			}
			if ck.digests[i] == "" {
				ck.digests[i] = digests[ck.Index.Sources[i]]
			}
		}
	}
	var files []File
	for i, f := range md.Meta {
		if !besideName(f.Name) {
			// model.safetensors, a weight map's name: the export's own
			ck.Index.Notes = append(ck.Index.Notes, index.Printable(fmt.Sprintf("%s: layer %s (%s) is not listed beside the model: its name is the export's own", mpath, f.Name, f.Layer.MediaType)))
			continue
		}
		src, err := backing.Open(metaPaths[i], backing.Options{Mode: backing.Pread})
		if err != nil {
			closeBeside(files)
			ck.Close()
			return nil, err
		}
		files = append(files, File{Name: f.Name, Src: src, SHA256: f.Layer.Hex()})
	}
	ck.ollama, ck.beside = true, &besideFiles{files: files}
	ck.beside.once.Do(func() {}) // found: Beside returns them
	return ck, nil
}

// ollamaTree is the tree of a tensor-blob model: one directory, "/",
// holding its blobs as "/sha256-HEX", read from the store.
type ollamaTree struct {
	files []string          // "/sha256-HEX", in manifest order
	paths map[string]string // tree path -> blob path
	names map[string]string // tree path -> its layer's name, for messages
}

func (t *ollamaTree) IsDir(p string) (bool, error) {
	if p == "/" {
		return true, nil
	}
	if _, ok := t.paths[p]; ok {
		return false, nil
	}
	return false, fmt.Errorf("%s: not in the model", p)
}

func (t *ollamaTree) Files(dir string) ([]string, error) {
	if dir != "/" {
		return nil, nil
	}
	return t.files, nil
}

func (t *ollamaTree) Display(p string) string {
	if b, ok := t.paths[p]; ok {
		return fmt.Sprintf("%s (tensor layer %q)", b, t.names[p])
	}
	return p
}

// loadOllamaTensors loads a tensor-blob model.
func loadOllamaTensors(md *ollama.Model, paths []string, opts Options) (*Checkpoint, error) {
	tree := &ollamaTree{paths: map[string]string{}, names: map[string]string{}}
	layerOf := map[string]string{} // blob path -> layer name
	for i, l := range md.Tensors {
		tp := "/sha256-" + l.Hex()
		tree.files = append(tree.files, tp)
		tree.paths[tp], tree.names[tp] = paths[i], l.Name
		layerOf[paths[i]] = l.Name
	}
	open := func(p string) (index.File, error) {
		b, ok := tree.paths[p]
		if !ok {
			return nil, fmt.Errorf("%s: not a blob of %s", p, md.Manifest)
		}
		s, err := backing.Open(b, opts.Backing)
		if err != nil {
			return nil, err
		}
		return backing.ForParsing(s), nil
	}
	idx, files, err := formats.LoadTree("/", tree, open, opts.formats())
	if err != nil {
		return nil, err
	}
	srcs := files
	for i, f := range files {
		srcs[i] = backing.Unwrap(f) // served by the blob, not its parsing view
	}
	ck := &Checkpoint{Index: idx, Sources: srcs}
	fail := func(err error) (*Checkpoint, error) {
		ck.Close()
		return nil, err
	}
	// A blob holds its layer's tensor, or tensors under its layer's name
	// (a group: "model.layers.1.mlp.experts" holds
	// "model.layers.1.mlp.experts.gate_proj.weight"...): Ollama's MLX
	// runner takes the names from the blobs, which must agree with the
	// manifest's.
	for _, t := range idx.Tensors {
		if t.Source < 0 || t.Source >= len(idx.Sources) {
			continue
		}
		b := idx.Sources[t.Source]
		l, ok := layerOf[b]
		if ok && t.Name != l && !strings.HasPrefix(t.Name, l+".") {
			return fail(fmt.Errorf("%s: blob %s (tensor layer %q) holds tensor %q, which is not under its layer's name", md.Manifest, b, l, index.Printable(t.Name)))
		}
	}
	cfg, err := ollamaQuant(ck)
	if err != nil {
		return fail(err)
	}
	ck.quantPreset = cfg
	return ck, nil
}

// ollamaQuant reads the quantized weights of a tensor-blob model as MLX's
// (x/create/quantize.go writes them with mlx.Quantize): a weight N.weight
// with N.weight.scale (and, in affine mode, N.weight.bias) beside it, its
// type the blob's __metadata__ "N.weight.quant_type", else "quant_type"
// (int4, int8: affine; nvfp4, mxfp4, mxfp8), its group the matching
// "group_size", else the type's. The parts are renamed as mlx-lm names
// them (N.scales, N.biases) and the returned configuration names each
// module's bits, group and mode, for formats.Quantize. A weight whose type
// is not named, or not known, or that has a global scale (an imported
// pre-quantized NVFP4: x/create/prequant.go), stays as it is stored, with
// a note: never values read with the wrong formula.
func ollamaQuant(ck *Checkpoint) (*quant.Config, error) {
	idx := ck.Index
	byName := map[string]int{}
	for i, t := range idx.Tensors {
		byName[t.Name] = i
	}
	metas := map[int]map[string]string{}
	meta := func(src int) (map[string]string, error) {
		if m, ok := metas[src]; ok {
			return m, nil
		}
		m, err := safetensorsMetadata(ck.Sources[src])
		if err != nil {
			return nil, fmt.Errorf("%s: %v", idx.SourceName(src), err)
		}
		metas[src] = m
		return m, nil
	}
	params := map[string]any{}
	renamed := false
	for _, t := range slices.Clone(idx.Tensors) {
		si, ok := byName[t.Name+".scale"]
		if !ok || t.Role != index.RoleStored {
			continue
		}
		m, err := meta(t.Source)
		if err != nil {
			return nil, err
		}
		qt := cmp.Or(m[t.Name+".quant_type"], m["quant_type"])
		gs := cmp.Or(m[t.Name+".group_size"], m["group_size"])
		bits, group, mode := ollamaQuantParams(qt)
		module, isWeight := strings.CutSuffix(t.Name, ".weight")
		note := ""
		switch {
		case qt == "":
			note = "its blob names no quant_type"
		case bits == 0:
			note = fmt.Sprintf("quant_type %q is not one Ollama writes (int4, int8, nvfp4, mxfp4, mxfp8)", index.Printable(qt))
		case !isWeight:
			note = "its name does not end in .weight"
		case has(byName, t.Name+".global_scale"):
			// An import of pre-quantized NVFP4 (x/create/prequant.go)
			// keeps the checkpoint's global scale beside the blocks',
			// which MLX's formula has no place for.
			note = "its global scale (" + t.Name + ".global_scale) is not read yet"
		}
		if gs != "" && note == "" {
			g, err := strconv.Atoi(gs)
			if err != nil || g <= 0 {
				note = fmt.Sprintf("group_size %q is not a positive number", index.Printable(gs))
			}
			group = g
		}
		_, sTaken := byName[module+".scales"]
		_, bTaken := byName[module+".biases"]
		if note == "" && (sTaken || bTaken) {
			note = fmt.Sprintf("%s.scales or %s.biases is a tensor already", module, module)
		}
		if note != "" {
			idx.Notes = append(idx.Notes, index.Printable(fmt.Sprintf("%s: tensor %q: served as stored (quantized, not read as its weights): %s", idx.SourceName(t.Source), t.Name, note)))
			continue
		}
		idx.Tensors[si].Name = module + ".scales"
		if bi, ok := byName[t.Name+".bias"]; ok {
			idx.Tensors[bi].Name = module + ".biases"
		}
		params[module] = map[string]any{"bits": float64(bits), "group_size": float64(group), "mode": mode}
		renamed = true
	}
	if !renamed {
		return nil, nil
	}
	slices.SortStableFunc(idx.Tensors, func(a, b index.Tensor) int { return strings.Compare(a.Name, b.Name) })
	if err := index.AssignPaths(idx); err != nil {
		return nil, err
	}
	return &quant.Config{File: "the Ollama manifest", Method: "mlx", Params: params}, nil
}

func has(m map[string]int, k string) bool { _, ok := m[k]; return ok }

// ollamaQuantParams are the bits, default group and MLX mode of an Ollama
// quantization type (x/quant: Canonical and its table), 0 bits for one it
// does not know.
func ollamaQuantParams(qt string) (bits, group int, mode string) {
	switch strings.ToUpper(strings.TrimSpace(qt)) {
	case "NVFP4":
		return 4, 16, "nvfp4"
	case "MXFP4":
		return 4, 32, "mxfp4"
	case "MXFP8":
		return 8, 32, "mxfp8"
	case "INT4", "FP4", "Q4":
		return 4, 64, "affine"
	case "INT8", "FP8", "Q8":
		return 8, 64, "affine"
	}
	return 0, 0, ""
}

// maxMetaHeader bounds the safetensors header safetensorsMetadata reads
// (the parser has read it already, within its own bound).
const maxMetaHeader = 100 << 20

// safetensorsMetadata returns the string entries of a safetensors file's
// __metadata__.
func safetensorsMetadata(src backing.Source) (map[string]string, error) {
	var n [8]byte
	if _, err := src.ReadAt(n[:], 0); err != nil {
		return nil, err
	}
	size := binary.LittleEndian.Uint64(n[:])
	if size > maxMetaHeader || int64(size) > src.Size()-8 {
		return nil, fmt.Errorf("safetensors header of %d bytes", size)
	}
	b := make([]byte, size)
	if k, err := src.ReadAt(b, 8); k != len(b) {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	var h struct {
		Meta map[string]any `json:"__metadata__"`
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("safetensors header: %v", err)
	}
	out := map[string]string{}
	for k, v := range h.Meta {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out, nil
}

// OllamaModel is one model of Ollama's store, as `tensorfs ls ollama://`
// lists it.
type OllamaModel struct {
	Name    string // as `ollama list` shows it (ollama.Name.Short)
	Weights string // "gguf", "tensors" (an MLX-engine model), or "unreadable"
	Problem string `json:",omitempty"` // why an unreadable one cannot be read
	Layers  int    // its layers, the config not counted
	Bytes   int64  // its layers' and config's sizes, as the manifest states them
}

// OllamaModels lists the models of Ollama's store (ollama.DefaultRoot),
// sorted by full name: each manifest read and sorted (ollama.Classify),
// its blobs not opened. A manifest that cannot be read is listed as
// "unreadable", with its Problem.
func OllamaModels() (root string, models []OllamaModel, err error) {
	st := &ollama.Store{Root: ollama.DefaultRoot()}
	names, err := st.List()
	if err != nil {
		return st.Root, nil, err
	}
	for _, n := range names {
		om := OllamaModel{Name: n.Short()}
		m, p, err := st.ReadManifest(n)
		if err == nil {
			var md *ollama.Model
			if md, err = ollama.Classify(n, p, m); err == nil {
				om.Weights = "gguf"
				if md.GGUF == nil {
					om.Weights = "tensors"
				}
				om.Layers = len(m.Layers)
				om.Bytes = m.Config.Size
				for _, l := range m.Layers {
					om.Bytes += l.Size
				}
			}
		}
		if err != nil {
			om.Weights, om.Problem = "unreadable", err.Error()
		}
		models = append(models, om)
	}
	return st.Root, models, nil
}
