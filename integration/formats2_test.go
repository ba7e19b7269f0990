package integration

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/lazyweights/tensorfs/backing/s3/s3test"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// f2ONNXExternal is an ONNX model with one float32 [3] initializer "w"
// whose data is external, at location.
func f2ONNXExternal(location string) []byte {
	kv := protowire.AppendTag(nil, 1, protowire.BytesType)
	kv = protowire.AppendString(kv, "location")
	kv = protowire.AppendTag(kv, 2, protowire.BytesType)
	kv = protowire.AppendString(kv, location)
	tp := protowire.AppendTag(nil, 1, protowire.VarintType) // dims [3]
	tp = protowire.AppendVarint(tp, 3)
	tp = protowire.AppendTag(tp, 2, protowire.VarintType) // FLOAT
	tp = protowire.AppendVarint(tp, 1)
	tp = protowire.AppendTag(tp, 8, protowire.BytesType)
	tp = protowire.AppendString(tp, "w")
	tp = protowire.AppendTag(tp, 13, protowire.BytesType)
	tp = protowire.AppendBytes(tp, kv)
	tp = protowire.AppendTag(tp, 14, protowire.VarintType) // EXTERNAL
	tp = protowire.AppendVarint(tp, 1)
	g := protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), tp)
	m := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 8)
	return protowire.AppendBytes(protowire.AppendTag(m, 7, protowire.BytesType), g)
}

// TestFormats2Hostile: through the command line, an ONNX model whose
// external data leads out of its directory (.., an absolute path, a
// symbolic link out) or is cut short, an HDF5 file whose group B-tree
// loops, and one whose gzip chunk inflates to 2 MiB for a 12-byte chunk
// (a chunk bomb, read by `load`), each fail with one line naming the file
// (the time and peak memory of each are logged: `ls` reads structure
// only, `load` stops at the bomb's first byte over its chunk).
func TestFormats2Hostile(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(dir, "outside.bin")
	if err := os.WriteFile(outside, make([]byte, 12), 0o644); err != nil {
		t.Fatal(err)
	}
	type hostile struct {
		name, src string
		cmd       string
		want      string
	}
	var cases []hostile
	for _, c := range []struct{ name, location, want string }{
		{"onnx-dotdot", "../outside.bin", "leads out of the checkpoint's directory"},
		{"onnx-absolute", "/etc/passwd", "absolute path"},
		{"onnx-symlink", "link.bin", "symbolic link out of the checkpoint's directory"},
		{"onnx-truncated", "short.bin", "past the end of short.bin (8 bytes)"},
	} {
		d := filepath.Join(dir, c.name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "model.onnx"), f2ONNXExternal(c.location), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Symlink(outside, filepath.Join(d, "link.bin"))
		os.WriteFile(filepath.Join(d, "short.bin"), make([]byte, 8), 0o644)
		cases = append(cases, hostile{c.name, filepath.Join(d, "model.onnx"), "ls", c.want})
	}
	h5dir := testenv.Path(t, "formats2")
	mlp, err := os.ReadFile(filepath.Join(h5dir, "keras_mlp.weights.h5"))
	if err != nil {
		t.Fatal(err)
	}
	// A looping group B-tree: its first node claims level 1 and names
	// itself as its first child.
	node := bytes.Index(mlp, []byte("TREE\x00"))
	loop := bytes.Clone(mlp)
	loop[node+5] = 1
	binary.LittleEndian.PutUint64(loop[node+24+8:], uint64(node))
	p := filepath.Join(dir, "loop.weights.h5")
	os.WriteFile(p, loop, 0o644)
	cases = append(cases, hostile{"h5-loop", p, "ls", "reached twice (a loop)"})
	// A chunk bomb: the first chunk of a one-dimensional gzip dataset
	// (its chunk B-tree key is size, mask and two offsets, then the
	// chunk's address) points at 2 MiB of zeros deflated, appended.
	gz, err := os.ReadFile(filepath.Join(h5dir, "keras_gzip.weights.h5"))
	if err != nil {
		t.Fatal(err)
	}
	var zb bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&zb, zlib.BestCompression)
	zw.Write(make([]byte, 2<<20))
	zw.Close()
	bomb := bytes.Clone(gz)
	found := false
	for i := 0; !found; {
		j := bytes.Index(gz[i:], []byte("TREE\x01\x00"))
		if j < 0 {
			break
		}
		n := i + j
		i = n + 4
		key := n + 24
		// A one-dimensional dataset's first key: offsets 0 and 0, then
		// the address of a zlib stream (0x78).
		if a := binary.LittleEndian.Uint64(gz[key+24:]); gz[n+5] == 0 && a > 0 && a < uint64(len(gz)) && gz[a] == 0x78 &&
			binary.LittleEndian.Uint64(gz[key+8:]) == 0 && binary.LittleEndian.Uint64(gz[key+16:]) == 0 {
			binary.LittleEndian.PutUint32(bomb[key:], uint32(zb.Len()))
			binary.LittleEndian.PutUint64(bomb[key+24:], uint64(len(gz)))
			found = true
		}
	}
	if !found {
		t.Fatal("no chunk B-tree node of a one-dimensional dataset in keras_gzip.weights.h5")
	}
	p = filepath.Join(dir, "bomb.weights.h5")
	os.WriteFile(p, append(bomb, zb.Bytes()...), 0o644)
	cases = append(cases, hostile{"h5-chunk-bomb", p, "load", "inflates to more than its 12 bytes"})

	for _, c := range cases {
		start := time.Now()
		args := []string{c.cmd, c.src}
		if c.cmd == "load" {
			args = []string{"load", "--quiet", c.src}
		}
		r := runTensorfs(t, args...)
		t.Logf("%s: %s exit %d in %v: %s", c.name, c.cmd, r.code, time.Since(start).Round(time.Millisecond), strings.TrimSpace(r.stderr))
		lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
		if r.code == 0 || len(lines) != 1 || !strings.Contains(r.stderr, c.want) || !strings.Contains(r.stderr, filepath.Base(c.src)) {
			t.Errorf("%s: %s: exit %d, stderr %q; want one line naming the file with %q", c.name, c.cmd, r.code, r.stderr, c.want)
		}
	}
}

// TestFormats2RemoteS3: an ONNX model with one external data file per
// tensor, under an S3 prefix, loads as the local directory does: the
// files its initializers name are opened beside it in the bucket.
func TestFormats2RemoteS3(t *testing.T) {
	local := filepath.Join(testenv.Path(t, "formats2"), "onnx_ext_each")
	srv := s3test.Start(t)
	srv.Bucket(t, "ckpt")
	ents, err := os.ReadDir(local)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		srv.PutFile(t, "ckpt", "onnx/"+e.Name(), filepath.Join(local, e.Name()))
	}
	env := srv.Env()
	want := runEnv(t, env, "load", "--quiet", "--sha256", filepath.Join(local, "model.onnx"))
	for _, src := range []string{"s3://ckpt/onnx/model.onnx", "s3://ckpt/onnx/"} {
		got := runEnv(t, env, "load", "--quiet", "--sha256", "--part-size", "8KiB", src)
		if want.code != 0 || got.code != 0 || got.stdout != want.stdout {
			t.Fatalf("load --sha256 %s: exit %d %s\nwant:\n%s\ngot:\n%s", src, got.code, got.stderr, want.stdout, got.stdout)
		}
	}
}

// TestFormats2DCPZstdBudget: a zstd item's storage is decoded within the
// inflate budgets: one that cannot fit --inflate-disk refuses the
// checkpoint in one line naming its .distcp and item.
func TestFormats2DCPZstdBudget(t *testing.T) {
	src := testenv.Path(t, "formats2/dcp_zstd_ws2")
	r := runTensorfs(t, "load", "--quiet", "--inflate-mem", "1KiB", "--inflate-disk", "1KiB", src)
	msg := strings.TrimSpace(r.stderr)
	if r.code == 0 || strings.Contains(msg, "\n") || !strings.Contains(msg, ".distcp") || !strings.Contains(msg, "--inflate-disk") || !strings.Contains(msg, "item at byte") {
		t.Fatalf("exit %d: %q", r.code, msg)
	}
}
