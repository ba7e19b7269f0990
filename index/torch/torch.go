package torch

// PyTorch checkpoints: torch.save files (zip, torch >= 1.6, any archive
// root name, with or without the byteorder record) and legacy pre-1.6
// files (a magic pickle, a protocol pickle, a sys_info pickle, the main
// pickle, a pickled list of storage keys, then each storage as an 8-byte
// little-endian element count and its raw little-endian bytes); TorchScript
// archives (torch.jit.save) are served through their data.pkl.
//
// The pickles are read by the restricted unpickler of index/pickle
// (pickle.go here locates its errors in the file): nothing is imported or
// executed, and a file naming a dangerous global (os.system ...) is
// refused. torch_pickle.go is the Env that interprets what torch names;
// the tree walk (torch_tree.go) names tensors by their keys joined with
// "/", never drops one, and charges every path to the pickle's budgets.
//
// Decisions:
//   - Storages of a zip file that are stored members (torch.save) are
//     served straight from the file. A deflated storage member (written
//     by non-Python writers such as TorchSharp) is a source of its own
//     (Index.Members, index.Deflated), inflated by the backing layer on
//     first read with its size and CRC-32 checked, as a compressed .npz
//     member is; its declared size is checked here against what deflate
//     can produce (numpy.DeflateMaxRatio) and its compressed range
//     against the file. Other methods and encrypted members refuse the
//     file, naming the tensor.
//   - A "big" byteorder record sets Tensor.BigEndian (the view layer swaps);
//     legacy files are little-endian whatever the saving machine was
//     (torch converts when it writes them).
//   - A tensor whose strides are the row-major ones of its shape is served
//     as one range (Strides nil); any other view keeps its strides (the
//     view layer gathers), after checking that every element it can reach
//     lies inside its storage. Negative strides are refused.
//   - A tensor of a dtype tensorfs has no type for (the bits* dtypes) is
//     listed in Index.Unserved and the rest served; every dtype it has a
//     type for (the float8 kinds, uint16/32/64, complex) is served as
//     stored. A float4_e2m1fn_x2 tensor (one byte of two E2M1 elements,
//     the even one in the low nibble; its storage counts bytes) is served
//     as F4 with its last dimension doubled, a 0-d one as F4 [2], the
//     bytes as stored (what safetensors' torch writer stores); a
//     non-contiguous view of one is listed in Index.Unserved (F4 is
//     served as one range only). torch 2.14 writes such tensors in the
//     legacy format too (and cannot load that file back); both are read.
//   - Quantized, sparse, meta and other special tensors refuse the file,
//     naming the tensor. TorchScript constants (constants.pkl) and code are
//     not served; a TorchScript archive or a checkpoint without tensors
//     gives an empty tensor list (its other values are in Metadata).
//   - The old tar-based format (torch < 0.1.10) is not recognised.

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"math"
	"math/big"
	"strings"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/numpy"
	"github.com/lazyweights/tensorfs/index/pickle"
)

func Sniff(head []byte) bool {
	if name, complete, ok := index.ZipFirstName(head); ok {
		// A name cut off by the 64-byte head is taken as torch's when it
		// already has a folder (npz members rarely do); Parse hands a
		// zip of .npy members to numpy.ParseNPZ anyway.
		return index.TorchMember(name) || (!complete && strings.Contains(name, "/"))
	}
	return ptSniffLegacy(head)
}

// The legacy magic number, pickled first in every legacy file.
var ptLegacyMagic, _ = new(big.Int).SetString("1950a86a20f9469cfc6c", 16)

// ptSniffLegacy recognises the magic-number pickle at the start of a
// legacy file: [PROTO n] [FRAME len] then LONG1 of the magic (protocol
// >= 2) or the text LONG "119547037146038801333356L" (protocols 0, 1).
func ptSniffLegacy(head []byte) bool {
	i := 0
	if len(head) >= 2 && head[0] == pickle.OpPROTO {
		i = 2
	}
	if len(head) >= i+9 && head[i] == pickle.OpFRAME {
		i += 9
	}
	if len(head) >= i+12 && head[i] == pickle.OpLONG1 && head[i+1] == 10 {
		b, ok := pickle.DecodeLong(head[i+2 : i+12]).(*big.Int)
		return ok && b.Cmp(ptLegacyMagic) == 0
	}
	if len(head) > i && head[i] == pickle.OpLONG {
		s := string(head[i+1:])
		want := ptLegacyMagic.String()
		return strings.HasPrefix(s, want+"L\n") || strings.HasPrefix(s, want+"\n")
	}
	return false
}

func Parse(f index.File) (*index.Index, error) {
	head := make([]byte, 4)
	if n, _ := f.ReadAt(head, 0); n == 4 && string(head) == index.ZipMagic {
		return ParseZip(f)
	}
	return parseTorchLegacy(f)
}

// ptReadSmall reads a small member (byteorder, version), at most max
// bytes.
func ptReadSmall(zf *zip.File, max int64) ([]byte, error) {
	if zf.UncompressedSize64 > uint64(max) {
		return nil, fmt.Errorf("%d bytes (at most %d expected)", zf.UncompressedSize64, max)
	}
	rc, err := zf.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, max))
}

// ZipPickle returns the data.pkl of a torch.save zip archive: the first
// member <root>/data.pkl, for a root folder of any name, or data.pkl at
// the top; nil when zr has none (it is no torch.save archive).
func ZipPickle(zr *zip.Reader) *zip.File {
	for _, zf := range zr.File {
		if zf.Name == "data.pkl" || (strings.HasSuffix(zf.Name, "/data.pkl") && strings.Count(zf.Name, "/") == 1) {
			return zf
		}
	}
	return nil
}

func ParseZip(f index.File) (*index.Index, error) {
	zr, spans, err := index.OpenZip(f)
	if err != nil {
		return nil, err
	}
	return ParseZipOpened(f, zr, spans)
}

// ParseZipOpened is ParseZip of the archive zr of f, opened and checked
// by index.OpenZip (its spans zspans).
func ParseZipOpened(f index.File, zr *zip.Reader, zspans []index.ZipSpan) (*index.Index, error) {
	file := f.Name()
	// The pickle is <root>/data.pkl for a root folder of any name (or
	// data.pkl at the top).
	pkl := ZipPickle(zr)
	npy := 0
	for _, zf := range zr.File {
		if strings.HasSuffix(zf.Name, ".npy") {
			npy++
		}
	}
	if pkl == nil {
		if npy > 0 {
			return numpy.ParseNPZOpened(f, zr, zspans)
		}
		return nil, index.ErrorAt(file, "", "zip archive has no data.pkl: not a torch.save checkpoint")
	}
	root := strings.TrimSuffix(pkl.Name, "data.pkl")
	members, bigEndian, err := ptZipStorages(file, zr, root)
	if err != nil {
		return nil, err
	}
	st := ptStream{file: file, base: -1, where: "member " + pkl.Name}
	r, pklMember, err := ptZipPickle(f, pkl, &st)
	if err != nil {
		return nil, err
	}
	m := st.machine(r, newTorchEnv())
	root0, err := m.Run()
	if err != nil {
		return nil, st.err(err)
	}
	z := &ptZipSpans{f: f, root: root, members: members, spans: map[*torchStorage]ptZipSpan{}}
	w := newPtWalker(st, z.span)
	z.w = w
	w.m = m
	w.pkl = pklMember
	w.bigEndian = bigEndian
	return ptFinish(w, root0, "pytorch")
}

// ptZipStorages lists the storage members of the archive (<root>data/KEY
// by key) and reads its byteorder record.
func ptZipStorages(file string, zr *zip.Reader, root string) (map[string]*zip.File, bool, error) {
	members := map[string]*zip.File{}
	bigEndian := false
	for _, zf := range zr.File {
		if key, ok := strings.CutPrefix(zf.Name, root+"data/"); ok && key != "" {
			if _, dup := members[key]; dup {
				return nil, false, index.ErrorAt(file, "member "+zf.Name, "storage member appears twice in the archive")
			}
			members[key] = zf
		}
		if zf.Name == root+"byteorder" {
			b, err := ptReadSmall(zf, 16)
			if err != nil {
				return nil, false, index.ErrorAt(file, "member "+zf.Name, "cannot read the byteorder record: %v", err)
			}
			switch string(b) {
			case "little":
			case "big":
				bigEndian = true
			default:
				return nil, false, index.ErrorAt(file, "member "+zf.Name, "byteorder record says %q (want little or big)", pickle.Clip(string(b)))
			}
		}
	}
	return members, bigEndian, nil
}

// ptZipPickle opens data.pkl: straight from the file when stored, through
// the decompressor (bounded) otherwise, setting st's place and size; a
// deflated data.pkl is also a member (inline numpy arrays are ranges of
// it).
func ptZipPickle(f index.File, pkl *zip.File, st *ptStream) (io.Reader, *index.Member, error) {
	file := f.Name()
	var r io.Reader
	var pklMember *index.Member
	if pkl.Method == zip.Store {
		off, err := pkl.DataOffset()
		if err != nil {
			return nil, nil, index.ErrorAt(file, "member "+pkl.Name, "cannot read its local header: %v", err)
		}
		n := int64(pkl.UncompressedSize64)
		if pkl.UncompressedSize64 > math.MaxInt64 || pkl.CompressedSize64 != pkl.UncompressedSize64 || off > f.Size() || n > f.Size()-off {
			return nil, nil, index.Errorf(file, off, "member %s (%d bytes) runs past the end of the file", pkl.Name, pkl.UncompressedSize64)
		}
		st.base, st.size = off, n
		r = io.NewSectionReader(f, off, n)
	} else {
		rc, err := pkl.Open()
		if err != nil {
			return nil, nil, index.ErrorAt(file, "member "+pkl.Name, "cannot open: %v", err)
		}
		data, err := io.ReadAll(io.LimitReader(rc, pickle.MaxPickle+1))
		rc.Close()
		if err != nil {
			return nil, nil, index.ErrorAt(file, "member "+pkl.Name, "cannot decompress: %v", err)
		}
		if len(data) > pickle.MaxPickle {
			return nil, nil, index.ErrorAt(file, "member "+pkl.Name, "compressed pickle larger than %d bytes (torch.save stores data.pkl uncompressed)", pickle.MaxPickle)
		}
		// Budgets follow the file's bytes, not the inflated size: a
		// deflated pickle of a few KB must cost what a few KB may.
		st.size, st.cost = int64(len(data)), max(int64(pkl.CompressedSize64), 1)
		r = bytes.NewReader(data)
		// Inline numpy arrays are ranges of the inflated pickle: it is
		// a member (archive/zip has checked its CRC-32 reading it).
		off, err := pkl.DataOffset()
		if err != nil {
			return nil, nil, index.ErrorAt(file, "member "+pkl.Name, "cannot read its local header: %v", err)
		}
		if pkl.Method != zip.Deflate || pkl.CompressedSize64 > uint64(f.Size()) || off > f.Size()-int64(pkl.CompressedSize64) {
			pklMember = nil // served only when deflated (refused where needed)
		} else {
			pklMember = &index.Member{File: 0, Name: pkl.Name, Size: st.size,
				Kind: &index.Deflated{Offset: off, CompressedSize: int64(pkl.CompressedSize64), CRC32: pkl.CRC32}}
		}
	}
	return r, pklMember, nil
}

// ptZipSpan is where a zip storage's bytes are: a range of source src.
type ptZipSpan struct {
	src       int
	off, size int64
}

// ptZipSpans locates the storages of a zip checkpoint (a ptSpan): stored
// members are ranges of the file, deflated ones members of their own
// (added to w's).
type ptZipSpans struct {
	f       index.File
	root    string
	members map[string]*zip.File
	spans   map[*torchStorage]ptZipSpan
	w       *ptWalker
}

// span is the ptSpan of a zip checkpoint's storage st.
func (z *ptZipSpans) span(st *torchStorage) (int, int64, int64, string) {
	f, root, members, spans, w := z.f, z.root, z.members, z.spans, z.w
	if sp, ok := spans[st]; ok {
		return sp.src, sp.off, sp.size, ""
	}
	if st.root != nil {
		return ptViewSpan(st, z.span)
	}
	es := ptElemSize(st)
	need, ok := ptMul(st.numel, es)
	if es == 0 || !ok {
		return 0, 0, 0, fmt.Sprintf("storage %q of %d %s elements overflows", st.key, st.numel, st.typ.name)
	}
	zf := members[st.key]
	if zf == nil {
		return 0, 0, 0, fmt.Sprintf("its storage %sdata/%s is missing from the archive", root, st.key)
	}
	if zf.Method != zip.Store {
		m, msg := ptDeflated(f, zf)
		if msg != "" {
			return 0, 0, 0, msg
		}
		if need > m.Size {
			return 0, 0, 0, fmt.Sprintf("its storage member %s holds %d bytes (inflated), %d %s elements need %d", zf.Name, m.Size, st.numel, st.typ.name, need)
		}
		m.Source = 1 + len(w.members)
		w.members = append(w.members, *m)
		spans[st] = ptZipSpan{m.Source, 0, need}
		return m.Source, 0, need, ""
	}
	if zf.CompressedSize64 != zf.UncompressedSize64 || zf.UncompressedSize64 > math.MaxInt64 {
		return 0, 0, 0, fmt.Sprintf("its storage member %s has inconsistent sizes", zf.Name)
	}
	off, err := zf.DataOffset()
	if err != nil {
		return 0, 0, 0, fmt.Sprintf("cannot read the local header of its storage member %s: %v", zf.Name, err)
	}
	have := int64(zf.UncompressedSize64)
	if off < 0 || off > f.Size() || have > f.Size()-off {
		return 0, 0, 0, fmt.Sprintf("its storage member %s runs past the end of the file", zf.Name)
	}
	if need > have {
		return 0, 0, 0, fmt.Sprintf("its storage member %s holds %d bytes, %d %s elements need %d", zf.Name, have, st.numel, st.typ.name, need)
	}
	spans[st] = ptZipSpan{0, off, need}
	return 0, off, need, ""
}

// ptDeflated checks deflated storage member zf of f: the member it will
// be (Source not set) or a message saying why it cannot be served. The
// data is inflated (and its CRC-32 checked) by the backing layer on first
// read, never here.
func ptDeflated(f index.File, zf *zip.File) (*index.Member, string) {
	if zf.Method != zip.Deflate {
		return nil, fmt.Sprintf("its storage member %s is compressed with zip method %d; tensorfs reads stored members and inflates deflated ones (method 8)", zf.Name, zf.Method)
	}
	if zf.Flags&1 != 0 {
		return nil, fmt.Sprintf("its storage member %s is encrypted; tensorfs cannot read it", zf.Name)
	}
	csize, size := zf.CompressedSize64, zf.UncompressedSize64
	if csize > math.MaxInt64/numpy.DeflateMaxRatio || size > math.MaxInt64 {
		return nil, fmt.Sprintf("its storage member %s has sizes out of range (%d compressed, %d inflated)", zf.Name, csize, size)
	}
	if size > csize*numpy.DeflateMaxRatio+258 {
		return nil, fmt.Sprintf("its storage member %s declares %d bytes inflated from %d compressed bytes, more than deflate can produce (at most %d to 1): a zip bomb or a broken directory", zf.Name, size, csize, numpy.DeflateMaxRatio)
	}
	off, err := zf.DataOffset()
	if err != nil {
		return nil, fmt.Sprintf("cannot read the local header of its storage member %s: %v", zf.Name, err)
	}
	if off < 0 || off > f.Size() || int64(csize) > f.Size()-off {
		return nil, fmt.Sprintf("its storage member %s: its %d compressed bytes run past the end of the file", zf.Name, csize)
	}
	return &index.Member{File: 0, Name: zf.Name, Size: int64(size),
		Kind: &index.Deflated{Offset: off, CompressedSize: int64(csize), CRC32: zf.CRC32}}, ""
}

// ptViewSpan locates a legacy storage view inside its root storage.
func ptViewSpan(st *torchStorage, spanOf ptSpan) (int, int64, int64, string) {
	src, off, size, msg := spanOf(st.root)
	if msg != "" {
		return 0, 0, 0, msg
	}
	es := ptElemSize(st.root)
	end, ok := ptAdd(st.viewOff, st.numel)
	if ok {
		end, ok = ptMul(end, es)
	}
	if !ok || end > size {
		return 0, 0, 0, fmt.Sprintf("storage view %q (elements %d..+%d) reaches past its storage %q", st.key, st.viewOff, st.numel, st.root.key)
	}
	return src, off + st.viewOff*es, st.numel * es, ""
}

func ptMul(a, b int64) (int64, bool) {
	if a < 0 || b < 0 || (b != 0 && a > math.MaxInt64/b) {
		return 0, false
	}
	return a * b, true
}

func ptAdd(a, b int64) (int64, bool) {
	if a < 0 || b < 0 || a > math.MaxInt64-b {
		return 0, false
	}
	return a + b, true
}

const ptLegacyProtocol = 1001

func parseTorchLegacy(f index.File) (*index.Index, error) {
	file := f.Name()
	size := f.Size()
	st := ptStream{file: file, base: 0, size: size}
	m := st.machine(io.NewSectionReader(f, 0, size), pickle.PlainEnv{})
	if err := ptLegacyHeader(m, st); err != nil {
		return nil, err
	}
	mainAt := m.Pos()
	env := newTorchEnv()
	m.SetEnv(env)
	root, err := m.Run()
	if err != nil {
		return nil, st.err(err)
	}
	at := m.Pos()
	m.SetEnv(pickle.PlainEnv{})
	keysV, err := m.Run()
	if err != nil {
		return nil, st.err(err)
	}
	keys, ok := pickle.Items(keysV)
	if !ok {
		return nil, index.Errorf(file, at, "legacy storage key list is a %s, not a list", pickle.TypeName(keysV))
	}
	// The storages follow, in the order of the key list.
	spans, err := ptLegacyStorages(f, env, keys, at, m.Pos())
	if err != nil {
		return nil, err
	}
	var spanOf ptSpan
	spanOf = func(st *torchStorage) (int, int64, int64, string) {
		if st.root != nil {
			return ptViewSpan(st, spanOf)
		}
		sp, ok := spans[st]
		if !ok {
			return 0, 0, 0, fmt.Sprintf("its storage %q is not in the file's storage list", st.key)
		}
		return 0, sp.off, sp.size, ""
	}
	w := newPtWalker(st, spanOf)
	w.m = m
	w.budget = pickle.NewBudget(at - mainAt)
	return ptFinish(w, root, "pytorch")
}

// ptLegacyHeader reads the records before a legacy file's main pickle:
// the magic number, the protocol version and sys_info.
func ptLegacyHeader(m *pickle.Machine, st ptStream) error {
	file := st.file
	magic, err := m.Run()
	if err != nil {
		return st.err(err)
	}
	if b, ok := magic.(*big.Int); !ok || b.Cmp(ptLegacyMagic) != 0 {
		return index.Errorf(file, 0, "not a PyTorch checkpoint (no zip header and no legacy magic number)")
	}
	at := m.Pos()
	proto, err := m.Run()
	if err != nil {
		return st.err(err)
	}
	if p, ok := proto.(int64); !ok || p != ptLegacyProtocol {
		return index.Errorf(file, at, "legacy PyTorch protocol version %s (want %d)", pickle.Repr(proto, 40), ptLegacyProtocol)
	}
	at = m.Pos()
	sysInfo, err := m.Run()
	if err != nil {
		return st.err(err)
	}
	if _, ok := sysInfo.(*pickle.Dict); !ok {
		return index.Errorf(file, at, "legacy sys_info is a %s, not a dict", pickle.TypeName(sysInfo))
	}
	return nil
}

// ptLegacySpan is where a legacy storage's elements are in the file.
type ptLegacySpan struct{ off, size int64 }

// ptLegacyStorages reads the storages that follow a legacy file's key
// list (read at byte at), from byte pos, in the order of the list: each
// an element count and its elements.
func ptLegacyStorages(f index.File, env *torchEnv, keys []any, at, pos int64) (map[*torchStorage]ptLegacySpan, error) {
	file, size := f.Name(), f.Size()
	spans := map[*torchStorage]ptLegacySpan{}
	for _, kv := range keys {
		key, ok := torchKey(kv)
		if !ok {
			return nil, index.Errorf(file, at, "legacy storage key %s is not a string", pickle.Repr(kv, 40))
		}
		st := env.storages[key]
		if st == nil {
			return nil, index.Errorf(file, pos, "legacy storage %q is listed but no tensor uses it (its element size is unknown)", key)
		}
		if _, dup := spans[st]; dup {
			return nil, index.Errorf(file, at, "legacy storage %q is listed twice", key)
		}
		var cnt [8]byte
		if pos > size-8 {
			return nil, index.Errorf(file, pos, "legacy storage %q: file ends before its element count", key)
		}
		if _, err := f.ReadAt(cnt[:], pos); err != nil {
			return nil, index.Errorf(file, pos, "cannot read: %v", err)
		}
		n := int64(0)
		for i := 7; i >= 0; i-- {
			n = n<<8 | int64(cnt[i])
		}
		es := ptElemSize(st)
		nb, ok := ptMul(n, es)
		if es == 0 || !ok || nb > size-pos-8 {
			return nil, index.Errorf(file, pos, "legacy storage %q of %d %s elements runs past the end of the file", key, n, st.typ.name)
		}
		if n != st.numel {
			return nil, index.Errorf(file, pos, "legacy storage %q holds %d elements, the pickle says %d", key, n, st.numel)
		}
		spans[st] = ptLegacySpan{pos + 8, nb}
		pos += 8 + nb
	}
	return spans, nil
}
