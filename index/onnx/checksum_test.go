package onnx

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/index"
)

// TestExternalChecksum: external_data's "checksum" (SHA-1 in hex) is the
// tensor's index.Check over exactly its bytes, which Verify accepts
// intact and refuses, naming both digests, when a byte differs; a
// checksum that is not SHA-1 hex is a note, the tensor unchecked.
func TestExternalChecksum(t *testing.T) {
	data := f32s(1, 2, 3)
	sum := sha1.Sum(data)
	kv := func(k, v string) msg { return msg(nil).str(1, k).str(2, v) }
	for _, c := range []struct {
		name, checksum string
		checked        bool
	}{{"right", hex.EncodeToString(sum[:]), true}, {"upper", strings.ToUpper(hex.EncodeToString(sum[:])), true}, {"bad", "not-a-digest", false}} {
		more := msg(nil).bytes(tensorExternalData, kv("location", "w.bin")).bytes(tensorExternalData, kv("offset", "4")).
			bytes(tensorExternalData, kv("checksum", c.checksum)).varint(tensorDataLocation, 1)
		m := model(msg(nil).bytes(graphInitializer, tensor("w", 1, []int64{3}, more)), nil)
		file := append([]byte("pad!"), data...)
		open := func(rel string) (index.File, error) { return mem(rel, file), nil }
		idx, err := ParseSiblings(mem("model.onnx", m), open)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		tn := idx.Tensors[0]
		if !c.checked {
			if tn.Check != nil || len(idx.Notes) != 1 || !strings.Contains(idx.Notes[0], "not a SHA-1") {
				t.Errorf("%s: check %+v, notes %q", c.name, tn.Check, idx.Notes)
			}
			continue
		}
		if tn.Check == nil || !tn.Check.IsSHA1() || tn.Check.Offset != 4 || tn.Check.Size != 12 {
			t.Fatalf("%s: check %+v", c.name, tn.Check)
		}
		if err := tn.Verify(mem("w.bin", file)); err != nil {
			t.Errorf("%s: intact: %v", c.name, err)
		}
		flipped := append([]byte(nil), file...)
		flipped[9] ^= 1
		err = tn.Verify(mem("w.bin", flipped))
		if err == nil || !strings.Contains(err.Error(), "SHA-1 mismatch") || !strings.Contains(err.Error(), hex.EncodeToString(sum[:])) || !strings.Contains(err.Error(), "w.bin") {
			t.Errorf("%s: flipped: %v", c.name, err)
		}
		cs := index.NewCheckStream(&tn, mem("w.bin", flipped))
		cs.Write(flipped[4:10], 0)
		cs.Write(flipped[10:], 6)
		if err := cs.Done(); err == nil || !strings.Contains(err.Error(), "SHA-1 mismatch") {
			t.Errorf("%s: streamed, flipped: %v", c.name, err)
		}
		cs = index.NewCheckStream(&tn, mem("w.bin", file))
		cs.Write(file[4:], 0)
		if err := cs.Done(); err != nil {
			t.Errorf("%s: streamed, intact: %v", c.name, err)
		}
	}
}
