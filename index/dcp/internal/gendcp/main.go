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
//
// With -hostile KIND it writes instead one of the hostile checkpoints of
// issue 34 (dcpwrite.Kinds), of -n of what it repeats:
//
//	go run ./index/dcp/internal/gendcp -hostile dim1 -n 65536 OUT
//
// With -zstd each item is written as torch >= 2.7's ZStandardTransform
// writes it: a zstd stream of the torch.save zip (klauspost/compress's
// encoder at its default level), transform_descriptors
// ["stream.zstd/1"].
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/lazyweights/tensorfs/index/dcp/internal/dcpwrite"
)

func main() {
	mib := flag.Int("mib", 400, "MiB of big.weight (BF16, 4096 columns)")
	ranks := flag.Int("ranks", 4, "ranks (files) it is sharded over along dim 0")
	seed := flag.Uint64("seed", 1, "seed of the values")
	hostile := flag.String("hostile", "", "write this hostile checkpoint instead (one of "+strings.Join(dcpwrite.Kinds, ", ")+")")
	n := flag.Int("n", 1000, "with -hostile: how many of what it repeats")
	flag.BoolVar(&zstdItems, "zstd", false, "write each item as a zstd stream (torch >= 2.7's stream.zstd/1)")
	flag.Parse()
	if *hostile != "" && flag.NArg() == 1 {
		if err := dcpwrite.Hostile(flag.Arg(0), *hostile, *n); err != nil {
			fmt.Fprintln(os.Stderr, "gendcp:", err)
			os.Exit(1)
		}
		return
	}
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

// zstdItems: items are zstd streams of their zips (-zstd).
var zstdItems bool

// itemWriter is where an item's zip is written: w, through a zstd
// encoder with -zstd; the counter says the item's length.
func itemWriter(w io.Writer) (io.Writer, func() error, *countingWriter) {
	cw := &countingWriter{w: w}
	if !zstdItems {
		return cw, func() error { return nil }, cw
	}
	e, _ := zstd.NewWriter(cw)
	return e, e.Close, cw
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

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

// writeZip writes torch.save(tensor) of a contiguous tensor of the given
// storage class, bytes and shape, and returns its length.
func writeZip(w io.Writer, storage string, data []byte, shape []int64) (int64, error) {
	es := int64(2)
	if storage == "FloatStorage" {
		es = 4
	}
	p := &dcpwrite.Writer{}
	p.Op("\x80\x02")
	p.TensorOp(storage, int64(len(data))/es, shape)
	p.Op(".")
	iw, done, cw := itemWriter(w)
	if _, err := dcpwrite.TorchSave(iw, p.Bytes(), data); err != nil {
		return 0, err
	}
	if err := done(); err != nil {
		return 0, err
	}
	return cw.n, nil
}

const mdMod = dcpwrite.MetadataModule

func metadata(rows int64, chunks [][2]int64, items []item) []byte {
	w := &dcpwrite.Writer{}
	w.Op("\x80\x02")
	w.Obj(mdMod, "Metadata",
		"state_dict_metadata", func() {
			w.Op("}(")
			w.Str("model.big.weight")
			w.Obj(mdMod, "TensorStorageMetadata",
				"properties", func() { w.Properties("bfloat16", "torch.serialization", "_get_layout") },
				"size", func() { w.Size([]int64{rows, cols}) },
				"chunks", func() {
					w.Op("](")
					for _, c := range chunks {
						w.Obj(mdMod, "ChunkStorageMetadata", "offsets", func() { w.Size([]int64{c[0], 0}) }, "sizes", func() { w.Size([]int64{c[1], cols}) })
					}
					w.Op("e")
				})
			w.Str("model.big.bias")
			w.Obj(mdMod, "TensorStorageMetadata",
				"properties", func() { w.Properties("float32", "torch.serialization", "_get_layout") },
				"size", func() { w.Size([]int64{cols}) },
				"chunks", func() {
					w.Op("](")
					w.Obj(mdMod, "ChunkStorageMetadata", "offsets", func() { w.Size([]int64{0}) }, "sizes", func() { w.Size([]int64{cols}) })
					w.Op("e")
				})
			w.Op("u")
		},
		"planner_data", func() {
			w.Op("}(")
			for _, k := range [][3]string{{"model.big.weight", "model", "big.weight"}, {"model.big.bias", "model", "big.bias"}} {
				w.Str(k[0])
				w.Str(k[1])
				w.Str(k[2])
				w.Op("\x86")
			}
			w.Op("u")
		},
		"storage_data", func() {
			w.Op("}(")
			for _, it := range items {
				w.Obj(mdMod, "MetadataIndex", "fqn", func() { w.Str(it.fqn) }, "offset", func() { w.Size(it.offsets) }, "index", func() { w.Op("N") })
				attrs := []any{"relative_path", func() { w.Str(it.file) }, "offset", func() { w.Int(it.off) }, "length", func() { w.Int(it.len) }}
				if zstdItems {
					attrs = append(attrs, "transform_descriptors", func() { w.Op("]("); w.Str("stream.zstd/1"); w.Op("e") })
				}
				w.Obj("torch.distributed.checkpoint.filesystem", "_StorageInfo", attrs...)
			}
			w.Op("u")
		})
	w.Op(".")
	return w.Bytes()
}
