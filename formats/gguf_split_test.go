package formats

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/lazyweights/tensorfs/index"
)

// A GGUF v3 file of key/values only, as index/gguf's ggufBuild writes
// one without tensors (the type codes are GGUF's).
const (
	ggufTypeU8    = 0
	ggufTypeU16   = 2
	ggufTypeArray = 9
)

type ggufKV struct {
	key     string
	typ     uint32
	payload []byte
}

func u16(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }

func ggufStr(s string) []byte {
	return append(binary.LittleEndian.AppendUint64(nil, uint64(len(s))), s...)
}

// ggufArr encodes an array value (after its type code): element type,
// count, then the element payloads.
func ggufArr(et uint32, n uint64, elems ...[]byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, et)
	b = binary.LittleEndian.AppendUint64(b, n)
	return append(b, bytes.Join(elems, nil)...)
}

func ggufKVFile(kvs ...ggufKV) []byte {
	b := binary.LittleEndian.AppendUint32([]byte("GGUF"), 3)
	b = binary.LittleEndian.AppendUint64(b, 0)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(kvs)))
	for _, kv := range kvs {
		b = append(b, ggufStr(kv.key)...)
		b = binary.LittleEndian.AppendUint32(b, kv.typ)
		b = append(b, kv.payload...)
	}
	return b
}

// TestGGUFSplitFileValueSource: a value left in the file by a part other
// than the first of a split model points at that part's source once the
// parts are merged.
func TestGGUFSplitFileValueSource(t *testing.T) {
	big := bytes.Repeat([]byte{7}, index.MaxInlineMetadata+1)
	dir := t.TempDir()
	p1 := ldWrite(t, dir, "m-00001-of-00002.gguf", ggufKVFile(ggufKV{"split.no", ggufTypeU16, u16(0)}, ggufKV{"split.count", ggufTypeU16, u16(2)}))
	p2 := ldWrite(t, dir, "m-00002-of-00002.gguf", ggufKVFile(ggufKV{"split.no", ggufTypeU16, u16(1)}, ggufKV{"split.count", ggufTypeU16, u16(2)}, ggufKV{"big", ggufTypeArray, ggufArr(ggufTypeU8, uint64(len(big)), big)}))
	idx, err := ldLoad(t, p1, nil)
	if err != nil {
		t.Fatal(err)
	}
	fv, ok := idx.Metadata["big"].(*index.FileValue)
	if !ok || fv.Source != 1 || idx.Sources[1] != p2 || fv.Size != int64(len(big)) {
		t.Fatalf("big = %#v, sources %v", idx.Metadata["big"], idx.Sources)
	}
}
