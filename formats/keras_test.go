package formats

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// TestKerasDeflated: a .keras zip whose model.weights.h5 is deflated
// (contiguous and gzip-chunked datasets) loads byte-exact, the member
// inflated once for parsing and serving both, within the cache's
// budgets; ParseFile reads it alone too.
func TestKerasDeflated(t *testing.T) {
	dir := testenv.Path(t, "formats2")
	data, err := os.ReadFile(filepath.Join(dir, "EXPECTED.json"))
	if err != nil {
		t.Fatal(err)
	}
	var exp expected2
	if err := json.Unmarshal(data, &exp); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"keras_mlp.weights.h5", "keras_gzip.weights.h5"} {
		h5, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		p := kerasZip(t, h5, zip.Deflate)
		cache := backing.NewInflateCache(backing.InflateOptions{Dir: t.TempDir(), Logf: t.Logf})
		idx, files, err := Load(p, openDCP, Options{Inflate: cache})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := cache.Stats().Inflations; got != 1 {
			t.Errorf("%s: %d members inflated by loading, want 1 (the weights, parsed and served from one source)", name, got)
		}
		c := exp.Cases[name]
		if len(idx.Tensors) != len(c.Tensors) || idx.Format != "keras" {
			t.Errorf("%s: %s with %d tensors, want keras with %d", name, idx.Format, len(idx.Tensors), len(c.Tensors))
		}
		for _, want := range c.Tensors {
			i := slices.IndexFunc(idx.Tensors, func(x index.Tensor) bool { return x.Name == want.Name })
			if i < 0 {
				t.Errorf("%s: no %s", name, want.Name)
				continue
			}
			tn := idx.Tensors[i]
			buf := make([]byte, tn.Size)
			if n, err := files[tn.Source].ReadAt(buf, tn.Offset); int64(n) != tn.Size {
				t.Errorf("%s %s: read %d of %d: %v", name, want.Name, n, tn.Size, err)
			}
			if sum := sha256.Sum256(buf); bytes.Compare(sum[:], mustHex(t, want.SHA256)) != 0 {
				t.Errorf("%s %s: sha256 %x, want %s", name, want.Name, sum, want.SHA256)
			}
		}
		if got := idx.SourceName(1); got != p+":model.weights.h5" {
			t.Errorf("%s: source 1 is %q", name, got)
		}
		closeAll(files)
		if st := cache.Stats(); st.MemBytes != 0 || st.DiskBytes != 0 {
			t.Errorf("%s: the cache holds %d bytes in memory and %d on disk after the files are closed", name, st.MemBytes, st.DiskBytes)
		}

		f, err := openDCP(p)
		if err != nil {
			t.Fatal(err)
		}
		alone, err := ParseFile(f)
		f.(io.Closer).Close()
		if err != nil || len(alone.Tensors) != len(c.Tensors) {
			t.Errorf("%s: ParseFile: %v", name, err)
		}
	}
}

// TestKerasDeflatedHostile: a deflated model.weights.h5 that is bad is
// refused in one line naming the file and member, within the cache's
// budgets: a CRC-32 mismatch, a member cut short, a bomb (more bytes
// than the zip's directory declares), a member over the disk budget,
// and a member that is no HDF5 file.
func TestKerasDeflatedHostile(t *testing.T) {
	h5, err := os.ReadFile(filepath.Join(testenv.Path(t, "formats2"), "keras_mlp.weights.h5"))
	if err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(kerasZip(t, h5, zip.Deflate))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(good), int64(len(good)))
	if err != nil {
		t.Fatal(err)
	}
	zf := zr.File[2]
	// The weights' central directory entry: CRC-32 at +16, sizes at +20
	// and +24 of its header, the name at +46.
	weightsCD := -1
	for i := 0; i+46 < len(good); i++ {
		if string(good[i:i+4]) == "PK\x01\x02" && string(good[i+46:min(len(good), i+46+len("model.weights.h5"))]) == "model.weights.h5" {
			weightsCD = i
		}
	}
	if weightsCD < 0 {
		t.Fatal("no central directory entry for model.weights.h5")
	}
	patch := func(at int, v uint32) []byte {
		b := slices.Clone(good)
		binary.LittleEndian.PutUint32(b[at:], v)
		return b
	}
	// Bombs: 16 MiB of zeros declared as the member's size, after an
	// HDF5 file (h5Bomb) or not (zerosBomb).
	zeros := make([]byte, 16<<20)
	bombZip := func(data []byte) []byte {
		var b bytes.Buffer
		zw := zip.NewWriter(&b)
		for _, m := range []struct {
			name string
			data []byte
		}{{"metadata.json", []byte("{}")}, {"model.weights.h5", data}} {
			w, _ := zw.CreateHeader(&zip.FileHeader{Name: m.name, Method: zip.Deflate})
			w.Write(m.data)
		}
		zw.Close()
		return b.Bytes()
	}
	zerosBomb := bombZip(zeros)
	copy(zeros, h5) // a real HDF5 file, then zeros: its superblock holds
	h5Bomb := bombZip(zeros)
	bombCD := bytes.LastIndex(h5Bomb, []byte("PK\x01\x02"))
	small := slices.Clone(h5Bomb) // declares 1 MiB, inflates to 16
	binary.LittleEndian.PutUint32(small[bombCD+24:], 1<<20)
	binary.LittleEndian.PutUint32(small[bombCD+16:], crc32.ChecksumIEEE(zeros[:1<<20]))

	cases := []struct {
		name string
		data []byte
		disk int64
		want []string
	}{
		{"crc", patch(weightsCD+16, zf.CRC32^1), 0, []string{"model.weights.h5", "CRC-32"}},
		{"longer", patch(weightsCD+24, uint32(zf.UncompressedSize64)+100), 0, []string{"model.weights.h5", "inflates to"}},
		{"cut", patch(weightsCD+20, uint32(zf.CompressedSize64/2)), 0, []string{"model.weights.h5", "the deflate data ends early"}},
		{"bomb-declared-small", small, 0, []string{"model.weights.h5", "inflates to more than the 1048576 bytes the zip directory declares"}},
		{"bomb-over-disk", h5Bomb, 4 << 20, []string{"model.weights.h5", "inflates to 16777216 bytes, more than the 4194304 bytes of disk"}},
		{"not-hdf5", zerosBomb, 0, []string{"model.keras:model.weights.h5", "HDF5: not an HDF5 file"}}, // 16 MiB of zeros: 8 bytes inflated
		{"ratio", patch(weightsCD+24, uint32(zf.CompressedSize64)*1032+1000), 0, []string{"model.weights.h5", "more than deflate can produce"}},
	}
	for _, c := range cases {
		p := filepath.Join(t.TempDir(), "model.keras")
		if err := os.WriteFile(p, c.data, 0o644); err != nil {
			t.Fatal(err)
		}
		cache := backing.NewInflateCache(backing.InflateOptions{Dir: t.TempDir(), MemLimit: 8 << 20, DiskLimit: c.disk, Logf: t.Logf})
		_, _, err := Load(p, openDCP, Options{Inflate: cache})
		if err == nil {
			t.Errorf("%s: loaded", c.name)
			continue
		}
		msg := err.Error()
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %v, want %q", c.name, err, w)
			}
		}
		if strings.Contains(msg, "\n") || !strings.Contains(msg, p) {
			t.Errorf("%s: %q is not one line naming the file", c.name, msg)
		}
		if st := cache.Stats(); st.MemBytes != 0 || st.DiskBytes != 0 {
			t.Errorf("%s: the cache holds %d bytes in memory and %d on disk after a refused load", c.name, st.MemBytes, st.DiskBytes)
		}
		if st := cache.Stats(); c.name == "not-hdf5" && st.Inflations != 0 {
			t.Errorf("not-hdf5: %d members inflated, want none (the signature is checked first)", st.Inflations)
		}
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	var b [32]byte
	if _, err := hex.Decode(b[:], []byte(s)); err != nil {
		t.Fatal(err)
	}
	return b[:]
}

// TestZipLocalHeaders: every zip tensorfs reads gets the local-header
// check the .npz had (index.OpenZip): a .keras whose model.weights.h5's
// local header names another member than the central directory (Python's
// zipfile, so keras, refuses it; issue 41) is one line, stored or
// deflated, and so is such a torch.save zip.
func TestZipLocalHeaders(t *testing.T) {
	h5, err := os.ReadFile(filepath.Join(testenv.Path(t, "formats2"), "keras_mlp.weights.h5"))
	if err != nil {
		t.Fatal(err)
	}
	// rename changes the name in the local header of member name.
	rename := func(b []byte, name, to string) {
		t.Helper()
		for i := 0; i+30+len(name) <= len(b); i++ {
			if string(b[i:i+4]) == "PK\x03\x04" && string(b[i+30:i+30+len(name)]) == name {
				copy(b[i+30:], to)
				return
			}
		}
		t.Fatalf("no local header for %s", name)
	}
	var files []string
	for _, method := range []uint16{zip.Store, zip.Deflate} {
		p := kerasZip(t, h5, method)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rename(b, "model.weights.h5", "model.weightz.h5")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	var pt bytes.Buffer
	zw := zip.NewWriter(&pt)
	for _, name := range []string{"archive/data.pkl", "archive/version"} {
		w, _ := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
		w.Write([]byte("\x80\x02}q\x00.")) // an empty dict
	}
	zw.Close()
	b := pt.Bytes()
	rename(b, "archive/version", "archive/versioN")
	p := filepath.Join(t.TempDir(), "m.pt")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	files = append(files, p)
	for _, p := range files {
		cache := backing.NewInflateCache(backing.InflateOptions{Dir: t.TempDir(), Logf: t.Logf})
		_, files, err := Load(p, openDCP, Options{Inflate: cache})
		closeAll(files)
		if err == nil || !strings.Contains(err.Error(), "its local header names it") || !strings.Contains(err.Error(), p) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line naming the file and the local header", filepath.Base(p), err)
		}
	}
}
