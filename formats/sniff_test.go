package formats

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/internal/testenv"
	"github.com/lazyweights/tensorfs/internal/testenv/parsetest"
)

// pkSafetensors is a valid safetensors file whose 8-byte header length
// spells a zip's "PK\x03\x04" (67,324,752 bytes of header, under
// safetensors' cap): one F32 tensor "w" of 2 elements, the header padded
// with spaces. Its bytes are made on demand (ReadAt).
type pkSafetensors struct{}

const pkHeaderLen = 0x04034b50

var pkEntry = []byte(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}`)

func (pkSafetensors) Name() string { return "pk.safetensors" }
func (pkSafetensors) Size() int64  { return 8 + pkHeaderLen + 8 }
func (p pkSafetensors) ReadAt(b []byte, off int64) (int, error) {
	for i := range b {
		o := off + int64(i)
		switch {
		case o < 8:
			var n [8]byte
			binary.LittleEndian.PutUint64(n[:], pkHeaderLen)
			b[i] = n[o]
		case o-8 < int64(len(pkEntry)):
			b[i] = pkEntry[o-8]
		case o == 8+pkHeaderLen-1:
			b[i] = '}'
		case o < 8+pkHeaderLen:
			b[i] = ' '
		case o < p.Size():
			b[i] = byte(o - 8 - pkHeaderLen + 1)
		default:
			return i, os.ErrClosed
		}
	}
	return len(b), nil
}

// Sniffers that claim what is not theirs (issue 28): the zip formats'
// Sniff accepts a safetensors file whose header length spells
// "PK\x03\x04"; the file is read as the safetensors it is.
func TestSniffSafetensorsLookingLikeZip(t *testing.T) {
	var f pkSafetensors
	head := make([]byte, SniffLen)
	f.ReadAt(head, 0)
	if !bytes.HasPrefix(head, []byte("PK\x03\x04")) {
		t.Fatalf("head %q", head[:8])
	}
	idx, err := ParseFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if idx.Format != "safetensors" || len(idx.Tensors) != 1 || idx.Tensors[0].Name != "w" || idx.Tensors[0].Offset != 8+pkHeaderLen {
		t.Fatalf("%s %+v", idx.Format, idx.Tensors)
	}
}

// A torch.save zip whose root folder (the file's stem) is longer than
// the sniffed head was taken for an .npz, and a storage that happens to
// be a .npy was served as one bogus array with exit 0 (issue 28). The
// central directory decides: it has a data.pkl.
func TestSniffTorchLongStem(t *testing.T) {
	py := testenv.Python(t, "torch", "numpy")
	dir := t.TempDir()
	stem := "checkpoint_epoch_100_step_123456_loss_0_1234"
	script := `
import sys, io, numpy as np, torch
buf = io.BytesIO()
np.save(buf, np.arange(6, dtype="<f4"))
raw = buf.getvalue()
t = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
torch.save({"w": t}, sys.argv[1])
`
	path := filepath.Join(dir, stem+".pt")
	if out, err := exec.Command(py, "-c", script, path).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if first := string(b[30:min(len(b), SniffLen)]); strings.Contains(first, "/") {
		t.Fatalf("the stem is not past the head: %q", first)
	}
	idx, err := ParseFile(parsetest.Mem(path, b))
	if err != nil {
		t.Fatal(err)
	}
	// The tensor is the whole .npy (152 bytes of uint8), not the
	// array of 6 floats inside it.
	if idx.Format != "pytorch" || len(idx.Tensors) != 1 || idx.Tensors[0].Name != "w" || idx.Tensors[0].DType != dtype.U8 || idx.Tensors[0].Size != 152 {
		t.Fatalf("%s %+v", idx.Format, idx.Tensors)
	}
}
