package formats

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/lazyweights/tensorfs/index"
)

// chooseWeightMap picks the weight map to use among the *.index.json
// files of a directory.
func chooseWeightMap(dir string, maps []string) (string, error) {
	if len(maps) == 1 {
		return maps[0], nil
	}
	if slices.Contains(maps, "model.safetensors.index.json") {
		return "model.safetensors.index.json", nil
	}
	var st []string
	for _, m := range maps {
		if strings.HasSuffix(m, ".safetensors.index.json") {
			st = append(st, m)
		}
	}
	if len(st) == 1 {
		return st[0], nil
	}
	if slices.Contains(maps, "pytorch_model.bin.index.json") {
		return "pytorch_model.bin.index.json", nil
	}
	shown := make([]string, len(maps))
	for i, m := range maps {
		shown[i] = display(m)
	}
	return "", index.ErrorAt(dir, "", "holds several weight maps (%s) and none is model.safetensors.index.json: give one of them as SOURCE", strings.Join(shown, ", "))
}

// weightMap is a parsed *.index.json.
type weightMap struct {
	metadata map[string]any
	tensors  map[string]string // tensor name -> shard (relative path)
	shards   []string          // distinct shards, sorted
}

// parseWeightMap parses a *.index.json weight map: an object with
// "weight_map" (required: tensor name -> shard path) and "metadata"
// (optional object); other keys are ignored. Duplicate keys are refused.
// Shard paths must be relative, '/'-separated paths inside the directory:
// no empty, "." or ".." component, no backslash or NUL.
func parseWeightMap(file string, data []byte) (*weightMap, error) {
	if !utf8.Valid(data) {
		return nil, index.Errorf(file, int64(index.InvalidUTF8At(data)), "weight map: not valid UTF-8")
	}
	r := index.NewJSONReader(file, "weight map", data, 0)
	if err := r.Open('{', "top level"); err != nil {
		return nil, err
	}
	wm := &weightMap{tensors: map[string]string{}}
	seen := map[string]struct{}{}
	found := false
	for r.More() {
		key, at, err := r.Key(seen, "top level")
		if err != nil {
			return nil, err
		}
		switch key {
		case "metadata":
			v, err := r.Value("metadata")
			if err != nil {
				return nil, err
			}
			switch m := v.(type) {
			case map[string]any:
				wm.metadata = m
			case nil:
			default:
				return nil, r.Errorf(at, "metadata: want an object, found %s", index.DescribeValue(v))
			}
		case "weight_map":
			found = true
			if err := r.Open('{', "weight_map"); err != nil {
				return nil, err
			}
			names := map[string]struct{}{}
			shards := map[string]struct{}{}
			for r.More() {
				name, nat, err := r.Key(names, "weight_map")
				if err != nil {
					return nil, err
				}
				if len(wm.tensors) >= index.MaxTensors {
					return nil, r.Errorf(nat, "weight_map: more than %d tensors", index.MaxTensors)
				}
				if len(name) > index.MaxNameLength {
					return nil, r.Errorf(nat, "weight_map: tensor name of %d bytes is over the limit of %d", len(name), index.MaxNameLength)
				}
				r.SetEntry("weight_map", name)
				shard, err := r.Str("")
				r.SetEntry("", "")
				if err != nil {
					return nil, err
				}
				if !localShardPath(shard) {
					return nil, r.Errorf(nat, "weight_map: tensor %s: shard %s is not a relative path inside the directory", strconv.Quote(name), strconv.Quote(shard))
				}
				if _, ok := shards[shard]; !ok {
					if len(shards) >= index.MaxShards {
						return nil, r.Errorf(nat, "weight_map: more than %d shards", index.MaxShards)
					}
					shards[shard] = struct{}{}
					wm.shards = append(wm.shards, shard)
				}
				wm.tensors[name] = shard
			}
			if err := r.Close(); err != nil {
				return nil, err
			}
		default:
			if err := r.Skip(strconv.Quote(key)); err != nil {
				return nil, err
			}
		}
	}
	if err := r.Close(); err != nil {
		return nil, err
	}
	if err := r.End("weight map"); err != nil {
		return nil, err
	}
	if !found {
		return nil, index.Errorf(file, 0, "weight map: no \"weight_map\" object")
	}
	if len(wm.tensors) == 0 {
		return nil, index.Errorf(file, 0, "weight map: \"weight_map\" lists no tensors")
	}
	slices.Sort(wm.shards)
	return wm, nil
}

// display returns s for a message: as it is when it is plain printable
// text, quoted otherwise (so that a message stays one line).
func display(s string) string {
	for _, c := range s {
		if c == '"' || c == ' ' || c == utf8.RuneError || !unicode.IsPrint(c) {
			return strconv.Quote(s)
		}
	}
	return s
}

// localShardPath reports whether a weight map's shard path stays inside
// the directory (lexically: symbolic links inside it are followed, as a
// Hugging Face cache's snapshot links into its blobs).
func localShardPath(s string) bool {
	if s == "" || strings.ContainsAny(s, "\\\x00") || strings.HasPrefix(s, "/") {
		return false
	}
	for _, c := range strings.Split(s, "/") {
		if c == "" || c == "." || c == ".." {
			return false
		}
	}
	return filepath.IsLocal(filepath.FromSlash(s))
}

// weightMap loads the checkpoint that the weight map at mapPath describes.
func (l *loader) weightMap(dir, mapPath string) (*index.Index, error) {
	mf, err := l.openFile(mapPath)
	if err != nil {
		return nil, err
	}
	size := mf.Size()
	if size > index.MaxIndexJSON {
		return nil, index.Errorf(mapPath, 0, "weight map: %d bytes is over the limit of %d", size, index.MaxIndexJSON)
	}
	data := make([]byte, size)
	if n, err := mf.ReadAt(data, 0); n < len(data) {
		return nil, index.Errorf(mapPath, int64(n), "weight map: cannot read: %v", err)
	}
	l.release(mf)
	wm, err := parseWeightMap(mapPath, data)
	if err != nil {
		return nil, err
	}
	parts := make([]part, 0, len(wm.shards))
	inShard := make(map[string]bool, len(wm.tensors))
	skipped := map[string]bool{} // shards left out (Options.Report)
	for _, shard := range wm.shards {
		sp := filepath.Join(dir, filepath.FromSlash(shard))
		f, err := l.openFile(sp)
		if err != nil {
			err = index.ErrorAt(mapPath, "shard "+strconv.Quote(shard), "cannot open the shard: %v", err)
			if l.tolerate(err) != nil {
				return nil, err
			}
			skipped[shard] = true
			continue
		}
		idx, err := ParseFile(f)
		if err == nil && len(parts) > 0 && idx.Format != parts[0].idx.Format {
			err = index.ErrorAt(mapPath, "", "mixes checkpoint formats: shard %s is %s, shard %s is %s", display(filepath.Base(parts[0].path)), parts[0].idx.Format, display(shard), idx.Format)
		}
		if err != nil {
			if l.tolerate(err) != nil {
				return nil, err
			}
			l.release(f)
			skipped[shard] = true
			continue
		}
		for i := range idx.Tensors {
			name := idx.Tensors[i].Name
			where := "tensor " + strconv.Quote(name)
			want, listed := wm.tensors[name]
			switch {
			case !listed:
				err = index.ErrorAt(sp, where, "the shard holds a tensor that the weight map %s does not list", display(filepath.Base(mapPath)))
			case want != shard:
				err = index.ErrorAt(sp, where, "the weight map %s puts this tensor in shard %s", display(filepath.Base(mapPath)), display(want))
			}
			if err != nil && l.tolerate(err) != nil {
				return nil, err
			}
			err = nil
			inShard[name] = true
		}
		// an entry the shard holds but does not serve (a safetensors F6
		// tensor, a torch float4 one) is held there: listed as unserved,
		// not as missing from its shard
		for _, u := range idx.Unserved {
			if wm.tensors[u.Name] == shard {
				inShard[u.Name] = true
			}
		}
		parts = append(parts, part{path: sp, f: f, idx: idx})
	}
	if len(inShard) != len(wm.tensors) {
		var missing []string
		for name, shard := range wm.tensors {
			if !inShard[name] && !skipped[shard] {
				missing = append(missing, name)
			}
		}
		slices.Sort(missing)
		if l.report != nil {
			for _, name := range missing {
				l.report(index.ErrorAt(mapPath, "tensor "+strconv.Quote(name), "the weight map puts this tensor in shard %s, which does not hold it", display(wm.tensors[name])))
			}
		} else if len(missing) > 0 {
			more := ""
			if len(missing) > 1 {
				more = fmt.Sprintf(" (and %d more tensors)", len(missing)-1)
			}
			return nil, index.ErrorAt(mapPath, "tensor "+strconv.Quote(missing[0]), "the weight map puts this tensor in shard %s, which does not hold it%s", display(wm.tensors[missing[0]]), more)
		}
	}
	if len(parts) == 0 {
		return nil, index.ErrorAt(mapPath, "", "none of the %d shards the weight map names can be read", len(wm.shards))
	}
	return l.merge(parts, wm.metadata)
}
