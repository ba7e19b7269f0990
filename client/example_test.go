package client_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"io"
	"log"
	"math"
	"os"
	"path/filepath"
	"sync"

	"github.com/lazyweights/tensorfs/client"
	"github.com/lazyweights/tensorfs/dtype"
)

// exampleCheckpoint writes a small safetensors file for the examples:
// "bias" F32 [2], "weight" F16 [2,2] and "step" I64 [] (a scalar).
func exampleCheckpoint() string {
	dir, err := os.MkdirTemp("", "tensorfs-example")
	if err != nil {
		log.Fatal(err)
	}
	le := binary.LittleEndian
	var data []byte
	data = le.AppendUint32(data, math.Float32bits(0.5))
	data = le.AppendUint32(data, math.Float32bits(-1))
	for _, h := range []uint16{0x3c00, 0x4000, 0xc200, 0x3800} { // 1, 2, -3, 0.5 in F16
		data = le.AppendUint16(data, h)
	}
	data = le.AppendUint64(data, 1000)
	header := `{"__metadata__":{"format":"pt"},` +
		`"bias":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},` +
		`"weight":{"dtype":"F16","shape":[2,2],"data_offsets":[8,16]},` +
		`"step":{"dtype":"I64","shape":[],"data_offsets":[16,24]}}`
	for len(header)%8 != 0 {
		header += " "
	}
	file := le.AppendUint64(nil, uint64(len(header)))
	file = append(append(file, header...), data...)
	path := filepath.Join(dir, "model.safetensors")
	if err := os.WriteFile(path, file, 0o644); err != nil {
		log.Fatal(err)
	}
	return path
}

// Open a checkpoint and list its tensors and metadata. The same code works
// on a sharded directory or on a tensorfs mount point.
func Example() {
	path := exampleCheckpoint()
	defer os.RemoveAll(filepath.Dir(path))

	ck, err := client.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer ck.Close()
	fmt.Println(ck.Format(), ck.Metadata())
	for _, t := range ck.Tensors() {
		fmt.Printf("%s %s %v %d bytes\n", t.Name, t.DType, t.Shape, t.Size)
	}
	// Output:
	// safetensors map[format:pt]
	// bias F32 [2] 8 bytes
	// step I64 [] 8 bytes
	// weight F16 [2 2] 8 bytes
}

// Read one tensor converted to float32, as an io.Reader.
func ExampleCheckpoint_OpenTensor() {
	path := exampleCheckpoint()
	defer os.RemoveAll(filepath.Dir(path))
	ck, err := client.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer ck.Close()

	r, err := ck.OpenTensor("weight", dtype.F32)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	raw, err := io.ReadAll(r)
	if err != nil {
		log.Fatal(err)
	}
	for i := 0; i < len(raw); i += 4 {
		fmt.Print(math.Float32frombits(binary.LittleEndian.Uint32(raw[i:])), " ")
	}
	fmt.Println("as", r.DType(), r.Size(), "bytes")
	// Output:
	// 1 2 -3 0.5 as F32 16 bytes
}

// hashSink is a Sink that computes each tensor's sha256 as its chunks
// arrive. Chunks of one tensor come in order, so a running hash works.
type hashSink struct {
	mu   sync.Mutex
	sums map[string][32]byte
}

type tensorHash struct {
	sink *hashSink
	name string
	h    hash.Hash
}

func (s *hashSink) Begin(t client.TensorInfo, dt dtype.DType, size int64) (client.TensorSink, error) {
	return &tensorHash{s, t.Name, sha256.New()}, nil
}

func (t *tensorHash) Write(chunk []byte, off int64) error {
	t.h.Write(chunk) // chunk is only valid until Write returns
	return nil
}

func (t *tensorHash) End(err error) error {
	if err != nil {
		return nil // the stream reports it
	}
	t.sink.mu.Lock()
	defer t.sink.mu.Unlock()
	var sum [32]byte
	copy(sum[:], t.h.Sum(nil))
	t.sink.sums[t.name] = sum
	return nil
}

// Stream a whole checkpoint, converted to F32 where it can be, through a
// sink in 4-byte chunks with two tensors in flight. The client holds two
// 4-byte buffers however large the checkpoint is.
func ExampleCheckpoint_Stream() {
	path := exampleCheckpoint()
	defer os.RemoveAll(filepath.Dir(path))
	ck, err := client.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer ck.Close()

	sink := &hashSink{sums: map[string][32]byte{}}
	opts := client.StreamOptions{Parallel: 2, ChunkSize: 4, DType: dtype.F32}
	if err := ck.Stream(context.Background(), sink, opts); err != nil {
		log.Fatal(err)
	}
	for _, t := range ck.Tensors() {
		sum := sink.sums[t.Name]
		fmt.Printf("%x  %s\n", sum[:8], t.Name)
	}
	fmt.Println("buffers:", opts.BufferBytes(), "bytes")
	// Output:
	// 031a5e93e726630d  bias
	// 921ac7f259f86460  step
	// 7f7746b005589f4b  weight
	// buffers: 8 bytes
}

// Read a tensor's values as float32 in one call (converted from F16
// here), and check what can be converted. Tensors are named by name in
// every method: Tensor, OpenTensor, Convertible, ReadFloat32.
func ExampleCheckpoint_ReadFloat32() {
	path := exampleCheckpoint()
	defer os.RemoveAll(filepath.Dir(path))
	ck, err := client.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer ck.Close()

	w, err := ck.ReadFloat32("weight")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(w)
	fmt.Println(ck.Convertible("step", dtype.F32), ck.Convertible("step", client.AsStored))
	// Output:
	// [1 2 -3 0.5]
	// false true
}
