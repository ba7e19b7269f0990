package index

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/lazyweights/tensorfs/backing"
)

// Opener opens one backing file by path. backing.Open provides it.
type Opener func(path string) (File, error)

// Load opens SOURCE (a checkpoint file, or a directory holding a sharded
// checkpoint) through open, detects the format(s) by content, parses and
// validates everything, merges shards into one Index whose Sources are the
// shard paths, sorts Tensors by Name and assigns Paths (AssignPaths). The
// returned files are the opened sources, files[i] for Sources[i]; on error
// every file opened is closed.
//
// What SOURCE may be:
//
//   - A checkpoint file of any format. When it is one part of a split GGUF
//     model (metadata split.count > 1), the other parts are found beside it
//     by llama.cpp's naming, PREFIX-NNNNN-of-CCCCC.gguf, and merged.
//   - A weight map, *.index.json, as Hugging Face writes it ({"metadata":
//     {...}, "weight_map": {TENSOR: SHARD}}): the same as its directory
//     with that weight map.
//   - A directory with a weight map: the shards it names (relative paths
//     inside the directory, any format, all of one format) are parsed;
//     every tensor of the map must be in the shard it names, and every
//     tensor of a shard must be in the map. With several *.index.json
//     files, model.safetensors.index.json is used, else the only
//     *.safetensors.index.json, else pytorch_model.bin.index.json; other
//     combinations are refused. Files the map does not name are ignored.
//   - A directory without a weight map: every regular file in it (symbolic
//     links followed, subdirectories ignored) that is a checkpoint by
//     content; files that are not (README.md, config.json) are ignored.
//     They must be of one format. GGUF files must be the parts of one split
//     model, merged in split.no order; other sets of files are merged in
//     file name order.
//
// Merging: Sources are the shards' in order and each tensor's Source is
// renumbered; Format is the shards' format; Metadata is the weight map's
// "metadata" object, then each shard's metadata keys that are not there
// yet, shards in order (so for split GGUF the first part's values win);
// a tensor name found twice is refused. At most MaxShards shards and
// MaxTensors tensors. The Sources of the result are absolute paths.
func Load(path string, open Opener) (*Index, []File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	l := &loader{open: open}
	var idx *Index
	switch {
	case st.IsDir():
		idx, err = l.dir(path)
	case st.Mode().IsRegular():
		idx, err = l.file(path)
	default:
		err = ErrorAt(path, "", "not a regular file or a directory (%s); tensorfs reads only regular files", backing.DescribeType(st.Mode()))
	}
	if err == nil {
		err = finish(idx, l.files)
	}
	if err != nil {
		l.closeAll()
		return nil, nil, err
	}
	// Sources name the backing files for other processes too (the
	// user.tensorfs.source xattr, index.json): absolute, whatever the
	// working directory they are read from. Messages above keep the path
	// as the user gave it.
	for i, s := range idx.Sources {
		if abs, err := filepath.Abs(s); err == nil {
			idx.Sources[i] = abs
		}
	}
	return idx, l.files, nil
}

// loader holds the files opened so far, so that all are closed on error.
type loader struct {
	open  Opener
	tree  Tree   // where dir lists files; nil: the local filesystem
	files []File // checkpoint files, files[i] for the merged Sources[i] once merged
	spare []File // opened, not (yet) part of the result
}

// part is one parsed checkpoint file.
type part struct {
	path string
	f    File
	idx  *Index
}

func closeFile(f File) {
	if c, ok := f.(io.Closer); ok {
		c.Close()
	}
}

func (l *loader) closeAll() {
	for _, f := range l.files {
		closeFile(f)
	}
	for _, f := range l.spare {
		closeFile(f)
	}
	l.files, l.spare = nil, nil
}

// openFile opens path and keeps it for closeAll.
func (l *loader) openFile(path string) (File, error) {
	f, err := l.open(path)
	if err != nil {
		return nil, err
	}
	l.spare = append(l.spare, f)
	return f, nil
}

// release closes f now and forgets it.
func (l *loader) release(f File) {
	if i := slices.Index(l.spare, f); i >= 0 {
		l.spare = slices.Delete(l.spare, i, i+1)
	}
	closeFile(f)
}

// sniff returns the format of f, or nil when f is not a checkpoint.
func sniff(f File) (*Format, error) {
	head := make([]byte, SniffLen)
	n, err := f.ReadAt(head, 0)
	if n < len(head) && err != nil && err != io.EOF {
		return nil, Errorf(f.Name(), 0, "cannot read: %v", err)
	}
	fm, ok := Detect(head[:n])
	if !ok {
		return nil, nil
	}
	return fm, nil
}

// isLFSPointerFile reports whether f is a Git LFS pointer (IsLFSPointer).
func isLFSPointerFile(f File) bool {
	head := make([]byte, len(lfsPrefix))
	n, _ := f.ReadAt(head, 0)
	return IsLFSPointer(head[:n])
}

// file loads a SOURCE that is a file.
func (l *loader) file(path string) (*Index, error) {
	f, err := l.openFile(path)
	if err != nil {
		return nil, err
	}
	if strings.HasSuffix(path, ".index.json") {
		fm, err := sniff(f)
		if err != nil {
			return nil, err
		}
		if fm == nil {
			l.release(f)
			return l.weightMap(filepath.Dir(path), path)
		}
	}
	idx, err := ParseFile(f)
	if err != nil {
		return nil, err
	}
	p := part{path: path, f: f, idx: idx}
	if no, count, ok := GGUFSplitInfo(idx); ok && count > 1 {
		return l.ggufSiblings(p, no, count)
	}
	return l.merge([]part{p}, nil)
}

// splitName is llama.cpp's split file naming: PREFIX-%05d-of-%05d.gguf.
var splitName = regexp.MustCompile(`^(.*)-([0-9]{5,})-of-([0-9]{5,})\.gguf$`)

// ggufSiblings finds, opens and parses the other parts of the split GGUF
// model that p is part no (0-based) of.
func (l *loader) ggufSiblings(p part, no, count int) (*Index, error) {
	base := filepath.Base(p.path)
	m := splitName.FindStringSubmatch(base)
	want := func(prefix string, i int) string { return fmt.Sprintf("%s-%05d-of-%05d.gguf", prefix, i+1, count) }
	if m == nil || base != want(m[1], no) {
		return nil, ErrorAt(p.path, "", "part %d of %d of a split GGUF model, but its name is not PREFIX-%05d-of-%05d.gguf, so the other parts cannot be found", no+1, count, no+1, count)
	}
	dir := filepath.Dir(p.path)
	parts := make([]part, 0, count)
	for i := 0; i < count; i++ {
		if i == no {
			parts = append(parts, p)
			continue
		}
		sp := filepath.Join(dir, want(m[1], i))
		f, err := l.openFile(sp)
		if err != nil {
			return nil, ErrorAt(p.path, "", "part %d of %d of a split GGUF model; cannot open part %d: %v", no+1, count, i+1, err)
		}
		idx, err := ParseFile(f)
		if err != nil {
			return nil, err
		}
		parts = append(parts, part{path: sp, f: f, idx: idx})
	}
	parts, err := orderGGUFSplit(parts)
	if err != nil {
		return nil, err
	}
	return l.merge(parts, nil)
}

// orderGGUFSplit checks that parts are exactly the parts of one split GGUF
// model and returns them in split.no order.
func orderGGUFSplit(parts []part) ([]part, error) {
	byNo := make([]*part, len(parts))
	for i := range parts {
		p := &parts[i]
		no, count, ok := GGUFSplitInfo(p.idx)
		if !ok {
			return nil, ErrorAt(p.path, "", "not a part of a split GGUF model, but other GGUF files are beside it (%s): mount one file", display(filepath.Base(parts[(i+1)%len(parts)].path)))
		}
		if count != len(parts) || no >= count {
			return nil, ErrorAt(p.path, "split.count", "part %d of %d of a split GGUF model, but %d GGUF files are together", no+1, count, len(parts))
		}
		if byNo[no] != nil {
			return nil, ErrorAt(p.path, "split.no", "part %d of %d of a split GGUF model, and so is %s", no+1, count, display(filepath.Base(byNo[no].path)))
		}
		byNo[no] = p
	}
	out := make([]part, len(parts))
	total := 0
	for i, p := range byNo {
		out[i] = *p
		total += len(p.idx.Tensors)
	}
	if n, ok := ggufInt(out[0].idx.Metadata["split.tensors.count"]); ok && n != int64(total) {
		return nil, ErrorAt(out[0].path, "split.tensors.count", "the split GGUF model should have %d tensors, its %d parts have %d", n, len(out), total)
	}
	return out, nil
}

// dir loads a SOURCE that is a directory.
func (l *loader) dir(dir string) (*Index, error) {
	tree := l.tree
	if tree == nil {
		tree = osTree{}
	}
	files, err := tree.Files(dir)
	if err != nil {
		return nil, err
	}
	var maps []string
	for _, p := range files {
		if name := filepath.Base(p); strings.HasSuffix(name, ".index.json") {
			maps = append(maps, name)
		}
	}
	if len(maps) > 0 {
		m, err := chooseWeightMap(dir, maps)
		if err != nil {
			return nil, err
		}
		return l.weightMap(dir, filepath.Join(dir, m))
	}
	var parts []part
	lfs := ""     // the first Git LFS pointer among the files
	refused := "" // what the first file of Refused's formats is, until a checkpoint is found
	for _, p := range files {
		f, err := l.openFile(p)
		if err != nil {
			return nil, err
		}
		fm, err := sniff(f)
		if err != nil {
			return nil, err
		}
		if fm == nil {
			if lfs == "" && isLFSPointerFile(f) {
				lfs = p
			}
			if refused == "" && len(parts) == 0 {
				if msg, ok := describeRefusedFile(f, nil); ok { // refused.go
					refused = display(filepath.Base(p)) + " is " + msg
				}
			}
			l.release(f)
			continue
		}
		if len(parts) >= MaxShards {
			return nil, ErrorAt(dir, "", "more than %d checkpoint files", MaxShards)
		}
		idx, err := fm.Parse(f)
		if err != nil {
			return nil, err
		}
		if len(parts) > 0 && idx.Format != parts[0].idx.Format {
			return nil, ErrorAt(dir, "", "mixes checkpoint formats: %s is %s, %s is %s", display(filepath.Base(parts[0].path)), parts[0].idx.Format, display(filepath.Base(p)), idx.Format)
		}
		parts = append(parts, part{path: p, f: f, idx: idx})
	}
	if len(parts) == 0 && lfs != "" {
		return nil, ErrorAt(dir, "", "no checkpoint in the directory: %s is a Git LFS pointer, not the file itself (not downloaded); run `git lfs pull` in the repository (or download the files directly)", display(filepath.Base(lfs)))
	}
	if len(parts) == 0 && refused != "" {
		return nil, ErrorAt(dir, "", "no checkpoint in the directory: %s", refused)
	}
	if len(parts) == 0 {
		return nil, ErrorAt(dir, "", "no checkpoint in the directory (%d files looked at; want a *.index.json weight map or safetensors, PyTorch, GGUF, .npy or .npz files)", len(files))
	}
	if parts[0].idx.Format == "gguf" {
		if len(parts) == 1 {
			if no, count, ok := GGUFSplitInfo(parts[0].idx); ok && count > 1 {
				return nil, ErrorAt(parts[0].path, "", "part %d of %d of a split GGUF model, and the other parts are not in the directory", no+1, count)
			}
		} else if parts, err = orderGGUFSplit(parts); err != nil {
			return nil, err
		}
	}
	return l.merge(parts, nil)
}

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
	return "", ErrorAt(dir, "", "holds several weight maps (%s) and none is model.safetensors.index.json: give one of them as SOURCE", strings.Join(shown, ", "))
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
		return nil, Errorf(file, int64(invalidUTF8At(data)), "weight map: not valid UTF-8")
	}
	r := newJSONReader(file, "weight map", data, 0)
	if err := r.open('{', "top level"); err != nil {
		return nil, err
	}
	wm := &weightMap{tensors: map[string]string{}}
	seen := map[string]struct{}{}
	found := false
	for r.more() {
		key, at, err := r.key(seen, "top level")
		if err != nil {
			return nil, err
		}
		switch key {
		case "metadata":
			v, err := r.value("metadata")
			if err != nil {
				return nil, err
			}
			switch m := v.(type) {
			case map[string]any:
				wm.metadata = m
			case nil:
			default:
				return nil, r.errorf(at, "metadata: want an object, found %s", describeValue(v))
			}
		case "weight_map":
			found = true
			if err := r.open('{', "weight_map"); err != nil {
				return nil, err
			}
			names := map[string]struct{}{}
			shards := map[string]struct{}{}
			for r.more() {
				name, nat, err := r.key(names, "weight_map")
				if err != nil {
					return nil, err
				}
				if len(wm.tensors) >= MaxTensors {
					return nil, r.errorf(nat, "weight_map: more than %d tensors", MaxTensors)
				}
				if len(name) > MaxNameLength {
					return nil, r.errorf(nat, "weight_map: tensor name of %d bytes is over the limit of %d", len(name), MaxNameLength)
				}
				r.setEntry("weight_map", name)
				shard, err := r.str("")
				r.setEntry("", "")
				if err != nil {
					return nil, err
				}
				if !localShardPath(shard) {
					return nil, r.errorf(nat, "weight_map: tensor %s: shard %s is not a relative path inside the directory", strconv.Quote(name), strconv.Quote(shard))
				}
				if _, ok := shards[shard]; !ok {
					if len(shards) >= MaxShards {
						return nil, r.errorf(nat, "weight_map: more than %d shards", MaxShards)
					}
					shards[shard] = struct{}{}
					wm.shards = append(wm.shards, shard)
				}
				wm.tensors[name] = shard
			}
			if err := r.close(); err != nil {
				return nil, err
			}
		default:
			if err := r.skip(strconv.Quote(key)); err != nil {
				return nil, err
			}
		}
	}
	if err := r.close(); err != nil {
		return nil, err
	}
	if err := r.end("weight map"); err != nil {
		return nil, err
	}
	if !found {
		return nil, Errorf(file, 0, "weight map: no \"weight_map\" object")
	}
	if len(wm.tensors) == 0 {
		return nil, Errorf(file, 0, "weight map: \"weight_map\" lists no tensors")
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
func (l *loader) weightMap(dir, mapPath string) (*Index, error) {
	mf, err := l.openFile(mapPath)
	if err != nil {
		return nil, err
	}
	size := mf.Size()
	if size > MaxIndexJSON {
		return nil, Errorf(mapPath, 0, "weight map: %d bytes is over the limit of %d", size, MaxIndexJSON)
	}
	data := make([]byte, size)
	if n, err := mf.ReadAt(data, 0); n < len(data) {
		return nil, Errorf(mapPath, int64(n), "weight map: cannot read: %v", err)
	}
	l.release(mf)
	wm, err := parseWeightMap(mapPath, data)
	if err != nil {
		return nil, err
	}
	parts := make([]part, 0, len(wm.shards))
	inShard := make(map[string]bool, len(wm.tensors))
	for _, shard := range wm.shards {
		sp := filepath.Join(dir, filepath.FromSlash(shard))
		f, err := l.openFile(sp)
		if err != nil {
			return nil, ErrorAt(mapPath, "shard "+strconv.Quote(shard), "cannot open the shard: %v", err)
		}
		idx, err := ParseFile(f)
		if err != nil {
			return nil, err
		}
		if len(parts) > 0 && idx.Format != parts[0].idx.Format {
			return nil, ErrorAt(mapPath, "", "mixes checkpoint formats: shard %s is %s, shard %s is %s", display(filepath.Base(parts[0].path)), parts[0].idx.Format, display(shard), idx.Format)
		}
		for i := range idx.Tensors {
			name := idx.Tensors[i].Name
			where := "tensor " + strconv.Quote(name)
			want, listed := wm.tensors[name]
			switch {
			case !listed:
				return nil, ErrorAt(sp, where, "the shard holds a tensor that the weight map %s does not list", display(filepath.Base(mapPath)))
			case want != shard:
				return nil, ErrorAt(sp, where, "the weight map %s puts this tensor in shard %s", display(filepath.Base(mapPath)), display(want))
			}
			inShard[name] = true
		}
		parts = append(parts, part{path: sp, f: f, idx: idx})
	}
	if len(inShard) != len(wm.tensors) {
		var missing []string
		for name := range wm.tensors {
			if !inShard[name] {
				missing = append(missing, name)
			}
		}
		slices.Sort(missing)
		more := ""
		if len(missing) > 1 {
			more = fmt.Sprintf(" (and %d more tensors)", len(missing)-1)
		}
		return nil, ErrorAt(mapPath, "tensor "+strconv.Quote(missing[0]), "the weight map puts this tensor in shard %s, which does not hold it%s", display(wm.tensors[missing[0]]), more)
	}
	return l.merge(parts, wm.metadata)
}

// merge joins parsed parts, in order, into one Index (see Load) and makes
// their files the loader's result files.
func (l *loader) merge(parts []part, meta map[string]any) (*Index, error) {
	out := &Index{Format: parts[0].idx.Format}
	if len(parts) == 1 && meta == nil {
		out.Metadata = parts[0].idx.Metadata
	} else {
		out.Metadata = make(map[string]any, len(meta))
		for k, v := range meta {
			out.Metadata[k] = v
		}
	}
	total := 0
	for _, p := range parts {
		total += len(p.idx.Tensors)
	}
	if total > MaxTensors {
		return nil, ErrorAt(parts[0].path, "", "%d tensors in %d files is over the limit of %d", total, len(parts), MaxTensors)
	}
	out.Tensors = make([]Tensor, 0, total)
	files := make([]File, 0, len(parts))
	var members []File // opened here: closed on error
	fail := func(err error) (*Index, error) {
		for _, m := range members {
			closeFile(m)
		}
		return nil, err
	}
	for _, p := range parts {
		if len(p.idx.Sources) != 1+len(p.idx.Members) {
			return fail(ErrorAt(p.path, "", "internal error: the %s parser returned %d sources for one file", p.idx.Format, len(p.idx.Sources)))
		}
		base := len(out.Sources)
		out.Sources = append(out.Sources, p.idx.Sources...)
		files = append(files, p.f)
		for i, m := range p.idx.Members {
			if m.Source != 1+i || m.File < 0 || m.File >= m.Source {
				return fail(ErrorAt(p.path, "", "internal error: the %s parser returned member %d as source %d of source %d", p.idx.Format, i, m.Source, m.File))
			}
			src, err := openMember(files[base+m.File], m)
			if err != nil {
				return fail(err)
			}
			members = append(members, src)
			files = append(files, src)
			m.Source += base
			m.File += base
			out.Members = append(out.Members, m)
		}
		for _, t := range p.idx.Tensors {
			t.Source += base
			out.Tensors = append(out.Tensors, t)
		}
		for _, u := range p.idx.Unserved {
			u.Source += base
			out.Unserved = append(out.Unserved, u)
		}
		if len(parts) > 1 || meta != nil {
			for k, v := range p.idx.Metadata {
				if _, ok := out.Metadata[k]; !ok {
					out.Metadata[k] = withSource(v, base)
				}
			}
		}
		if i := slices.Index(l.spare, p.f); i >= 0 {
			l.spare = slices.Delete(l.spare, i, i+1)
		}
	}
	if len(parts) > 1 {
		slices.SortStableFunc(out.Unserved, func(a, b Unserved) int { return strings.Compare(a.Name, b.Name) })
	}
	l.files = append(l.files, files...)
	return out, nil
}

// openMember opens the source of member m of f (a file or a member): it
// decodes the member on first read (backing.InflateCache), within the
// limits of the process's cache.
func openMember(f File, m Member) (File, error) {
	bm := backing.Member{Name: m.Name, Offset: m.Offset, CompressedSize: m.CompressedSize, Size: m.Size, CRC32: m.CRC32}
	where := "member " + m.Name
	switch m.Method {
	case MethodDeflate:
	case MethodLatin1:
		bm.Latin1 = true
		where = "tensor " + strconv.Quote(m.Name)
	default:
		return nil, ErrorAt(f.Name(), where, "internal error: member method %d", m.Method)
	}
	src, err := backing.DefaultInflateCache().OpenMember(f, bm)
	if err != nil {
		var me *backing.MemberError
		if errors.As(err, &me) {
			return nil, ErrorAt(f.Name(), where, "%s", me.Msg)
		}
		return nil, err
	}
	return src, nil
}

// finish sorts the tensors by name, refuses duplicates, checks what every
// parser promises (so that a parser bug is an error here, not a crash when
// serving) and assigns paths.
func finish(idx *Index, files []File) error {
	slices.SortStableFunc(idx.Tensors, func(a, b Tensor) int { return cmp.Compare(a.Name, b.Name) })
	for i := range idx.Tensors {
		t := &idx.Tensors[i]
		if t.Source < 0 || t.Source >= len(idx.Sources) || t.Source >= len(files) {
			return ErrorAt("", "tensor "+strconv.Quote(t.Name), "internal error: source %d of %d", t.Source, len(idx.Sources))
		}
		src := idx.Sources[t.Source]
		if i > 0 && idx.Tensors[i-1].Name == t.Name {
			where := "tensor " + strconv.Quote(t.Name)
			other := idx.Sources[idx.Tensors[i-1].Source]
			if other == src {
				return ErrorAt(src, where, "two tensors have this name")
			}
			return ErrorAt(src, where, "this tensor is also in %s", other)
		}
		if err := checkTensor(t, src, files[t.Source].Size()); err != nil {
			return err
		}
	}
	return AssignPaths(idx)
}

// checkTensor checks a parsed tensor's invariants (see Tensor).
func checkTensor(t *Tensor, src string, fileSize int64) error {
	bad := func(format string, args ...any) error {
		return ErrorAt(src, "tensor "+strconv.Quote(t.Name), "internal error: "+format, args...)
	}
	if !t.DType.Valid() {
		return bad("invalid dtype")
	}
	if len(t.Shape) > MaxDims {
		return bad("%d dimensions", len(t.Shape))
	}
	n, ok := Elements(t.Shape)
	if !ok {
		return bad("shape %s overflows", shapeString(t.Shape))
	}
	size, ok := t.DType.ByteSize(n)
	if !ok || size != t.Size {
		return bad("size %d for %s %s", t.Size, t.DType, shapeString(t.Shape))
	}
	if t.Strides != nil && len(t.Strides) != len(t.Shape) {
		return bad("%d strides for %d dimensions", len(t.Strides), len(t.Shape))
	}
	if t.Offset < 0 || (t.Strides == nil && t.Size > fileSize-t.Offset) {
		return bad("bytes [%d, +%d) outside the file (%d bytes)", t.Offset, t.Size, fileSize)
	}
	return nil
}
