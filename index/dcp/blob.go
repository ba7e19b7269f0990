package dcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/safetensors"
)

// A torch >= 2.8 .distcp written with SerializationFormat.SAFETENSORS
// holds its byte items, then one safetensors blob of the rank's tensor
// chunks, keyed by the tensors' keys; its __metadata__'s
// DCP_SHARDING_INFO says where each chunk lies in its tensor. The
// .metadata's tensor items all start at the blob (offset) and are as
// long as their chunk's bytes.

// ShardingInfoKey is the __metadata__ entry of a DCP safetensors blob
// (and of the Hugging Face storage writer's shards) placing each piece.
const ShardingInfoKey = "DCP_SHARDING_INFO"

// MaxShardingInfo caps the bytes of a DCP_SHARDING_INFO (it is inside a
// safetensors header, itself capped).
const MaxShardingInfo = index.MaxSafetensorsHeader

// ParseShardingInfo reads a DCP_SHARDING_INFO value: a JSON object of
// key -> {"saved_offsets": [ints >= 0]} (other fields ignored), as the
// saved_offsets by key. Errors are one line, without the file's name.
func ParseShardingInfo(s string) (map[string][]int64, error) {
	if len(s) > MaxShardingInfo {
		return nil, fmt.Errorf("%s is %d bytes, over the %d allowed", ShardingInfoKey, len(s), MaxShardingInfo)
	}
	var raw map[string]json.RawMessage
	d := json.NewDecoder(bytes.NewReader([]byte(s)))
	d.UseNumber()
	if err := d.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%s is not a JSON object: %v", ShardingInfoKey, err)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s has bytes after its JSON object", ShardingInfoKey)
	}
	out := make(map[string][]int64, len(raw))
	for k, v := range raw {
		var e struct {
			SavedOffsets []json.Number `json:"saved_offsets"`
		}
		if err := json.Unmarshal(v, &e); err != nil || e.SavedOffsets == nil {
			return nil, fmt.Errorf("%s of %q: want {\"saved_offsets\": [ints]}", ShardingInfoKey, index.Printable(k))
		}
		if len(e.SavedOffsets) > index.MaxDims {
			return nil, fmt.Errorf("%s of %q: %d offsets, more than %d dims", ShardingInfoKey, index.Printable(k), len(e.SavedOffsets), index.MaxDims)
		}
		offs := make([]int64, len(e.SavedOffsets))
		for i, n := range e.SavedOffsets {
			x, err := n.Int64()
			if err != nil || x < 0 || x > math.MaxInt64/2 {
				return nil, fmt.Errorf("%s of %q: saved_offsets %v: want non-negative ints", ShardingInfoKey, index.Printable(k), e.SavedOffsets)
			}
			offs[i] = x
		}
		out[k] = offs
	}
	return out, nil
}

// blob is a .distcp's safetensors blob, read once.
type blob struct {
	fi       int
	off      int64
	name     string // for messages
	tensors  map[string]index.Tensor
	sharding map[string][]int64 // nil: the blob has none
}

type blobKey struct {
	fi  int
	off int64
}

// blob returns the safetensors blob an item starts, or nil when the
// item is not one (a torch.save zip).
func (l *loader) blob(it Item, where string) (*blob, error) {
	fi, err := l.file(it.RelativePath, where)
	if err != nil {
		return nil, err
	}
	k := blobKey{fi, it.Offset}
	if b, ok := l.blobs[k]; ok {
		return b, nil
	}
	f := l.files[fi]
	var head [9]byte
	if it.Offset > f.Size()-9 {
		return nil, nil
	}
	if n, _ := f.ReadAt(head[:], it.Offset); n < 9 || head[8] != '{' || string(head[:4]) == "PK\x03\x04" {
		if l.blobs == nil {
			l.blobs = map[blobKey]*blob{}
		}
		l.blobs[k] = nil
		return nil, nil
	}
	name := fmt.Sprintf("%s (safetensors at byte %d)", f.Name(), it.Offset)
	sub, err := safetensors.Parse(section{io.NewSectionReader(f, it.Offset, f.Size()-it.Offset), name})
	if err != nil {
		return nil, err
	}
	b := &blob{fi: fi, off: it.Offset, name: name, tensors: make(map[string]index.Tensor, len(sub.Tensors))}
	for _, t := range sub.Tensors {
		b.tensors[t.Name] = t
	}
	if s, ok := sub.Metadata[ShardingInfoKey].(string); ok {
		if b.sharding, err = ParseShardingInfo(s); err != nil {
			return nil, index.ErrorAt(name, "__metadata__", "%v", err)
		}
	}
	if l.blobs == nil {
		l.blobs = map[blobKey]*blob{}
	}
	l.blobs[k] = b
	return b, nil
}

// blobChunk locates chunk c of tm in blob b.
func (l *loader) blobChunk(b *blob, tm TensorMeta, c ChunkMeta, it Item, where string) (int, int64, error) {
	t, ok := b.tensors[tm.FQN]
	if !ok {
		return 0, 0, index.ErrorAt(b.name, where, "the blob has no tensor %s", quote(tm.FQN))
	}
	if cs := tm.ElemShape(c.Sizes); t.DType != tm.DType || !slices.Equal(t.Shape, cs) && !(len(t.Shape) == 0 && len(cs) == 0) {
		return 0, 0, index.ErrorAt(b.name, where, "the blob holds a %s tensor of shape %v; the metadata says %s %v", t.DType, t.Shape, tm.DType, cs)
	}
	if t.Size != it.Length {
		return 0, 0, index.ErrorAt(b.name, where, "the blob's tensor is %d bytes; the metadata's item %d", t.Size, it.Length)
	}
	if b.sharding != nil {
		offs, ok := b.sharding[tm.FQN]
		if !ok || !slices.Equal(offs, c.Offsets) && !(len(offs) == 0 && len(c.Offsets) == 0) {
			return 0, 0, index.ErrorAt(b.name, where, "%s places the chunk at %v; the metadata at %v", ShardingInfoKey, offs, c.Offsets)
		}
	}
	return b.fi, b.off + t.Offset, nil
}
