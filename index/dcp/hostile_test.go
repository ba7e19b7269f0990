package dcp

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/dcp/internal/dcpwrite"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// encode writes md as torch's dcp.save lays out a .metadata
// (dcpwrite), with the hostile changes h: the tests make hostile
// checkpoints by changing one thing of a real one.
const mdMod = dcpwrite.MetadataModule

var dtypeTorch = map[dtype.DType]string{dtype.F32: "float32", dtype.F16: "float16", dtype.BF16: "bfloat16", dtype.I64: "int64", dtype.Bool: "bool", dtype.F8E4M3: "float8_e4m3fn"}

// hostile are the knobs of encode beyond the Metadata.
type hostile struct {
	layoutGlobal [2]string // instead of torch.serialization._get_layout
	transforms   bool      // a non-empty transform_descriptors on every item
	chunkBomb    int       // every tensor's chunk list: one memoized list of this many chunks
	mcore        string    // a key Megatron's mcore_data says was reformulated
}

func encode(md *Metadata, h hostile) []byte {
	w := &dcpwrite.Writer{}
	w.Op("\x80\x02")
	w.Obj(mdMod, "Metadata",
		"state_dict_metadata", func() {
			w.Op("}(")
			bi := 0
			bombed := false
			for _, t := range md.Tensors {
				for bi < len(md.Bytes) && md.Bytes[bi] < t.FQN {
					w.Str(md.Bytes[bi])
					w.Obj(mdMod, "BytesStorageMetadata")
					bi++
				}
				w.Str(t.FQN)
				w.Obj(mdMod, "TensorStorageMetadata",
					"properties", func() {
						lm, ln := "torch.serialization", "_get_layout"
						if h.layoutGlobal[0] != "" {
							lm, ln = h.layoutGlobal[0], h.layoutGlobal[1]
						}
						w.Properties(dtypeTorch[t.DType], lm, ln)
					},
					"size", func() { w.Size(t.Size) },
					"chunks", func() {
						if h.chunkBomb > 0 && len(t.Size) == 2 {
							if bombed {
								w.Op("h\x01") // the list memoized below
								return
							}
							// One list of chunkBomb references to one chunk,
							// memoized: every 2-D tensor gets it for 2 bytes.
							bombed = true
							w.Op("]q\x01(")
							w.Obj(mdMod, "ChunkStorageMetadata", "offsets", func() { w.Size([]int64{0, 0}) }, "sizes", func() { w.Size([]int64{0, 0}) })
							w.Op("q\x02")
							for i := 1; i < h.chunkBomb; i++ {
								w.Op("h\x02")
							}
							w.Op("e")
							return
						}
						w.Op("](")
						for _, c := range t.Chunks {
							w.Obj(mdMod, "ChunkStorageMetadata", "offsets", func() { w.Size(c.Offsets) }, "sizes", func() { w.Size(c.Sizes) })
						}
						w.Op("e")
					})
			}
			for ; bi < len(md.Bytes); bi++ {
				w.Str(md.Bytes[bi])
				w.Obj(mdMod, "BytesStorageMetadata")
			}
			w.Op("u")
		},
		"planner_data", func() {
			w.Op("}(")
			for fqn, p := range md.Planner {
				w.Str(fqn)
				w.Op("(")
				for _, c := range p {
					w.Str(c)
				}
				w.Op("t")
			}
			w.Op("u")
		},
		"mcore_data", func() {
			w.Op("}(")
			if h.mcore != "" {
				w.Str(h.mcore)
				w.Op("}(")
				w.Str("nd_reformulated_orig_global_shape")
				w.Op("(")
				w.Int(2)
				w.Int(12)
				w.Int(16)
				w.Op("tu")
			}
			w.Op("u")
		},
		"storage_data", func() {
			w.Op("}(")
			keys := make([]string, 0, len(md.Storage))
			for k := range md.Storage {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				it := md.Storage[k]
				fqn, offs, _ := strings.Cut(k, "\x00")
				w.Obj(mdMod, "MetadataIndex", "fqn", func() { w.Str(fqn) }, "offset", func() {
					if offs == "" {
						w.Op("N")
						return
					}
					var o []int64
					for _, f := range strings.Fields(strings.Trim(offs, "[]")) {
						var n int64
						for _, ch := range f {
							n = n*10 + int64(ch-'0')
						}
						o = append(o, n)
					}
					w.Size(o)
				}, "index", func() { w.Op("N") })
				attrs := []any{"relative_path", func() { w.Str(it.RelativePath) }, "offset", func() { w.Int(it.Offset) }, "length", func() { w.Int(it.Length) }}
				if h.transforms {
					attrs = append(attrs, "transform_descriptors", func() { w.Op("]("); w.Str("zstd"); w.Op("e") })
				} else if it.Transform != "" {
					attrs = append(attrs, "transform_descriptors", func() { w.Op("]("); w.Str(it.Transform); w.Op("e") })
				}
				w.Obj("torch.distributed.checkpoint.filesystem", "_StorageInfo", attrs...)
			}
			w.Op("u")
		})
	w.Op(".")
	return w.Bytes()
}

// baseDCP reads a fixture's metadata and copies its .distcp files into a
// new directory.
func baseDCP(t *testing.T, name string) (*Metadata, string) {
	t.Helper()
	src := testenv.Path(t, filepath.Join("modern", name))
	f, err := openPread(filepath.Join(src, MetadataName))
	if err != nil {
		testenv.SkipOrFail(t, err.Error())
	}
	md, err := ReadMetadata(f)
	f.(interface{ Close() error }).Close()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ents, _ := os.ReadDir(src)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".distcp") {
			data, err := os.ReadFile(filepath.Join(src, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return md, dir
}

// clone deep-copies md so that a case can change it.
func clone(md *Metadata) *Metadata {
	out := &Metadata{Bytes: slices.Clone(md.Bytes), Planner: map[string][]string{}, Storage: map[string]Item{}}
	for k, v := range md.Planner {
		out.Planner[k] = slices.Clone(v)
	}
	for k, v := range md.Storage {
		out.Storage[k] = v
	}
	for _, t := range md.Tensors {
		c := TensorMeta{FQN: t.FQN, DType: t.DType, Size: slices.Clone(t.Size)}
		for _, ch := range t.Chunks {
			c.Chunks = append(c.Chunks, ChunkMeta{slices.Clone(ch.Offsets), slices.Clone(ch.Sizes)})
		}
		out.Tensors = append(out.Tensors, c)
	}
	return out
}

// tensor returns the tensor fqn of md.
func tensor(md *Metadata, fqn string) *TensorMeta {
	for i := range md.Tensors {
		if md.Tensors[i].FQN == fqn {
			return &md.Tensors[i]
		}
	}
	panic(fqn)
}

// setItems changes every item of fqn.
func setItems(md *Metadata, fqn string, f func(*Item)) {
	for k, it := range md.Storage {
		if strings.HasPrefix(k, fqn+"\x00") {
			f(&it)
			md.Storage[k] = it
		}
	}
}

func TestHostile(t *testing.T) {
	base, _ := baseDCP(t, "dcp_ws2")
	const wq = "model.layers.0.attention.wq.weight" // [24,16] in two chunks along dim 0
	cases := []struct {
		name   string
		change func(md *Metadata, dir string)
		h      hostile
		err    string // "" : loads
	}{
		{"as saved", nil, hostile{}, ""},
		{"other global", nil, hostile{layoutGlobal: [2]string{"torch.distributed.checkpoint.planner", "WriteItem"}}, "names torch.distributed.checkpoint.planner.WriteItem, which is not one of the classes"},
		{"dangerous global", nil, hostile{layoutGlobal: [2]string{"os", "system"}}, "os.system"},
		{"chunk bomb", nil, hostile{chunkBomb: 60000}, "shared references multiply"},
		{"overlap", func(md *Metadata, _ string) {
			c := tensor(md, wq).Chunks
			c[1].Offsets = slices.Clone(c[0].Offsets)
		}, hostile{}, "overlap"},
		{"hole", func(md *Metadata, _ string) {
			tm := tensor(md, wq)
			tm.Chunks = tm.Chunks[:1]
		}, hostile{}, "leave holes"},
		{"chunk outside", func(md *Metadata, _ string) {
			tensor(md, wq).Chunks[1].Sizes[0] = 100
		}, hostile{}, "exceed the tensor's size"},
		{"petabytes", func(md *Metadata, _ string) {
			tm := tensor(md, wq)
			tm.Size = []int64{1 << 40, 1 << 20}
		}, hostile{}, "leave holes"},
		{"overflow", func(md *Metadata, _ string) {
			tm := tensor(md, wq)
			tm.Size = []int64{1 << 40, 1 << 40}
		}, hostile{}, "overflows"},
		{"past the end", func(md *Metadata, _ string) {
			setItems(md, wq, func(it *Item) { it.Length += 1 << 30 })
		}, hostile{}, "past the file's end"},
		{"dot dot", func(md *Metadata, _ string) {
			setItems(md, wq, func(it *Item) { it.RelativePath = "../" + it.RelativePath })
		}, hostile{}, "not a file name inside"},
		{"absolute", func(md *Metadata, _ string) {
			setItems(md, wq, func(it *Item) { it.RelativePath = "/etc/passwd" })
		}, hostile{}, "not a file name inside"},
		{"missing distcp", func(md *Metadata, _ string) {
			setItems(md, wq, func(it *Item) { it.RelativePath = "__7_0.distcp" })
		}, hostile{}, "not in the directory"},
		{"empty tensor, no chunk", func(md *Metadata, _ string) {
			tm := tensor(md, "model.zero")
			tm.Chunks = nil
		}, hostile{}, ""},
		{"empty chunk, no item", func(md *Metadata, _ string) {
			tm := tensor(md, wq)
			tm.Chunks = append(tm.Chunks, ChunkMeta{[]int64{24, 0}, []int64{0, 16}})
		}, hostile{}, ""},
		{"no item", func(md *Metadata, _ string) {
			for k := range md.Storage {
				if strings.HasPrefix(k, wq+"\x00") {
					delete(md.Storage, k)
				}
			}
		}, hostile{}, "no item for the chunk"},
		{"item not a chunk", func(md *Metadata, _ string) {
			setItems(md, wq, func(it *Item) { it.Offset++ })
		}, hostile{}, "not a torch.save zip"},
		{"other dtype", func(md *Metadata, _ string) {
			tensor(md, wq).DType = dtype.F32
		}, hostile{}, "the metadata says F32"},
		{"truncated distcp", func(md *Metadata, dir string) {
			os.Truncate(filepath.Join(dir, "__1_0.distcp"), 1000)
		}, hostile{}, "past the file's end"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, dir := baseDCP(t, "dcp_ws2")
			md := clone(base)
			if c.change != nil {
				c.change(md, dir)
			}
			if err := os.WriteFile(filepath.Join(dir, MetadataName), encode(md, c.h), 0o644); err != nil {
				t.Fatal(err)
			}
			idx, files, err := load(dir)
			for _, f := range files {
				f.(interface{ Close() error }).Close()
			}
			if c.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(idx.Tensors) != len(base.Tensors) {
					t.Fatalf("%d tensors, want %d", len(idx.Tensors), len(base.Tensors))
				}
				return
			}
			if err == nil {
				t.Fatalf("loaded; want an error with %q", c.err)
			}
			msg := err.Error()
			if !strings.Contains(msg, c.err) || strings.Contains(msg, "\n") || !errors.Is(err, index.ErrFormat) {
				t.Fatalf("error %q, want one line with %q (a FormatError)", msg, c.err)
			}
			if !strings.Contains(msg, dir) {
				t.Errorf("error %q does not name the checkpoint", msg)
			}
		})
	}
}

// TestMegatronReformulated: a tensor Megatron's mcore_data says it saved
// in a reformulated shape is listed in the metadata as not read; the
// other tensors are served.
func TestMegatronReformulated(t *testing.T) {
	md, dir := baseDCP(t, "dcp_ws2")
	const wq = "model.layers.0.attention.wq.weight"
	if err := os.WriteFile(filepath.Join(dir, MetadataName), encode(md, hostile{mcore: wq}), 0o644); err != nil {
		t.Fatal(err)
	}
	idx, files, err := load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		f.(interface{ Close() error }).Close()
	}
	if len(idx.Tensors) != len(md.Tensors)-1 {
		t.Fatalf("%d tensors, want %d", len(idx.Tensors), len(md.Tensors)-1)
	}
	if why := idx.NotRead["model/layers.0.attention.wq.weight"]; !strings.Contains(why, "reformulated") {
		t.Fatalf("NotRead = %v", idx.NotRead)
	}
	if _, ok := idx.Metadata["dcp.not_read"]; ok || len(idx.Notes) != 1 {
		t.Fatalf("metadata %v, notes %q", idx.Metadata, idx.Notes)
	}
	js, err := idx.Document().JSON()
	if err != nil || !strings.Contains(string(js), `"not_read":{"model/layers.0.attention.wq.weight":"saved by Megatron`) {
		t.Fatalf("%v: %s", err, js)
	}
}

// TestUnknownTransform: items stored through a transform tensorfs does
// not know (a descriptor other than stream.zstd/1) leave their tensors
// unserved, one line each, and their values described; the checkpoint
// still loads.
func TestUnknownTransform(t *testing.T) {
	md, dir := baseDCP(t, "dcp_ws2")
	if err := os.WriteFile(filepath.Join(dir, MetadataName), encode(md, hostile{transforms: true}), 0o644); err != nil {
		t.Fatal(err)
	}
	idx, files, err := load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		f.(interface{ Close() error }).Close()
	}
	if len(idx.Tensors) != 0 || len(idx.Unserved) != len(md.Tensors) {
		t.Fatalf("%d tensors and %d unserved, want 0 and %d", len(idx.Tensors), len(idx.Unserved), len(md.Tensors))
	}
	for _, u := range idx.Unserved {
		if !strings.Contains(u.Why, `["zstd"]`) || strings.Contains(u.Why, "\n") || u.Source < 0 || u.Source >= len(idx.Sources) {
			t.Fatalf("unserved %+v", u)
		}
	}
	for _, k := range md.Bytes {
		v, _ := idx.Metadata[strings.Join(md.Planner[k], "/")].(map[string]any)
		if s, _ := v["value"].(string); !strings.Contains(s, "transforms") {
			t.Fatalf("value %s: %v", k, idx.Metadata)
		}
	}
}
