package hf_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/backing/hf"
	"github.com/lazyweights/tensorfs/backing/hf/hftest"
	"github.com/lazyweights/tensorfs/backing/remote"
)

// xetRepo is shardedRepo with its shards stored in Xet.
func xetRepo(seed byte) []hftest.File {
	files := shardedRepo(seed)
	for i := range files {
		if files[i].LFS {
			files[i].LFS, files[i].Xet = false, true
		}
	}
	return files
}

// TestXetLoad: a repository whose shards are in Xet loads and reads
// right through the bridge, though each shard is past the bridge's cap
// on unranged GETs (CloudFront's 50 GB, scaled down): every GET is
// ranged, none carries the token, and a bridge URL that expires while
// a shard is read is re-obtained from resolve.
func TestXetLoad(t *testing.T) {
	srv := hftest.New()
	defer srv.Close()
	srv.BridgeUnrangedMax = 1 << 10
	files := xetRepo(3)
	sha := srv.Commit("org/xet", "main", files...)
	env(t, srv)
	t.Setenv("HF_TOKEN", "hf_secret")
	ck, err := load(t, "hf://org/xet")
	if err != nil {
		t.Fatal(err)
	}
	srv.Expire()
	got := readAll(t, ck)
	for _, f := range files[:2] {
		if u := "hf://org/xet@" + sha + "/" + f.Path; !bytes.Equal(got[u], f.Data) {
			t.Errorf("%s: wrong bytes (sources %v)", u, ck.Index.Sources)
		}
	}
	if srv.BridgeRequests.Load() == 0 || srv.BridgeUnranged.Load() != 0 || srv.CDNAuth.Load() != 0 {
		t.Errorf("the bridge had %d requests, %d unranged, %d with Authorization", srv.BridgeRequests.Load(), srv.BridgeUnranged.Load(), srv.CDNAuth.Load())
	}
	if srv.Expired.Load() == 0 {
		t.Error("no bridge URL expired: the test tested nothing")
	}
}

// xetStore opens the store of repository id on srv and the file key in
// it, its first bytes read.
func xetStore(t *testing.T, srv *hftest.Server, id, key string) (*hf.Store, remote.Object) {
	t.Helper()
	st, _, err := hf.Open(context.Background(), "hf://"+id, hf.Options{Endpoint: srv.Hub.URL, NoToken: true, HubCache: t.TempDir(), Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	obj, _, err := st.Open(context.Background(), key, make([]byte, 8))
	if err != nil {
		t.Fatal(err)
	}
	return st, obj
}

// oneLine checks that err is one line naming the file's hf:// URL once,
// saying want, with no signature of the bridge's URL.
func oneLine(t *testing.T, err error, url, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %q", want)
	}
	msg := err.Error()
	if strings.Count(msg, url) != 1 || strings.Contains(msg, "\n") || !strings.Contains(msg, want) || strings.Contains(msg, "Signature") {
		t.Errorf("error %q: want one line naming %s once, saying %q", msg, url, want)
	}
}

// TestXetBridgeAnswers: each way the bridge answers a ranged GET is read
// right or refused in one line: a whole 200 to a range is asked again
// once as a range, and is the bytes only when it is the whole file
// asked for; gzip is never asked for (Accept-Encoding: identity) and
// refused when sent all the same; a 206 without Content-Range is taken
// only when it is exactly the length asked for.
func TestXetBridgeAnswers(t *testing.T) {
	srv := hftest.New()
	defer srv.Close()
	srv.BridgeUnrangedMax = 1 << 10
	data := fill(100<<10, 5)
	sha := srv.Commit("org/xet", "main", hftest.File{Path: "w.bin", Data: data, Xet: true})
	url := "hf://org/xet@" + sha + "/w.bin"
	for _, tc := range []struct {
		name    string
		f       hftest.BridgeFault
		n       int
		off, ln int64
		err     string // "" reads right
		faulted int64
	}{
		{"whole once", hftest.BridgeWhole, 1, 1000, 5000, "", 1},
		{"whole always", hftest.BridgeWhole, -1, 1000, 5000, "asked the Xet bridge for bytes 1000-5999, it ignored the Range request", 2},
		{"whole always, whole file", hftest.BridgeWhole, -1, 0, int64(len(data)), "", 1},
		{"gzip to a client that accepts it", hftest.BridgeGzip, -1, 1000, 5000, "", 0},
		{"gzip always", hftest.BridgeGzipAlways, -1, 1000, 5000, `Content-Encoding "gzip"`, 1},
		{"206 without Content-Range", hftest.BridgeNoContentRange, -1, 1000, 5000, "", 1},
		{"206 without Content-Range, short", hftest.BridgeShortNoContentRange, -1, 1000, 5000, "answered 2500 bytes without Content-Range", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, obj := xetStore(t, srv, "org/xet", "w.bin")
			n := srv.BridgeFaulted.Load()
			srv.FaultBridge(tc.f, tc.n)
			defer srv.FaultBridge(0, 0)
			b := make([]byte, tc.ln)
			err := st.Get(context.Background(), obj, tc.off, [][]byte{b}, nil)
			if got := srv.BridgeFaulted.Load() - n; got != tc.faulted {
				t.Errorf("%d answers faulted, want %d", got, tc.faulted)
			}
			if tc.err != "" {
				oneLine(t, err, url, tc.err)
				return
			}
			if err != nil || !bytes.Equal(b, data[tc.off:tc.off+tc.ln]) {
				t.Fatalf("read: %v (right bytes: %v)", err, bytes.Equal(b, data[tc.off:tc.off+tc.ln]))
			}
		})
	}
	if srv.BridgeUnranged.Load() != 0 {
		t.Errorf("%d unranged GETs of the bridge", srv.BridgeUnranged.Load())
	}
	// check --data's sha256: the LFS oid the tree lists for a file in
	// Xet too.
	st, _ := xetStore(t, srv, "org/xet", "w.bin")
	if sum, ok := st.SHA256("w.bin"); !ok || sum != hftest.SHA256(data) {
		t.Errorf("SHA256: %q %v, want %s", sum, ok, hftest.SHA256(data))
	}
}

// dropHeader is a Hub whose resolve answers lack header h.
func dropHeader(h string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(&dropWriter{ResponseWriter: w, h: h}, r)
		})
	}
}

type dropWriter struct {
	http.ResponseWriter
	h string
}

func (d *dropWriter) WriteHeader(code int) {
	d.Header().Del(d.h)
	d.ResponseWriter.WriteHeader(code)
}

func (d *dropWriter) Write(b []byte) (int, error) { return d.ResponseWriter.Write(b) }

// TestXetIdentity: a file in Xet's size and identity are X-Linked-Size
// and X-Linked-Etag, which resolve must give; without either the file
// is one line, never read by the pointer's ETag.
func TestXetIdentity(t *testing.T) {
	for _, h := range []string{"X-Linked-Etag", "X-Linked-Size"} {
		t.Run(h, func(t *testing.T) {
			srv := hftest.New()
			defer srv.Close()
			sha := srv.Commit("org/xet", "main", hftest.File{Path: "w.bin", Data: fill(4096, 1), Xet: true})
			srv.WrapHub(dropHeader(h))
			st, _, err := hf.Open(context.Background(), "hf://org/xet", hf.Options{Endpoint: srv.Hub.URL, NoToken: true, HubCache: t.TempDir(), Logf: t.Logf})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			_, _, err = st.Open(context.Background(), "w.bin", make([]byte, 8))
			oneLine(t, err, "hf://org/xet@"+sha+"/w.bin", "the Hub gave a file in Xet without "+h)
		})
	}
}

// TestXetReadAtOneLine: through a checkpoint's source, a Xet file the
// bridge will not serve by range is one error naming the file once.
func TestXetReadAtOneLine(t *testing.T) {
	srv := hftest.New()
	defer srv.Close()
	files := xetRepo(2)
	sha := srv.Commit("org/xet", "main", files...)
	env(t, srv)
	ck, err := load(t, "hf://org/xet/"+files[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	srv.FaultBridge(hftest.BridgeShortNoContentRange, -1)
	b := make([]byte, 4096)
	_, err = ck.Sources[0].ReadAt(b, 200<<10)
	if err == io.EOF {
		err = nil
	}
	oneLine(t, err, "hf://org/xet@"+sha+"/"+files[0].Path, "without Content-Range")
}
