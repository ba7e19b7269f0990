package client

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/backing/remote"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/source"
)

// TestWriteSafetensorsStreamsRemote: convert of a remote checkpoint
// (WriteSafetensors with its Parallel readers) tells each tensor's
// range to its source and reads it in order, so that each tensor of
// many parts costs the server one GET (a flow), not one per part or
// readahead window: a model of 3 tensors of 48 parts each (and small
// ones between them) costs at most one GET per tensor besides the
// GETs that open it. The bytes are those of the same file read from
// disk, as stored and converted (F16 to F32), and after a reply cut
// mid-body (one GET more, from where it was cut).
func TestWriteSafetensorsStreamsRemote(t *testing.T) {
	const ps = 128 << 10
	dir := tempDir(t)
	writeSafetensors(t, filepath.Join(dir, "m.safetensors"), nil, []stTensor{
		{"a", "F32", []int64{12 * ps}, randomBytes(1, 48*ps)},
		{"b", "U8", []int64{5}, randomBytes(2, 5)},
		{"c", "F16", []int64{24 * ps}, randomBytes(3, 48*ps)},
		{"d", "I64", []int64{3}, randomBytes(4, 24)},
		{"e", "U8", []int64{48*ps + 3}, randomBytes(5, 48*ps+3)},
	})
	srv, taken, cut := rangeServer(t, filepath.Join(dir, "m.safetensors"), ps)
	defer srv.Close()
	for _, tc := range []struct {
		to  dtype.DType
		cut bool
	}{{AsStored, false}, {dtype.F32, false}, {AsStored, true}} {
		to := tc.to
		local, err := Open(filepath.Join(dir, "m.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if _, err := local.WriteSafetensors(context.Background(), &want, SafetensorsOptions{DType: to}); err != nil {
			t.Fatal(err)
		}
		local.Close()

		ck, err := OpenWith(srv.URL+"/m.safetensors", Options{Remote: &source.RemoteOptions{Remote: remote.Options{PartSize: ps}}})
		if err != nil {
			t.Fatal(err)
		}
		opened := taken()
		cut.Store(tc.cut)
		out, err := os.Create(filepath.Join(t.TempDir(), "out.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		// Chunks of 64 KiB, 4 read at once: 96 reads of each big tensor.
		_, err = ck.WriteSafetensors(context.Background(), out, SafetensorsOptions{DType: to, ChunkSize: 64 << 10, Parallel: 4})
		ck.Close()
		got, _ := os.ReadFile(out.Name())
		out.Close()
		if err != nil || !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("%v (cut %v): %v; the bytes equal the local file's: %v", to, tc.cut, err, bytes.Equal(got, want.Bytes()))
		}
		gets := 5
		if tc.cut {
			gets++ // the cut reply's resumption
			if cut.Load() {
				t.Fatal("no reply was cut")
			}
		}
		if g := taken(); len(g) > gets {
			t.Errorf("%v: 5 tensors, 3 of 48 parts each, cost %d GETs after the %d that opened the file (%s); want %d", to, len(g), len(opened), strings.Join(g, " "), gets)
		}
	}
}
