package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/backing/s3/s3test"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// The fleet tests (issue 30): 8 tensorfs processes load one checkpoint
// through a cache tier, Debian's nginx-light as a forward caching proxy
// with the slice module (docs/SCALE.md has the same configuration). The
// origin's bytes are counted from nginx's log ($upstream_bytes_received,
// subrequests included).

// fleetPart is the part size of the fleet tests, and nginx's slice.
const fleetPart = 1 << 20

// nginxConf is docs/scripts/nginx-tier.conf, the documented tier: a
// forward proxy on 127.0.0.1:TIER that caches each slice of each object,
// keyed by the host and path without the query (a presigned signature
// differs per node), one fetch per slice at a time (proxy_cache_lock);
// and a plain forward proxy on PASS, without a cache, logged the same:
// "without the tier", counted the same way.
func nginxConf(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "scripts", "nginx-tier.conf"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// nginxTier is a running nginx.
type nginxTier struct {
	Tier, Pass string // proxy URLs
	dir        string
	cmd        *exec.Cmd
	exited     chan struct{}
}

// startNginx starts nginx with nginxConf in a temporary directory; with
// CI=true a missing nginx fails the test.
func startNginx(t *testing.T) *nginxTier {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/nginx"); serr == nil {
			bin = "/usr/sbin/nginx"
		} else {
			testenv.SkipOrFail(t, "nginx not found (apt-get install nginx-light)")
		}
	}
	// nginx is given two ports that were free a moment ago; another
	// process (a test package running beside this one) can bind one in
	// between, and nginx then exits saying so: it is started again on
	// other ports.
	for try := 1; ; try++ {
		n, err := tryNginx(t, bin)
		if err == nil {
			return n
		}
		if try == 5 || !strings.Contains(err.Error(), "Address already in use") {
			t.Fatal(err)
		}
	}
}

// tryNginx starts nginx on two free ports and waits until it listens on
// both.
func tryNginx(t *testing.T, bin string) (*nginxTier, error) {
	t.Helper()
	dir := t.TempDir()
	tier, pass := freePort(t), freePort(t)
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;" // the workers write the cache in this root-owned directory
	}
	conf := strings.NewReplacer("{{user}}", user, "{{dir}}", dir, "{{tier}}", tier, "{{pass}}", pass, "{{slice}}", strconv.Itoa(fleetPart)).Replace(nginxConf(t))
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	n := &nginxTier{Tier: "http://127.0.0.1:" + tier, Pass: "http://127.0.0.1:" + pass, dir: dir, exited: make(chan struct{})}
	n.cmd = exec.Command(bin, "-p", dir, "-e", filepath.Join(dir, "error.log"), "-c", filepath.Join(dir, "nginx.conf"))
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // killed with its workers
	var out syncBuffer
	n.cmd.Stdout, n.cmd.Stderr = &out, &out
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { n.cmd.Wait(); close(n.exited) }()
	t.Cleanup(n.Kill)
	deadline := time.Now().Add(readyTimeout)
	for _, port := range []string{tier, pass} {
		for {
			c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
			if err == nil {
				c.Close()
				break
			}
			select {
			case <-n.exited:
				elog, _ := os.ReadFile(filepath.Join(dir, "error.log"))
				return nil, fmt.Errorf("nginx exited: %s %s", out.String(), elog)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("nginx did not listen on %s", port)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return n, nil
}

// Kill kills nginx and its workers at once (SIGKILL): a tier that dies.
func (n *nginxTier) Kill() {
	select {
	case <-n.exited:
		return
	default:
	}
	syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	<-n.exited
}

// Quit stops nginx gracefully (SIGQUIT: its workers finish and log
// their requests, then exit) and waits for it to exit.
func (n *nginxTier) Quit(t *testing.T) {
	t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGQUIT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.exited:
	case <-time.After(exitTimeout):
		n.Kill()
		t.Fatalf("nginx still running %v after SIGQUIT", exitTimeout)
	}
}

// originBytes sums $upstream_bytes_received over the log lines after
// the first skip bytes of the log, and returns the log's size.
func (n *nginxTier) originBytes(t *testing.T, skip int64) (sum, size int64) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(n.dir, "origin.log"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if skip > int64(len(data)) {
		skip = int64(len(data))
	}
	sc := bufio.NewScanner(bytes.NewReader(data[skip:]))
	for sc.Scan() {
		line := sc.Text()
		field := line[strings.LastIndexByte(line, '|')+1:]
		for _, v := range strings.FieldsFunc(field, func(r rune) bool { return r == ',' || r == ':' || r == ' ' }) {
			if b, err := strconv.ParseInt(v, 10, 64); err == nil {
				sum += b
			}
		}
	}
	return sum, int64(len(data))
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, p, _ := net.SplitHostPort(l.Addr().String())
	return p
}

// fleetCheckpoint writes a safetensors checkpoint of random tensors
// (about 24 MiB) and returns its path and `load --sha256` lines.
func fleetCheckpoint(t *testing.T) (string, string) {
	t.Helper()
	r := rand.New(rand.NewPCG(30, 8))
	var ts []stTensor
	for i := range 6 {
		data := make([]byte, 4<<20+i*4096)
		for j := 0; j < len(data); j += 8 {
			v := r.Uint64()
			for k := 0; k < 8 && j+k < len(data); k++ {
				data[j+k] = byte(v >> (8 * k))
			}
		}
		ts = append(ts, stTensor{Name: fmt.Sprintf("layer%d.weight", i), DType: "U8", Shape: []int64{int64(len(data))}, Data: data})
	}
	path := filepath.Join(t.TempDir(), "model.safetensors")
	writeSafetensors(t, path, ts, nil)
	want := runTensorfs(t, "load", "--quiet", "--sha256", path)
	if want.code != 0 {
		t.Fatal(want.stderr)
	}
	return path, want.stdout
}

// httpOrigin serves the checkpoint file with an ETag and ranges; when
// hold is set, requests after the first six wait until release is
// closed (a tier caught mid-way).
type httpOrigin struct {
	mu       sync.Mutex
	data     []byte
	etag     string // "" is "fleet-v1"
	served   atomic.Int64
	waiting  atomic.Int64
	hold     atomic.Bool
	release  chan struct{}
	released sync.Once
}

func (o *httpOrigin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if o.served.Add(1) > 6 && o.hold.Load() {
		o.waiting.Add(1)
		<-o.release
	}
	o.mu.Lock()
	data, etag := o.data, o.etag
	o.mu.Unlock()
	if etag == "" {
		etag = `"fleet-v1"`
	}
	w.Header().Set("ETag", etag)
	http.ServeContent(w, r, "model.safetensors", time.Unix(1700000000, 0), bytes.NewReader(data))
}

// replace makes data the file's new version, of another ETag.
func (o *httpOrigin) replace(data []byte, etag string) {
	o.mu.Lock()
	o.data, o.etag = data, etag
	o.mu.Unlock()
}

func (o *httpOrigin) Release() { o.released.Do(func() { close(o.release) }) }

// fleet runs 8 processes at once against source: 7 `load --sha256` and
// a mount whose files a subprocess hashes; each must print want. flags
// go to every process.
func fleet(t *testing.T, env []string, source, want string, flags ...string) (stderr string) {
	t.Helper()
	m := mountEnv(t, env, source, flags...)
	var wg sync.WaitGroup
	results := make([]result, 8)
	for i := range 7 {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i] = runEnv(t, env, append(append([]string{"load", "--quiet", "--sha256"}, flags...), source)...)
		}(i)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := runCmdIn(t, m.Dir, nil, "sh", "-c", "sha256sum layer*")
		results[7] = r
	}()
	wg.Wait()
	for i, r := range results {
		if r.code != 0 || r.stdout != want {
			t.Fatalf("process %d of 8: exit %d, stdout:\n%s\nwant:\n%s\nstderr: %s\nmount's stderr: %s", i, r.code, r.stdout, want, r.stderr, m.Stderr())
		}
	}
	m.Unmount()
	for _, r := range results {
		stderr += r.stderr
	}
	return stderr + m.Stderr()
}

// TestFleetThroughTier: 8 processes load one checkpoint from versitygw
// (s3://, presigned through the tier) and from a plain HTTP origin; each
// is byte-exact, and the origin serves at most 1.10x the checkpoint
// through the tier against about 8x without it.
func TestFleetThroughTier(t *testing.T) {
	needFUSE(t)
	path, want := fleetCheckpoint(t)
	data, _ := os.ReadFile(path)
	size := int64(len(data))
	srv := s3test.Start(t)
	srv.Bucket(t, "fleet")
	srv.Put(t, "fleet", "llm/model.safetensors", data)
	origin := &httpOrigin{data: data, release: make(chan struct{})}
	hs := httpServerOf(t, origin)
	part := []string{"--part-size", "1MiB"}
	tests := []struct {
		name, source string
		env          []string
		tier         bool
	}{
		{"s3 through the tier", "s3://fleet/llm/model.safetensors", srv.Env(), true},
		{"s3 without the tier", "s3://fleet/llm/model.safetensors", srv.Env(), false},
		{"http through the tier", hs + "/model.safetensors", nil, true},
		{"http without the tier", hs + "/model.safetensors", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A tier of its own, stopped before its log is read: nginx
			// logs a request after it has sent the last byte, so a line
			// can still be unwritten when the processes are done; once
			// nginx has exited, every line is.
			ng := startNginx(t)
			proxy := ng.Tier
			if !tt.tier {
				proxy = ng.Pass
			}
			stderr := fleet(t, tt.env, tt.source, want, append(append([]string{}, part...), "--proxy", proxy)...)
			if strings.Contains(stderr, "reading from the origin directly") {
				t.Fatalf("the tier was bypassed: %s", stderr)
			}
			ng.Quit(t)
			got, _ := ng.originBytes(t, 0)
			ratio := float64(got) / float64(size)
			t.Logf("%s: origin bytes %d for a checkpoint of %d: %.3fx", tt.name, got, size, ratio)
			if ratio < 1 {
				t.Fatalf("origin served %.3fx the checkpoint through nginx: not every GET went through it", ratio)
			}
			if tt.tier && ratio > 1.10 {
				t.Fatalf("origin served %.3fx the checkpoint through the tier, want at most 1.10x", ratio)
			}
			if !tt.tier && ratio < 7.5 {
				t.Fatalf("origin served %.3fx the checkpoint without the tier, want about 8x (the counting is off)", ratio)
			}
		})
	}
}

// TestFleetTierKilled: the tier dies with 8 processes mid-way through
// the checkpoint (nginx killed while the origin holds its requests):
// every process still finishes, byte-exact, from the origin directly.
func TestFleetTierKilled(t *testing.T) {
	needFUSE(t)
	path, want := fleetCheckpoint(t)
	data, _ := os.ReadFile(path)
	origin := &httpOrigin{data: data, release: make(chan struct{})}
	hs := httpServerOf(t, origin)
	ng := startNginx(t)
	origin.hold.Store(true)
	defer origin.Release()
	go func() {
		// Once the tier is waiting on the origin, mid-way, kill it.
		for origin.waiting.Load() == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		ng.Kill()
		origin.hold.Store(false)
		origin.Release()
	}()
	stderr := fleet(t, nil, hs+"/model.safetensors", want, "--part-size", "1MiB", "--proxy", ng.Tier)
	if n := strings.Count(stderr, "reading from the origin directly"); n == 0 || n > 8 {
		t.Fatalf("%d processes said the tier failed, want 1 to 8 (one line per process): %s", n, stderr)
	}
	select {
	case <-ng.exited:
	default:
		t.Fatal("the tier was never killed")
	}
}

// httpServerOf serves h on loopback and returns its URL.
func httpServerOf(t *testing.T, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return "http://" + l.Addr().String()
}

// TestFleetTierOtherVersion: the tier holds pieces of the file's first
// version when the origin has a second one of the same size: a process
// that opens it through the tier is refused (EIO, one line saying the
// object changed), never served a mix of both.
func TestFleetTierOtherVersion(t *testing.T) {
	path, want := fleetCheckpoint(t)
	v1, _ := os.ReadFile(path)
	origin := &httpOrigin{data: v1, release: make(chan struct{})}
	hs := httpServerOf(t, origin)
	ng := startNginx(t)
	// The tier caches the first two slices of version 1.
	pu, _ := url.Parse(ng.Tier)
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	req, _ := http.NewRequest("GET", hs+"/model.safetensors", nil)
	req.Header.Set("Range", fmt.Sprintf("bytes=0-%d", 2*fleetPart-1))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent {
		t.Fatalf("priming the tier: HTTP %d", resp.StatusCode)
	}
	v2 := bytes.Clone(v1)
	for i := len(v2) / 2; i < len(v2); i += 4096 {
		v2[i] ^= 0xff
	}
	origin.replace(v2, `"fleet-v2"`)
	r := runEnv(t, nil, "load", "--quiet", "--sha256", "--part-size", "1MiB", "--proxy", ng.Tier, hs+"/model.safetensors")
	if r.code == 0 {
		t.Fatalf("a load through a tier holding another version succeeded:\n%s", r.stdout)
	}
	if r.stdout == want {
		t.Fatal("served version 1 whole from a tier that holds only part of it")
	}
	if !strings.Contains(r.stderr, "changed") || strings.Count(strings.TrimSpace(r.stderr), "\n") > 1 {
		t.Fatalf("stderr %q, want one or two lines saying the object changed", r.stderr)
	}
	t.Logf("refused: %s", strings.TrimSpace(r.stderr))
}

// TestProxyFlag: --proxy and TENSORFS_PROXY take an http(s):// proxy;
// anything else is a usage error of one line (exit 2) that never shows
// the proxy's password.
func TestProxyFlag(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		args []string
		from string // the name the message gives
		want string
	}{
		{"not a URL", nil, []string{"--proxy", "127.0.0.1:3128"}, "--proxy", "want an http:// or https:// URL"},
		{"no scheme, a password", nil, []string{"--proxy", "u:hunter2@127.0.0.1:3128"}, "--proxy", "want an http:// or https:// URL"},
		{"socks", nil, []string{"--proxy", "socks5://127.0.0.1:1080"}, "--proxy", "want an http:// or https:// URL"},
		{"a path", nil, []string{"--proxy", "http://u:hunter2@127.0.0.1:3128/x"}, "--proxy", "without a path or query"},
		{"from the environment", []string{"TENSORFS_PROXY=ftp://u:hunter2@127.0.0.1"}, nil, "TENSORFS_PROXY", "want an http:// or https:// URL"},
		{"the flag over the environment", []string{"TENSORFS_PROXY=http://127.0.0.1:3128"}, []string{"--proxy", "gopher://x"}, "--proxy", "want an http:// or https:// URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, cmd := range []string{"load", "ls", "cat"} {
				args := append(append([]string{cmd}, tt.args...), "s3://bucket/model.safetensors")
				if cmd == "cat" {
					args = append(args, "w")
				}
				r := runEnv(t, tt.env, args...)
				if r.code != 2 || !strings.Contains(r.stderr, tt.from+": ") || !strings.Contains(r.stderr, tt.want) {
					t.Fatalf("%s: exit %d, stderr %q; want exit 2 and %q", cmd, r.code, r.stderr, tt.want)
				}
				if strings.Contains(r.stderr, "hunter2") {
					t.Fatalf("%s: the password in %q", cmd, r.stderr)
				}
			}
		})
	}
}
