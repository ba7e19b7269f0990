// Command gendcp writes a large PyTorch Distributed Checkpoint for
// benchmarks, byte for byte in the layout torch 2.6's dcp.save writes (the
// layout of ../shared/testdata/modern/dcp_ws4, which gen_modern.py --big
// writes with torch itself): {"model": {"big.weight": BF16 [rows, 4096]
// sharded along dim 0 over RANKS ranks, "big.bias": F32 [4096] on rank 0}},
// one __R_0.distcp per rank, each chunk a torch.save zip (stored members,
// data/0 aligned to 64 bytes), and a .metadata pickle of DCP's dataclasses.
// The values are pseudo-random (seeded), not torch's.
//
//	go run ./index/dcp/internal/gendcp -mib 400 -ranks 4 OUT
package main

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
)

func main() {
	mib := flag.Int("mib", 400, "MiB of big.weight (BF16, 4096 columns)")
	ranks := flag.Int("ranks", 4, "ranks (files) it is sharded over along dim 0")
	seed := flag.Uint64("seed", 1, "seed of the values")
	flag.Parse()
	if flag.NArg() != 1 || *ranks < 1 || *mib < 1 {
		fmt.Fprintln(os.Stderr, "usage: gendcp [-mib N] [-ranks N] [-seed N] OUT")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *mib, *ranks, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "gendcp:", err)
		os.Exit(1)
	}
}

const cols = 4096

type item struct {
	fqn      string
	offsets  []int64 // nil: not a tensor
	file     string
	off, len int64
}

func run(out string, mib, ranks int, seed uint64) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	rows := int64(mib) << 20 / (cols * 2)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var items []item
	var chunks [][2]int64 // big.weight chunks: start row, rows
	for r := 0; r < ranks; r++ {
		// torch's Shard(0): chunks of ceil(rows/ranks) rows, the last ones shorter.
		per := (rows + int64(ranks) - 1) / int64(ranks)
		lo := min(int64(r)*per, rows)
		hi := min(lo+per, rows)
		name := fmt.Sprintf("__%d_0.distcp", r)
		f, err := os.Create(filepath.Join(out, name))
		if err != nil {
			return err
		}
		var pos int64
		if hi > lo {
			data := make([]byte, (hi-lo)*cols*2)
			for i := 0; i < len(data); i += 2 {
				// bf16 of a value in about [-2, 2): sign, exponent 126..128, mantissa.
				v := rng.Uint32()
				binary.LittleEndian.PutUint16(data[i:], uint16(v&0x8000|(0x3f00+(v>>8)&0x17f)))
			}
			n, err := writeZip(f, "BFloat16Storage", data, []int64{hi - lo, cols})
			if err != nil {
				return err
			}
			items = append(items, item{"model.big.weight", []int64{lo, 0}, name, pos, n})
			chunks = append(chunks, [2]int64{lo, hi - lo})
			pos += n
		}
		if r == 0 {
			data := make([]byte, cols*4)
			for i := 0; i < len(data); i += 4 {
				binary.LittleEndian.PutUint32(data[i:], 0x3f000000|rng.Uint32()&0x7fffff)
			}
			n, err := writeZip(f, "FloatStorage", data, []int64{cols})
			if err != nil {
				return err
			}
			items = append(items, item{"model.big.bias", []int64{0}, name, pos, n})
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(out, ".metadata"), metadata(rows, chunks, items), 0o644)
}

// countWriter counts what goes to w.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeZip writes torch.save(tensor) of a contiguous tensor of the given
// storage class, bytes and shape, and returns its length.
func writeZip(w io.Writer, storage string, data []byte, shape []int64) (int64, error) {
	cw := &countWriter{w: w}
	zw := zip.NewWriter(cw)
	es := int64(2)
	if storage == "FloatStorage" {
		es = 4
	}
	strides := make([]int64, len(shape))
	s := int64(1)
	for k := len(shape) - 1; k >= 0; k-- {
		strides[k] = s
		s *= shape[k]
	}
	p := &pw{}
	p.op("\x80\x02")
	p.global("torch._utils", "_rebuild_tensor_v2")
	p.op("((")
	p.str("storage")
	p.global("torch", storage)
	p.str("0")
	p.str("cpu")
	p.int(int64(len(data)) / es)
	p.op("tQ")
	p.int(0)
	p.tuple(shape)
	p.tuple(strides)
	p.op("\x89")
	p.global("collections", "OrderedDict")
	p.op(")RtR.")
	members := []struct {
		name string
		data []byte
	}{
		{"archive/data.pkl", p.b.Bytes()},
		{"archive/byteorder", []byte("little")},
		{"archive/data/0", data},
		{"archive/version", []byte("3\n")},
		{"archive/.data/serialization_id", []byte("0123456789012345678901234567890123456789")},
	}
	for _, m := range members {
		h := &zip.FileHeader{Name: m.name, Method: zip.Store, CRC32: crc32.ChecksumIEEE(m.data),
			CompressedSize64: uint64(len(m.data)), UncompressedSize64: uint64(len(m.data))}
		// Pad the local header's extra field so that the data starts at a
		// multiple of 64 bytes from the zip's start, as torch does.
		if err := zw.Flush(); err != nil {
			return 0, err
		}
		at := cw.n + 30 + int64(len(m.name)) + 4
		pad := (64 - at%64) % 64
		h.Extra = binary.LittleEndian.AppendUint16(binary.LittleEndian.AppendUint16(nil, 0x4246), uint16(pad))
		h.Extra = append(h.Extra, bytes.Repeat([]byte("Z"), int(pad))...)
		fw, err := zw.CreateRaw(h)
		if err != nil {
			return 0, err
		}
		if _, err := fw.Write(m.data); err != nil {
			return 0, err
		}
	}
	if err := zw.Close(); err != nil {
		return 0, err
	}
	return cw.n, nil
}

// pw writes pickle opcodes.
type pw struct{ b bytes.Buffer }

func (w *pw) op(s string)        { w.b.WriteString(s) }
func (w *pw) global(m, n string) { w.op("c" + m + "\n" + n + "\n") }
func (w *pw) str(s string) {
	w.op("X")
	binary.Write(&w.b, binary.LittleEndian, uint32(len(s)))
	w.op(s)
}
func (w *pw) int(n int64) {
	if n >= -1<<31 && n < 1<<31 {
		w.op("J")
		binary.Write(&w.b, binary.LittleEndian, int32(n))
		return
	}
	w.op("\x8a\x08")
	binary.Write(&w.b, binary.LittleEndian, n)
}
func (w *pw) tuple(s []int64) {
	w.op("(")
	for _, n := range s {
		w.int(n)
	}
	w.op("t")
}
func (w *pw) size(s []int64) {
	w.global("torch", "Size")
	w.tuple(s)
	w.op("\x85R")
}

const mdMod = "torch.distributed.checkpoint.metadata"

// obj writes cls() with BUILD of a dict of attributes.
func (w *pw) obj(mod, cls string, attrs ...any) {
	w.global(mod, cls)
	w.op(")\x81}(")
	for i := 0; i < len(attrs); i += 2 {
		w.str(attrs[i].(string))
		attrs[i+1].(func())()
	}
	w.op("ub")
}

func (w *pw) properties(dt string) {
	w.global(mdMod, "TensorProperties")
	w.op(")\x81(")
	w.global("torch", dt)
	w.global("torch.serialization", "_get_layout")
	w.str("torch.strided")
	w.op("\x85R\x89")
	w.global(mdMod, "_MEM_FORMAT_ENCODING")
	w.int(0)
	w.op("\x85R\x89tb")
}

func metadata(rows int64, chunks [][2]int64, items []item) []byte {
	w := &pw{}
	w.op("\x80\x02")
	w.obj(mdMod, "Metadata",
		"state_dict_metadata", func() {
			w.op("}(")
			w.str("model.big.weight")
			w.obj(mdMod, "TensorStorageMetadata",
				"properties", func() { w.properties("bfloat16") },
				"size", func() { w.size([]int64{rows, cols}) },
				"chunks", func() {
					w.op("](")
					for _, c := range chunks {
						w.obj(mdMod, "ChunkStorageMetadata", "offsets", func() { w.size([]int64{c[0], 0}) }, "sizes", func() { w.size([]int64{c[1], cols}) })
					}
					w.op("e")
				})
			w.str("model.big.bias")
			w.obj(mdMod, "TensorStorageMetadata",
				"properties", func() { w.properties("float32") },
				"size", func() { w.size([]int64{cols}) },
				"chunks", func() {
					w.op("](")
					w.obj(mdMod, "ChunkStorageMetadata", "offsets", func() { w.size([]int64{0}) }, "sizes", func() { w.size([]int64{cols}) })
					w.op("e")
				})
			w.op("u")
		},
		"planner_data", func() {
			w.op("}(")
			for _, k := range [][3]string{{"model.big.weight", "model", "big.weight"}, {"model.big.bias", "model", "big.bias"}} {
				w.str(k[0])
				w.str(k[1])
				w.str(k[2])
				w.op("\x86")
			}
			w.op("u")
		},
		"storage_data", func() {
			w.op("}(")
			for _, it := range items {
				w.obj(mdMod, "MetadataIndex", "fqn", func() { w.str(it.fqn) }, "offset", func() { w.size(it.offsets) }, "index", func() { w.op("N") })
				w.obj("torch.distributed.checkpoint.filesystem", "_StorageInfo",
					"relative_path", func() { w.str(it.file) }, "offset", func() { w.int(it.off) }, "length", func() { w.int(it.len) })
			}
			w.op("u")
		})
	w.op(".")
	return w.b.Bytes()
}
