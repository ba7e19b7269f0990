package oci

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/backing/remote"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// gz is data gzipped in parts members end to end (gzip's multi-member
// form), each member's header with modification time mtime.
func gz(t *testing.T, data []byte, parts int, mtime time.Time) []byte {
	t.Helper()
	var b bytes.Buffer
	step := (len(data) + parts - 1) / parts
	for i := 0; i < len(data) || i == 0; i += max(step, 1) {
		w := gzip.NewWriter(&b)
		w.ModTime = mtime
		if _, err := w.Write(data[i:min(i+step, len(data))]); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if step == 0 {
			break
		}
	}
	return b.Bytes()
}

func zst(t *testing.T, data []byte) []byte {
	t.Helper()
	e, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	return e.EncodeAll(data, nil)
}

// smallCache is an inflate cache of its own (its counts are the test's),
// with at most disk bytes on disk.
func smallCache(t *testing.T, disk int64) *backing.InflateCache {
	return backing.NewInflateCache(backing.InflateOptions{MemLimit: 1 << 20, DiskLimit: disk, Dir: t.TempDir(), Logf: t.Logf})
}

// TestCompressedTar: a .tar+gzip (of several gzip members) and a
// .tar+zstd layer's regular files are the artifact's files; the layer
// is decoded once, at Open, to list them and into the inflate cache,
// and every read is served from the cache (no blob GET after Open).
func TestCompressedTar(t *testing.T) {
	noAuthFiles(t)
	big := strings.Repeat("w", 300000) // past the cache's memory quarter: a file
	tb := tarOf(t, "m/", "", "m/model.safetensors", big+"END", "./m/config.json", `{"a":1}`)
	for _, c := range []struct {
		mt   string
		blob []byte
	}{
		{MediaWeightTarGzip, gz(t, tb, 3, time.Time{})},
		{MediaWeightTarZstd, zst(t, tb)},
	} {
		f, src := newFake(t)
		l := layer(c.mt, c.blob, "m")
		f.push("t", []Descriptor{l}, map[string][]byte{l.Digest: c.blob})
		blobGets := 0
		f.hook = func(w http.ResponseWriter, r *http.Request) bool {
			if strings.Contains(r.URL.Path, "/blobs/") {
				blobGets++
			}
			return false
		}
		cache := smallCache(t, 1<<30)
		s, key, err := Open(context.Background(), src+":t", Options{Inflate: cache})
		if err != nil {
			t.Fatalf("%s: %v", c.mt, err)
		}
		atOpen := blobGets
		if key != "m/" || strings.Join(s.Files(), ",") != "m/config.json,m/model.safetensors" {
			t.Fatalf("%s: key %q files %v", c.mt, key, s.Files())
		}
		if _, ok := s.SHA256("m/config.json"); ok {
			t.Errorf("%s: a tar member states a digest (its layer's is the tar's)", c.mt)
		}
		if st := cache.Stats(); st.Inflations != 1 || st.DiskBytes != int64(len(tb)) {
			t.Errorf("%s: not decoded into the cache at Open, into a file of its %d bytes: %+v", c.mt, len(tb), st)
		}
		head := make([]byte, 16)
		obj, n, err := s.Open(context.Background(), "m/config.json", head)
		if err != nil || n != 7 || string(head[:n]) != `{"a":1}` || obj.Size != 7 {
			t.Fatalf("%s: Open: %v %d %q %v", c.mt, obj, n, head[:n], err)
		}
		obj, _, err = s.Open(context.Background(), "m/model.safetensors", head)
		if err != nil || obj.Size != int64(len(big)+3) || string(head) != big[:16] {
			t.Fatalf("%s: Open: %v %q %v", c.mt, obj, head, err)
		}
		a, b := make([]byte, 4), make([]byte, 3)
		if err := s.Get(context.Background(), obj, int64(len(big))-4, [][]byte{a, b}, nil); err != nil || string(a)+string(b) != "wwwwEND" {
			t.Fatalf("%s: Get: %q %q %v", c.mt, a, b, err)
		}
		if err := s.Get(context.Background(), obj, int64(len(big)), [][]byte{make([]byte, 4)}, nil); err == nil {
			t.Errorf("%s: a Get past the file's end succeeded", c.mt)
		}
		ents, _, _ := s.List(context.Background(), "m/")
		if len(ents) != 2 || ents[0].Size != 7 || ents[1].Size != int64(len(big)+3) {
			t.Errorf("%s: List: %v", c.mt, ents)
		}
		if st := cache.Stats(); st.Inflations != 1 || st.DiskBytes != int64(len(tb)) || blobGets != atOpen {
			t.Errorf("%s: the layer was decoded again (%+v) or its blob read again (%d GETs, %d at Open)", c.mt, st, blobGets, atOpen)
		}
		s.Close()
		if st := cache.Stats(); st.DiskBytes != 0 {
			t.Errorf("%s: Close left %d bytes in the cache", c.mt, st.DiskBytes)
		}
	}
}

// TestCompressedTarHostile: each bad compressed tar layer is refused at
// Open in one line naming the artifact, the layer and the problem.
func TestCompressedTarHostile(t *testing.T) {
	noAuthFiles(t)
	f, src := newFake(t)
	tb := tarOf(t, "a", "weights")
	good := gz(t, tb, 1, time.Time{})
	corrupt := append([]byte(nil), good...)
	corrupt[10] |= 0x06 // the first deflate block's type: 11, reserved
	badCRC := append([]byte(nil), good...)
	badCRC[len(badCRC)-5] ^= 0xff // the gzip trailer's CRC-32
	long := tarOf(t, "a", strings.Repeat("w", 2000))
	zcorrupt := zst(t, tb)
	zcorrupt[len(zcorrupt)/2] ^= 0xff
	cases := []struct {
		name, want string
		mt         string
		blob       []byte
		served     []byte // served under the layer's digest (nil: blob)
		cache      *backing.InflateCache
	}{
		{"dotdot", `tar entry "../x" escapes the tree (..)`, MediaWeightTarGzip, gz(t, tarOf(t, "../x", "a"), 1, time.Time{}), nil, nil},
		{"absolute", `tar entry "/etc/x" is absolute`, MediaWeightTarZstd, zst(t, tarOf(t, "/etc/x", "a")), nil, nil},
		{"link", `tar entry "x" is not a regular file or directory`, MediaWeightTarZstd, zst(t, tarOf(t, "x", "->/etc/passwd")), nil, nil},
		{"twice", `tar entry "x" is there twice`, MediaWeightTarGzip, gz(t, tarOf(t, "x", "a", "./x", "b"), 1, time.Time{}), nil, nil},
		{"raw's path", `tar entry "raw" of layer`, MediaWeightTarGzip, gz(t, tarOf(t, "raw", "a"), 1, time.Time{}), nil, nil},
		{"truncated gzip", "the gzip stream ends early", MediaWeightTarGzip, good[:len(good)-12], nil, nil},
		{"truncated zstd", "the zstd stream ", MediaWeightTarZstd, zst(t, tb)[:len(zst(t, tb))-9], nil, nil},
		{"truncated tar", "the tar ends early, inside an entry or its header (1000 decoded bytes)", MediaWeightTarGzip, gz(t, long[:1000], 1, time.Time{}), nil, nil},
		{"corrupt gzip", "the gzip stream is corrupt after 0 decoded bytes (", MediaWeightTarGzip, corrupt, nil, nil},
		{"gzip checksum", "the gzip stream is corrupt after 2048 decoded bytes (", MediaWeightTarGzip, badCRC, nil, nil},
		{"corrupt zstd", "the zstd stream is corrupt", MediaWeightTarZstd, zcorrupt, nil, nil},
		{"not gzip", "the gzip stream is corrupt after 0 decoded bytes", MediaWeightTarGzip, tb, nil, nil},
		{"digest", "the sha256 of its " + strconv.Itoa(len(good)) + " compressed bytes is " + digestOf(gz(t, tb, 1, time.Unix(1e9, 0)))[7:] + ", not its digest " + digestOf(good), MediaWeightTarGzip, good, gz(t, tb, 1, time.Unix(1e9, 0)), nil},
		{"bomb", "decodes to more than the 1048576 bytes of disk the cache of inflated members may use (tensorfs --inflate-disk)", MediaWeightTarZstd, zst(t, tarOf(t, "big", strings.Repeat("\x00", 8<<20))), nil, smallCache(t, 1<<20)},
	}
	for _, c := range cases {
		l := layer(c.mt, c.blob, "")
		raw := layer(MediaConfigRaw, []byte("r"), "raw")
		served := c.blob
		if c.served != nil {
			served = c.served
		}
		f.push("bad", []Descriptor{l, raw}, map[string][]byte{l.Digest: served, raw.Digest: []byte("r")})
		cache := c.cache
		if cache == nil {
			cache = smallCache(t, 1<<30)
		}
		_, _, err := Open(context.Background(), src+":bad", Options{Inflate: cache})
		if st := cache.Stats(); st.DiskBytes != 0 || st.MemBytes != 0 {
			t.Errorf("%s: the refused layer holds %+v of the cache", c.name, st)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "tar layer 0 ("+c.mt+")") && !strings.Contains(err.Error(), "of layer "+l.Digest) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line naming the layer holding %q", c.name, err, c.want)
		}
	}
}

// TestCompressedTarChanged: a layer the cache dropped is decoded again
// on its next read, from the registry, and checked again: the same
// bytes read back; a registry that serves other compressed bytes of the
// same size under the layer's digest by then (the same tar, gzipped
// with another header) fails the reads in one line naming the file, the
// layer and both digests, and no bytes of it are served. Layers are
// dropped for room when idle (not read for inflateIdle, 200 ms): the
// test sleeps past that, asserting nothing about time.
func TestCompressedTarChanged(t *testing.T) {
	noAuthFiles(t)
	f, src := newFake(t)
	tb := tarOf(t, "model.safetensors", "weights")                 // 2048 bytes decoded
	tb2 := tarOf(t, "model.safetensors", strings.Repeat("x", 600)) // 2560
	blob, other, blob2 := gz(t, tb, 1, time.Time{}), gz(t, tb, 1, time.Unix(1e9, 0)), gz(t, tb2, 1, time.Time{})
	l, l2 := layer(MediaWeightTarGzip, blob, ""), layer(MediaWeightTarGzip, blob2, "")
	f.push("a", []Descriptor{l}, map[string][]byte{l.Digest: blob})
	f.push("b", []Descriptor{l2}, map[string][]byte{l2.Digest: blob2})
	var logged []string
	// Nothing in memory; room on disk for one of the two layers.
	cache := backing.NewInflateCache(backing.InflateOptions{MemLimit: -1, DiskLimit: 4096, Dir: t.TempDir(), Logf: func(format string, args ...any) {
		logged = append(logged, fmt.Sprintf(format, args...))
	}})
	sa, _, err := Open(context.Background(), src+":a", Options{Inflate: cache})
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Close()
	head := make([]byte, 7)
	open := func(s *Store) error {
		_, _, err := s.Open(context.Background(), "model.safetensors", head)
		return err
	}
	time.Sleep(300 * time.Millisecond) // a idle: b's decode drops it
	sb, _, err := Open(context.Background(), src+":b", Options{Inflate: cache})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if st := cache.Stats(); st.Drops != 1 {
		t.Fatalf("a not dropped for b: %+v", st)
	}
	if err := open(sa); err != nil || string(head) != "weights" {
		t.Fatalf("a decoded again: %q %v", head, err)
	}
	time.Sleep(300 * time.Millisecond) // a idle: b's decode drops it again
	if err := open(sb); err != nil || string(head) != "xxxxxxx" {
		t.Fatalf("b decoded again: %q %v", head, err)
	}
	if st := cache.Stats(); st.Drops != 3 || st.Inflations != 4 {
		t.Fatalf("want 3 drops, 4 decodes: %+v", st)
	}
	f.blobs[l.Digest] = other
	want := "layer " + l.Digest + ": the sha256 of its " + strconv.Itoa(len(blob)) + " compressed bytes is " + digestOf(other)[7:] + ", not its digest " + l.Digest
	for i := 0; i < 2; i++ {
		err := open(sa)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), sa.URL("model.safetensors")+": ") || strings.Contains(err.Error(), "\n") || remote.KindOf(err) != remote.Invalid {
			t.Fatalf("read %d: %v (kind %v), want one line naming the file holding %q", i, err, remote.KindOf(err), want)
		}
	}
	if len(logged) != 1 || !strings.Contains(logged[0], "its reads fail with EIO") {
		t.Errorf("logged %q, want the bad layer once", logged)
	}
}

// TestRealRegistryCompressedTar: Debian's docker-registry serves a
// ModelPack artifact of a .tar+zstd weight layer (several MiB: many
// ranged GETs) and a .tar+gzip config layer pushed with its HTTP API;
// their files read back as the bytes tarred, each layer decoded once.
func TestRealRegistryCompressedTar(t *testing.T) {
	reg := testenv.StartRegistry(t) // before noAuthFiles: docker-registry reads REGISTRY_* as its config
	noAuthFiles(t)
	w := randomish(5 << 20)
	wt := tarOf(t, "model.safetensors", string(w))
	ct := tarOf(t, "config.json", `{"architectures":["Test"]}`, "tokenizer/", "", "tokenizer/tokenizer.json", `{"v":1}`)
	cfg := testenv.PushBlob(t, reg.Host, "m", "application/vnd.cncf.model.config.v1+json", []byte("{}"), nil)
	wl := testenv.PushBlob(t, reg.Host, "m", MediaWeightTarZstd, zst(t, wt), nil)
	cl := testenv.PushBlob(t, reg.Host, "m", MediaConfigTarGzip, gz(t, ct, 2, time.Time{}), nil)
	testenv.PushManifest(t, reg.Host, "m", "t", "", cfg, []testenv.OCIDescriptor{wl, cl})
	cache := backing.NewInflateCache(backing.InflateOptions{Dir: t.TempDir(), Logf: t.Logf})
	s, key, err := Open(context.Background(), "oci://"+reg.Host+"/m:t", Options{Inflate: cache})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if key != "" || strings.Join(s.Files(), ",") != "config.json,model.safetensors,tokenizer/tokenizer.json" {
		t.Fatalf("key %q files %v", key, s.Files())
	}
	for name, want := range map[string][]byte{"model.safetensors": w, "config.json": []byte(`{"architectures":["Test"]}`), "tokenizer/tokenizer.json": []byte(`{"v":1}`)} {
		obj, _, err := s.Open(context.Background(), name, nil)
		if err != nil || obj.Size != int64(len(want)) {
			t.Fatalf("%s: %v %v", name, obj, err)
		}
		got := make([]byte, len(want))
		if err := s.Get(context.Background(), obj, 0, [][]byte{got}, nil); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %v; bytes equal %v", name, err, bytes.Equal(got, want))
		}
	}
	if st := cache.Stats(); st.Inflations != 2 {
		t.Errorf("decoded %d times, want once per layer", st.Inflations)
	}
}

// randomish is n bytes that compress, not trivially.
func randomish(n int) []byte {
	b := make([]byte, n)
	x := uint32(1)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x % 16)
	}
	return b
}

// TestCompressedTarOtherBytes: a registry serving a compressed tar
// layer's bytes with one changed mid-stream (same size, right digest)
// makes a decode that stops early — a corrupt stream, a tar header that
// is not one — and Open says what is wrong: the bytes' sha256 is not the
// layer's digest (the blob hashed to its end), not only the decode's
// error. A layer whose bytes are its digest's keeps its own error.
func TestCompressedTarOtherBytes(t *testing.T) {
	noAuthFiles(t)
	tb := tarOf(t, "model.safetensors", strings.Repeat("w", 5000), "config.json", "{}")
	for _, c := range []struct {
		mt   string
		blob []byte
	}{
		{MediaWeightTarGzip, gz(t, tb, 1, time.Time{})},
		{MediaWeightTarZstd, zst(t, tb)},
	} {
		f, src := newFake(t)
		l := layer(c.mt, c.blob, "")
		bad := append([]byte(nil), c.blob...)
		bad[len(bad)/2] ^= 0x01
		f.push("t", []Descriptor{l}, map[string][]byte{l.Digest: bad})
		_, _, err := Open(context.Background(), src+":t", Options{Inflate: smallCache(t, 1<<30)})
		want := "layer " + l.Digest + ": the sha256 of its " + strconv.Itoa(len(bad)) + " compressed bytes is " + digestOf(bad)[7:] + ", not its digest " + l.Digest
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line holding %q", c.mt, err, want)
		}
		// The same bytes under their own digest: the decode's error.
		l = layer(c.mt, bad, "")
		f.push("own", []Descriptor{l}, map[string][]byte{l.Digest: bad})
		_, _, err = Open(context.Background(), src+":own", Options{Inflate: smallCache(t, 1<<30)})
		if err == nil || strings.Contains(err.Error(), "sha256 of its") {
			t.Errorf("%s under its own digest: %v, want the decode's error", c.mt, err)
		}
	}
}
