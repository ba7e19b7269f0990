package formats

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/gguf"
)

// Refused is the table of files that tensorfs recognises and does not
// read: the older formats of the tools whose checkpoints it reads (GGML,
// GGMF and GGJT before GGUF, GGUF with a byte-swapped magic, PyTorch's tar
// format before 0.1.10) and files that users point it at which hold no
// checkpoint of its formats (archives, compressed files, HDF5 after a user block). Like
// Formats it is explicit, in detection order, and matches by content,
// never by file name. ParseFile consults it only when no row of Formats
// accepts the file, and refuses such a file with Describe's line.
var Refused = []RefusedFormat{
	{Name: "ggml", Describe: describeGGML},
	{Name: "gguf-swapped", Describe: describeGGUFSwapped},
	{Name: "pytorch-tar", Describe: describeTorchTar},
	{Name: "tar", Describe: describeTar},
	{Name: "zip", Describe: describeZip},
	{Name: "compressed", Describe: describeCompressed},
	{Name: "hdf5", Describe: describeHDF5},
}

// RefusedFormat is one row of Refused.
type RefusedFormat struct {
	Name string
	// Describe returns, for a file whose first bytes are head (up to
	// RefusedSniffLen of them), what the file is and what to do with it,
	// in one line without the file's name; "" when the file is not of
	// this kind.
	Describe func(head []byte) string
}

// RefusedSniffLen is how many leading bytes the rows of Refused look at:
// enough for a tar archive's first member behind a PAX header (three
// 512-byte blocks) and for HDF5's superblock after a user block of up to
// 2048 bytes.
const RefusedSniffLen = 4096

// DescribeRefused returns what the file starting with head is, when a row
// of Refused knows it.
func DescribeRefused(head []byte) (string, bool) {
	for _, r := range Refused {
		if msg := r.Describe(head); msg != "" {
			return msg, true
		}
	}
	return "", false
}

// describeRefusedFile reads up to RefusedSniffLen bytes of f (head holds
// its first bytes already) and describes it with Refused.
func describeRefusedFile(f index.File, head []byte) (string, bool) {
	if len(head) < RefusedSniffLen && int64(len(head)) < f.Size() {
		long := make([]byte, min(f.Size(), RefusedSniffLen))
		if n, err := f.ReadAt(long, 0); n >= len(head) && (err == nil || err == io.EOF) {
			head = long[:n]
		}
	}
	return DescribeRefused(head)
}

// The magics of the formats llama.cpp and ggml used before GGUF (August
// 2023), as llama.h named them. Writers stored each as a uint32 in the
// machine's byte order, so on (little-endian) disk 'ggjt' reads "tjgg".
var ggmlMagics = []struct {
	magic string // as the name reads: 'ggjt'
	what  string
	todo  string
}{
	{"ggml", "a GGML model file (magic 'ggml', the unversioned format of whisper.cpp, ggml's examples and llama.cpp before April 2023)",
		"tensorfs reads GGUF v2 and v3: convert a LLaMA model with llama.cpp's convert_llama_ggml_to_gguf.py; for other models (whisper.cpp's), mount the checkpoint it was converted from (e.g. Whisper's PyTorch .pt)"},
	{"ggmf", "a GGMF model file (magic 'ggmf', llama.cpp's format of spring 2023, before GGJT and GGUF)",
		"tensorfs reads GGUF v2 and v3: convert it with llama.cpp's convert_llama_ggml_to_gguf.py, or convert the original weights again with a current llama.cpp"},
	{"ggjt", "a GGJT model file (magic 'ggjt', llama.cpp's format of April to August 2023, before GGUF)",
		"tensorfs reads GGUF v2 and v3: convert it with llama.cpp's convert_llama_ggml_to_gguf.py, or convert the original weights again with a current llama.cpp"},
	{"ggla", "a llama.cpp LoRA adapter in the pre-GGUF GGLA format (magic 'ggla')",
		"tensorfs reads GGUF v2 and v3: convert the original adapter (adapter_model.safetensors, which tensorfs reads) with llama.cpp's convert_lora_to_gguf.py"},
	{"ggsn", "a llama.cpp session file (magic 'ggsn': a saved prompt state, not a model)",
		"tensorfs reads model checkpoints: mount the model's GGUF file instead"},
	{"ggsq", "a llama.cpp sequence state file (magic 'ggsq': a saved prompt state, not a model)",
		"tensorfs reads model checkpoints: mount the model's GGUF file instead"},
}

func reverse4(s string) string { return string([]byte{s[3], s[2], s[1], s[0]}) }

// describeGGML names the pre-GGUF ggml formats by their magic, in either
// byte order, and their version (a uint32 after the magic; 'ggml' has
// none).
func describeGGML(head []byte) string {
	if len(head) < 4 {
		return ""
	}
	for _, m := range ggmlMagics {
		var order binary.ByteOrder
		switch string(head[:4]) {
		case reverse4(m.magic):
			order = binary.LittleEndian // the uint32 written little-endian
		case m.magic:
			order = binary.BigEndian
		default:
			continue
		}
		what := m.what
		if m.magic != "ggml" && len(head) >= 8 {
			what += fmt.Sprintf(", version %d", order.Uint32(head[4:]))
		}
		if order == binary.BigEndian {
			what += ", big-endian"
		}
		return what + ", not GGUF: " + m.todo
	}
	return ""
}

// describeGGUFSwapped names a file whose first four bytes are GGUF's
// magic in reverse order: the magic stored as a big-endian uint32 (by a
// big-endian machine, or by a writer from before GGUF was released, when
// the magic was a number rather than four bytes).
func describeGGUFSwapped(head []byte) string {
	if len(head) < 4 || string(head[:4]) != reverse4(gguf.Magic) {
		return ""
	}
	version := ""
	if len(head) >= 8 {
		le, be := binary.LittleEndian.Uint32(head[4:]), binary.BigEndian.Uint32(head[4:])
		switch {
		case be >= 1 && be <= 3:
			version = fmt.Sprintf(", version %d, big-endian", be)
		case le >= 1 && le <= 3:
			version = fmt.Sprintf(", version %d", le)
		}
	}
	return "GGUF with its magic byte-swapped (\"FUGG\"" + version + ")" +
		": written on a big-endian machine or by a GGUF writer from before its release (August 2023); tensorfs reads little-endian GGUF v2 and v3: convert the model again with a current llama.cpp (convert_hf_to_gguf.py)"
}

// tarMember is one header of a tar archive found in a head.
type tarMember struct {
	name string
	typ  byte
}

// tarMembers returns the members whose headers lie in head, skipping PAX
// and GNU long-name records; ok is false when head does not start with a
// tar header (ustar magic and a valid checksum).
func tarMembers(head []byte) (members []tarMember, ok bool) {
	for off := 0; off+512 <= len(head); {
		h := head[off : off+512]
		if !tarHeaderValid(h) {
			return members, off > 0 // the end, or no tar at all
		}
		typ := h[156]
		size, okSize := tarNumber(h[124:136])
		if !okSize {
			return members, true
		}
		switch typ {
		case 'x', 'g', 'L', 'K': // PAX extended headers, GNU long names
		default:
			name := cString(h[0:100])
			if prefix := cString(h[345:500]); string(h[257:263]) == "ustar\x00" && prefix != "" {
				name = prefix + "/" + name
			}
			members = append(members, tarMember{name: name, typ: typ})
		}
		blocks := (size + 511) / 512
		if blocks > int64(len(head)) {
			return members, true
		}
		off += 512 + int(blocks)*512
	}
	return members, len(head) >= 512 && tarHeaderValid(head[:512])
}

// tarHeaderValid reports whether h, 512 bytes, is a POSIX or GNU tar
// header: "ustar" at byte 257 and the checksum of its bytes.
func tarHeaderValid(h []byte) bool {
	if string(h[257:262]) != "ustar" {
		return false
	}
	want, ok := tarNumber(h[148:156])
	if !ok {
		return false
	}
	var sum int64
	for i, c := range h {
		if i >= 148 && i < 156 {
			c = ' '
		}
		sum += int64(c)
	}
	return sum == want
}

// tarNumber parses a tar numeric field: octal, NUL- or space-terminated
// (base-256 numbers, for sizes of 8 GiB and more, are taken as large).
func tarNumber(b []byte) (int64, bool) {
	if len(b) > 0 && b[0]&0x80 != 0 {
		return 1 << 40, true
	}
	s := strings.TrimRight(strings.TrimLeft(string(b), " "), " \x00")
	if s == "" {
		return 0, true
	}
	n, err := strconv.ParseInt(s, 8, 64)
	return n, err == nil && n >= 0
}

func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// torchTarMembers are the members of torch.save's tar format (PyTorch
// 0.1.1 to 0.1.9, 2016 to early 2017), written in this order.
var torchTarMembers = []string{"sys_info", "pickle", "tensors", "storages"}

// describeTorchTar names PyTorch's tar checkpoint format: a tar archive
// whose first member is one of torch.save's (sys_info first).
func describeTorchTar(head []byte) string {
	m, ok := tarMembers(head)
	if !ok || len(m) == 0 {
		return ""
	}
	for _, name := range torchTarMembers {
		if m[0].name == name {
			return "a PyTorch checkpoint in the tar format of torch.save before PyTorch 0.1.10 (members sys_info, pickle, tensors, storages), which tensorfs does not read: load it with torch.load(path, weights_only=False) in a current PyTorch (only for a file you trust: it runs pickles) and save it again with torch.save or safetensors"
		}
	}
	return ""
}

// describeTar names any other tar archive, with its first member.
func describeTar(head []byte) string {
	m, ok := tarMembers(head)
	if !ok {
		return ""
	}
	first := ""
	if len(m) > 0 {
		first = fmt.Sprintf(" (first member %q)", m[0].name)
	}
	return "a tar archive" + first + ", not a checkpoint: extract it (tar -xf) and give tensorfs the checkpoint inside"
}

// describeZip names a ZIP archive that neither PyTorch's nor NumPy's row
// of Formats took, with its first member.
func describeZip(head []byte) string {
	switch {
	case bytes.HasPrefix(head, []byte("PK\x05\x06")):
		return "an empty ZIP archive, not a checkpoint"
	case !bytes.HasPrefix(head, []byte("PK\x03\x04")):
		return ""
	}
	first := ""
	if len(head) >= 30 {
		n := int(binary.LittleEndian.Uint16(head[26:]))
		if 30+n <= len(head) {
			first = fmt.Sprintf(" (first member %q)", head[30:30+n])
		}
	}
	return "a ZIP archive" + first + " that is neither a PyTorch checkpoint (torch.save: ARCHIVE/data.pkl) nor a NumPy .npz (members NAME.npy): extract it (unzip) and give tensorfs the checkpoint inside"
}

// compressedMagics are the compressed-file formats named by their magic.
var compressedMagics = []struct {
	magic, what, tool string
}{
	{"\x1f\x8b", "gzip", "gunzip, or tar -xzf for a .tar.gz"},
	{"\x28\xb5\x2f\xfd", "zstd", "zstd -d, or tar --zstd -xf for a .tar.zst"},
	{"\xfd7zXZ\x00", "xz", "xz -d, or tar -xJf for a .tar.xz"},
	{"BZh", "bzip2", "bunzip2, or tar -xjf for a .tar.bz2"},
	{"\x04\x22\x4d\x18", "LZ4", "lz4 -d"},
	{"7z\xbc\xaf\x27\x1c", "7-Zip", "7z x"},
}

// describeCompressed names a compressed file by its magic, and the name
// of the file inside a gzip stream where its header records it.
func describeCompressed(head []byte) string {
	for _, c := range compressedMagics {
		if !bytes.HasPrefix(head, []byte(c.magic)) {
			continue
		}
		inner := ""
		if c.what == "gzip" {
			if name := gzipName(head); name != "" {
				inner = fmt.Sprintf(" (of %q)", name)
			}
		}
		return c.what + "-compressed data" + inner + ", not a checkpoint: decompress it first (" + c.tool + ") and give tensorfs the checkpoint"
	}
	return ""
}

// gzipName returns the original file name a gzip header records (RFC
// 1952: FNAME after the optional FEXTRA field), when head holds it.
func gzipName(head []byte) string {
	const fextra, fname = 4, 8
	if len(head) < 10 || head[2] != 8 || head[3]&fname == 0 {
		return ""
	}
	p := 10
	if head[3]&fextra != 0 {
		if len(head) < p+2 {
			return ""
		}
		p += 2 + int(binary.LittleEndian.Uint16(head[p:]))
	}
	if p >= len(head) {
		return ""
	}
	end := bytes.IndexByte(head[p:], 0)
	if end <= 0 || end > 255 {
		return ""
	}
	return string(head[p : p+end])
}

// hdf5Magic is HDF5's format signature. It starts the superblock, which
// is at byte 0 or after a user block of 512, 1024, 2048... bytes.
const hdf5Magic = "\x89HDF\r\n\x1a\n"

func describeHDF5(head []byte) string {
	// At byte 0 it is read (the hdf5 row of Table); after a user block
	// it is named.
	for off := 512; off+len(hdf5Magic) <= len(head); off *= 2 {
		if string(head[off:off+len(hdf5Magic)]) == hdf5Magic {
			return fmt.Sprintf("an HDF5 file after a user block of %d bytes, which tensorfs does not read (it reads HDF5 files that start with their superblock, as h5py and Keras write them): copy the file without its first %d bytes (tail -c +%d), or save the arrays with safetensors", off, off, off+1)
		}
	}
	return ""
}

func printable(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}
