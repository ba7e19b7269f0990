package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/backing/s3"
	"github.com/lazyweights/tensorfs/backing/s3/s3test"
	"github.com/lazyweights/tensorfs/client"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/internal/testenv"
	"github.com/lazyweights/tensorfs/source"
)

// runEnv runs the tensorfs binary with env added to the environment.
func runEnv(t testing.TB, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, tensorfsBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("tensorfs %s: still running after %v", shortArgs(args), cmdTimeout)
	}
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatal(err)
	}
	return r
}

// mountEnv mounts src with env added to the server's environment and
// waits until it is ready.
func mountEnv(t testing.TB, env []string, src string, flags ...string) *Mount {
	t.Helper()
	needFUSE(t)
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := &Mount{Dir: dir, Source: src, t: t, stderr: &syncBuffer{}, done: make(chan struct{})}
	m.cmd = exec.Command(tensorfsBinary(t), append(append([]string{"mount"}, flags...), src, dir)...)
	m.cmd.Env = append(os.Environ(), env...)
	m.cmd.Stdout, m.cmd.Stderr = m.stderr, m.stderr
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		m.err = m.cmd.Wait()
		close(m.done)
	}()
	t.Cleanup(m.cleanup)
	if err := m.waitReady(); err != nil {
		t.Fatal(err)
	}
	return m
}

// uploadTree puts every regular file under dir into bucket, keyed by its
// path relative to dir.
func uploadTree(t testing.TB, srv *s3test.Server, bucket, dir string) []string {
	t.Helper()
	var rels []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rels = append(rels, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, rel := range rels {
		wg.Add(1)
		sem <- struct{}{}
		go func(rel string) {
			defer wg.Done()
			defer func() { <-sem }()
			srv.PutFile(t, bucket, rel, filepath.Join(dir, filepath.FromSlash(rel)))
		}(rel)
	}
	wg.Wait()
	return rels
}

// fingerprint is what a checkpoint opened through the Go client holds:
// its tensors (name, dtype, shape, size, offset) and each one's sha256,
// or its error with the file's name taken out (and its directory's: an
// error may name a file beside it, as a distributed checkpoint's
// .metadata names its .distcp).
func fingerprint(path string, opts client.Options) string {
	ck, err := client.OpenWith(path, opts)
	if err != nil {
		msg := strings.ReplaceAll(err.Error(), path, "SOURCE")
		return "error: " + strings.ReplaceAll(msg, path[:strings.LastIndex(path, "/")+1], "DIR/")
	}
	defer ck.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "format %s\n", ck.Format())
	for _, ti := range ck.Tensors() {
		fmt.Fprintf(&b, "%q %s %v %d %d", ti.Name, ti.DType, ti.Shape, ti.Size, ti.Offset)
		r, err := ck.OpenTensor(ti.Name, dtype.Invalid)
		if err != nil {
			fmt.Fprintf(&b, " open error %v\n", strings.ReplaceAll(err.Error(), path, "SOURCE"))
			continue
		}
		h := sha256.New()
		_, err = io.Copy(h, io.NewSectionReader(r, 0, r.Size()))
		r.Close()
		if err != nil {
			fmt.Fprintf(&b, " read error %v\n", strings.ReplaceAll(err.Error(), path, "SOURCE"))
			continue
		}
		fmt.Fprintf(&b, " %x\n", h.Sum(nil))
	}
	return b.String()
}

// TestRemoteS3TestdataMatchesLocal reads every file of ../shared/testdata
// from versitygw through the Go client, and a few through the CLI (ls,
// load --sha256, cat): the tensors, their bytes and the errors are the
// local file's.
func TestRemoteS3TestdataMatchesLocal(t *testing.T) {
	dir := testenv.Dir(t)
	srv := s3test.Start(t)
	srv.Bucket(t, "testdata")
	rels := uploadTree(t, srv, "testdata", dir)
	srv.Setenv(t)
	ro := &source.RemoteOptions{S3: s3.Open}
	ro.Remote.PartSize = 64 << 10 // many parts even in small files
	var (
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 4)
		mu   sync.Mutex
		bad  []string
		good int
	)
	for _, rel := range rels {
		wg.Add(1)
		sem <- struct{}{}
		go func(rel string) {
			defer wg.Done()
			defer func() { <-sem }()
			local := fingerprint(filepath.Join(dir, filepath.FromSlash(rel)), client.Options{})
			remote := fingerprint("s3://testdata/"+rel, client.Options{Remote: ro})
			mu.Lock()
			defer mu.Unlock()
			if local != remote {
				bad = append(bad, fmt.Sprintf("%s:\nlocal:  %.600s\nremote: %.600s", rel, local, remote))
			} else if !strings.HasPrefix(local, "error") {
				good++
			}
		}(rel)
	}
	wg.Wait()
	for _, b := range bad {
		t.Error(b)
	}
	if good < 100 {
		t.Errorf("only %d of %d files loaded", good, len(rels))
	}

	env := srv.Env()
	for _, rel := range []string{
		"safetensors/fluxml/non_sharded/model.safetensors",
		"gguf/quantized/ollama-ggml-q4_0.gguf",
		"generated/torch_nested_ckpt.pt",
		"generated/torch_mixed_legacy.pt",
		"generated/npz_plain.npz",
		"generated/np_f4_fortran.npy",
	} {
		t.Run("cli/"+rel, func(t *testing.T) {
			t.Parallel()
			local := filepath.Join(dir, filepath.FromSlash(rel))
			url := "s3://testdata/" + rel
			for _, args := range [][]string{{"ls"}, {"load", "--quiet", "--sha256"}, {"load", "--quiet", "--sha256", "--dtype", "f32"}} {
				want := runEnv(t, env, append(args, local)...)
				got := runEnv(t, env, append(args, "--part-size", "16KiB", url)...)
				if want.code != 0 || got.code != 0 || got.stdout != want.stdout {
					t.Fatalf("tensorfs %s: local exit %d, remote exit %d (%s)\nlocal:\n%s\nremote:\n%s", strings.Join(args, " "), want.code, got.code, got.stderr, want.stdout, got.stdout)
				}
			}
		})
	}
}

// writeShards writes a sharded safetensors checkpoint (three shards and a
// weight map) into dir.
func writeShards(t testing.TB, dir string) {
	t.Helper()
	wm := map[string]string{}
	for s := 0; s < 3; s++ {
		name := fmt.Sprintf("model-%05d-of-00003.safetensors", s+1)
		var ts []stTensor
		for i := 0; i < 4; i++ {
			tn := fmt.Sprintf("layers.%d.w%d", s, i)
			ts = append(ts, stTensor{Name: tn, DType: "F32", Shape: []int64{64, 96 + 8*int64(i)}, Data: pattern(64*(96+8*i)*4, byte(s*4+i))})
			wm[tn] = name
		}
		writeSafetensors(t, filepath.Join(dir, name), ts, map[string]string{"format": "pt"})
	}
	data, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 0}, "weight_map": wm})
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"model_type":"test"}`), 0o644)
}

// TestRemoteS3Prefix loads a sharded checkpoint under a prefix, and one
// file, and mounts them: listing, bytes and views are the local ones.
func TestRemoteS3Prefix(t *testing.T) {
	local := t.TempDir()
	writeShards(t, local)
	srv := s3test.Start(t)
	srv.Bucket(t, "models")
	uploadTree(t, srv, "models", local)
	for _, rel := range []string{"a/b/model-00001-of-00003.safetensors", "a/b/model-00002-of-00003.safetensors", "a/b/model-00003-of-00003.safetensors", "a/b/model.safetensors.index.json", "a/b/config.json"} {
		srv.PutFile(t, "models", "llama/"+strings.TrimPrefix(rel, "a/b/"), filepath.Join(local, filepath.Base(rel)))
	}
	env := srv.Env()
	for _, src := range []string{"s3://models/llama/", "s3://models/llama", "s3://models/", "s3://models/llama/model.safetensors.index.json"} {
		for _, args := range [][]string{{"ls"}, {"load", "--quiet", "--sha256"}} {
			want := runEnv(t, env, append(args, local)...)
			got := runEnv(t, env, append(args, "--part-size", "8KiB", src)...)
			if want.code != 0 || got.code != 0 || got.stdout != want.stdout {
				t.Fatalf("tensorfs %s %s: exit %d %s\nwant:\n%s\ngot:\n%s", strings.Join(args, " "), src, got.code, got.stderr, want.stdout, got.stdout)
			}
		}
	}
	// convert of the prefix writes the bytes convert writes from the local
	// directory (the remote flags apply to convert too).
	out := t.TempDir()
	for _, c := range []struct{ src, out string }{{local, "local.safetensors"}, {"s3://models/llama/", "remote.safetensors"}} {
		if r := runEnv(t, env, "convert", "--quiet", "--dtype", "bf16", "--part-size", "8KiB", c.src, filepath.Join(out, c.out)); r.code != 0 {
			t.Fatalf("tensorfs convert %s: exit %d: %s", c.src, r.code, r.stderr)
		}
	}
	lc, err := os.ReadFile(filepath.Join(out, "local.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := os.ReadFile(filepath.Join(out, "remote.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(lc, rc) {
		t.Fatalf("convert of s3://models/llama/: %d bytes differ from the local directory's %d", len(rc), len(lc))
	}
	// Through a mount: every tensor file and its .f16 view, and the
	// export with the prefix's other objects (config.json) beside it, as
	// a local directory's files are.
	m := mountEnv(t, env, "s3://models/llama/", "--part-size", "8KiB", "--cache-mem", "64KiB")
	lm := mount(t, local)
	for _, rel := range []string{"layers.0.w0", "layers.1.w3", "layers.2.w2", ".f16/layers.2.w1", ".npy/layers.0.w1.npy",
		".safetensors/model.safetensors", ".safetensors/config.json", ".bf16/.safetensors/config.json"} {
		want, err := os.ReadFile(lm.Path(rel))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(m.Path(rel))
		if err != nil {
			t.Fatalf("%s: %v; server: %s", rel, err, m.Stderr())
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: %d bytes differ from the local mount's %d", rel, len(got), len(want))
		}
	}
}

// httpServer serves dir on loopback with Go's file server (Range,
// If-Unmodified-Since) and, as nginx does, an ETag made of the file's
// modification time and size (so that If-Match works too).
func httpServer(t testing.TB, dir string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	files := http.FileServer(http.Dir(dir))
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if st, err := os.Stat(filepath.Join(dir, filepath.FromSlash(r.URL.Path))); err == nil && st.Mode().IsRegular() {
			w.Header().Set("ETag", `"`+strconv.FormatInt(st.ModTime().UnixNano(), 16)+"-"+strconv.FormatInt(st.Size(), 16)+`"`)
		}
		files.ServeHTTP(w, r)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String()
}

// TestRemoteHTTP loads files and a sharded checkpoint (by its weight map)
// over HTTP, and detects a file replaced under a mount.
func TestRemoteHTTP(t *testing.T) {
	dir := testenv.Dir(t)
	base := httpServer(t, dir)
	for _, rel := range []string{"safetensors/fluxml/non_sharded/model.safetensors", "gguf/quantized/ollama-ggml-q4_k.gguf", "generated/torch_mixed_zip.pt", "generated/npz_plain.npz"} {
		want := runEnv(t, nil, "load", "--quiet", "--sha256", filepath.Join(dir, rel))
		got := runEnv(t, nil, "load", "--quiet", "--sha256", "--part-size", "8KiB", base+"/"+rel)
		if want.code != 0 || got.code != 0 || got.stdout != want.stdout {
			t.Fatalf("%s: exit %d %s\nwant:\n%s\ngot:\n%s", rel, got.code, got.stderr, want.stdout, got.stdout)
		}
	}
	local := t.TempDir()
	writeShards(t, local)
	sbase := httpServer(t, local)
	want := runEnv(t, nil, "load", "--quiet", "--sha256", local)
	got := runEnv(t, nil, "load", "--quiet", "--sha256", sbase+"/model.safetensors.index.json")
	if got.code != 0 || got.stdout != want.stdout {
		t.Fatalf("sharded over HTTP: exit %d %s", got.code, got.stderr)
	}
	if r := runEnv(t, nil, "ls", base+"/nope.safetensors"); r.code != 1 || !strings.Contains(r.stderr, "404") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Fatalf("missing file: exit %d, %q", r.code, r.stderr)
	}

	// A file replaced under a mount: EIO and one log line, never the new
	// bytes.
	shard := filepath.Join(local, "model-00002-of-00003.safetensors")
	m := mountEnv(t, nil, sbase+"/model-00002-of-00003.safetensors", "--part-size", "4KiB", "--cache-mem", "8KiB", "--remote-readahead", "0")
	orig, _ := os.ReadFile(shard)
	changed := append([]byte(nil), orig...)
	for i := len(changed) / 2; i < len(changed); i++ {
		changed[i] ^= 0xff
	}
	tmp := shard + ".new"
	os.WriteFile(tmp, changed, 0o644)
	os.Chtimes(tmp, time.Now().Add(time.Hour), time.Now().Add(time.Hour))
	if err := os.Rename(tmp, shard); err != nil {
		t.Fatal(err)
	}
	_, err := os.ReadFile(m.Path("layers.1.w3"))
	if err == nil || !errors.Is(err, syscall.EIO) {
		t.Fatalf("read after the file changed: %v, want EIO", err)
	}
	// The server's stderr reaches the test through a pipe: complete only
	// once the server has exited.
	m.Unmount()
	if s := m.Stderr(); strings.Count(s, "changed after it was opened") != 1 {
		t.Fatalf("server log: %q", s)
	}
}

// TestRemoteS3Faults: reads through 503 SlowDown and connection resets
// are retried; a server killed under a live mount gives EIO in bounded
// time and the same mount serves again once it is back; an object
// replaced under a mount gives EIO.
func TestRemoteS3Faults(t *testing.T) {
	local := t.TempDir()
	writeShards(t, local)
	srv := s3test.Start(t)
	srv.Bucket(t, "models")
	uploadTree(t, srv, "models", local)
	px := s3test.StartProxy(t, srv.Endpoint)
	env := append(srv.Env(), "AWS_ENDPOINT_URL="+px.URL)

	px.Every.Store(3)
	want := runEnv(t, env, "load", "--quiet", "--sha256", local)
	got := runEnv(t, env, "load", "--quiet", "--sha256", "--part-size", "4KiB", "s3://models/")
	if got.code != 0 || got.stdout != want.stdout {
		t.Fatalf("load through faults: exit %d %s", got.code, got.stderr)
	}
	if px.Faults.Load() < 4 {
		t.Fatalf("only %d faults injected", px.Faults.Load())
	}
	px.Every.Store(0)

	m := mountEnv(t, env, "s3://models/model-00001-of-00003.safetensors", "--part-size", "4KiB", "--cache-mem", "8KiB", "--remote-readahead", "0", "--remote-timeout", "1s")
	lm := mount(t, filepath.Join(local, "model-00001-of-00003.safetensors"))
	srv.Stop()
	start := time.Now()
	if _, err := os.ReadFile(m.Path("layers.0.w3")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("read with the server gone: %v, want EIO", err)
	}
	if d := time.Since(start); d > 90*time.Second { // --remote-timeout 1s: bounded, not a hang
		t.Fatalf("EIO took %v", d)
	}
	srv.Restart(t)
	for _, name := range []string{"layers.0.w3", "layers.0.w1"} {
		// With --remote-timeout 1s, a read of a just-restarted server on
		// a loaded machine can still time out (EIO): the mount must serve
		// it again, so a later read must succeed; only a mount that never
		// recovers (or serves other bytes) fails.
		var a []byte
		var err error
		for deadline := time.Now().Add(2 * time.Minute); ; {
			if a, err = os.ReadFile(m.Path(name)); !errors.Is(err, syscall.EIO) || time.Now().After(deadline) {
				break
			}
		}
		b, _ := os.ReadFile(lm.Path(name))
		if err != nil || !bytes.Equal(a, b) {
			t.Fatalf("%s with the server back: %v", name, err)
		}
	}
	// Replaced under the mount.
	srv.Put(t, "models", "model-00001-of-00003.safetensors", bytes.Repeat([]byte{1}, 4096))
	if _, err := os.ReadFile(m.Path("layers.0.w2")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("read after the object changed: %v, want EIO", err)
	}
	// The server's stderr reaches the test through a pipe: complete only
	// once the server has exited.
	m.Unmount()
	if s := m.Stderr(); strings.Count(s, "changed after it was opened") != 1 {
		t.Fatalf("server log: %q", s)
	}
}

// TestRemoteS3Errors: bad credentials, a missing bucket, object or
// prefix, an unreachable endpoint: one line naming the source, exit 1,
// no secret.
func TestRemoteS3Errors(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "bkt")
	srv.Put(t, "bkt", "x.safetensors", []byte("not a checkpoint"))
	env := srv.Env()
	for _, tc := range []struct {
		name string
		env  []string
		src  string
		want string
	}{
		{"bad secret", []string{"AWS_SECRET_ACCESS_KEY=wrong-secret-value"}, "s3://bkt/x.safetensors", "s3://bkt/x.safetensors: HTTP 403 SignatureDoesNotMatch"},
		{"anonymous", nil, "s3://bkt/x.safetensors --no-sign-request", "HTTP 403 AccessDenied"},
		{"no credentials", []string{"AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY="}, "s3://bkt/x.safetensors", "s3://bkt: no AWS credentials found"},
		{"missing object", nil, "s3://bkt/nope.safetensors", "s3://bkt/nope.safetensors: HTTP 404 NoSuchKey"},
		{"missing bucket", nil, "s3://nobucket/x", "s3://nobucket: HTTP 404 NoSuchBucket"},
		{"empty prefix", nil, "s3://bkt/empty/", "s3://bkt/empty/: no objects under this prefix"},
		{"not a checkpoint", nil, "s3://bkt/x.safetensors", "s3://bkt/x.safetensors: not a checkpoint"},
		{"unreachable", []string{"AWS_ENDPOINT_URL=http://127.0.0.1:1"}, "s3://bkt/x.safetensors --remote-timeout 1s", "s3://bkt/x.safetensors: connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := strings.Fields(tc.src)
			src, flags := args[0], args[1:]
			for _, cmd := range [][]string{{"ls"}, {"load", "--quiet"}, {"cat"}} {
				a := append(append(append([]string{}, cmd...), flags...), src)
				if cmd[0] == "cat" {
					a = append(a, "w")
				}
				r := runEnv(t, append(append([]string{}, env...), tc.env...), a...)
				line := strings.TrimSpace(r.stderr)
				if r.code != 1 || !strings.HasPrefix(line, "tensorfs: ") || !strings.Contains(line, tc.want) || strings.Contains(line, "\n") {
					t.Fatalf("tensorfs %s: exit %d, stderr %q; want exit 1 and one line with %q", strings.Join(a, " "), r.code, r.stderr, tc.want)
				}
				if strings.Contains(r.stderr+r.stdout, s3test.SecretKey) || strings.Contains(r.stderr, "wrong-secret-value") {
					t.Fatalf("a secret in the output: %q", r.stderr)
				}
			}
		})
	}
}
