package check

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/backing/httpsrc"
	"github.com/lazyweights/tensorfs/backing/remote"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// TestDataStreamsRemote: Data reads a remote file it hashes whole, and
// a tensor it reads whole, each as one streamed GET (a Prefetch range
// read in Data's 1 MiB reads, under a part of 2 MiB), not one GET per
// part or readahead window: a file of 12 parts costs the server the
// Open's GET and one more; so does the file as 5 tensors (padding
// between some) read whole, announced as one plan. A reply cut mid-body
// costs one GET more, and the bytes hashed are still the file's.
func TestDataStreamsRemote(t *testing.T) {
	const ps = 2 << 20
	data := make([]byte, 12*ps)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:])
	var gets, cuts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		gets.Add(1)
		var start, end int64
		if n, _ := fmt.Sscanf(req.Header.Get("Range"), "bytes=%d-%d", &start, &end); n == 2 && end-start >= ps && cuts.Load() > 0 {
			cuts.Add(-1)
			// 3 MiB of the reply, then the connection closes.
			w.Header().Set("ETag", `"v1"`)
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end, len(data)))
			w.Header().Set("Content-Length", strconv.FormatInt(end-start+1, 10))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(data[start : start+3<<20])
			panic(http.ErrAbortHandler)
		}
		w.Header().Set("ETag", `"v1"`)
		http.ServeContent(w, req, "model.bin", time.Unix(0, 0), bytes.NewReader(data))
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL + "/model.bin")
	store, key, err := httpsrc.New(u)
	if err != nil {
		t.Fatal(err)
	}
	c, err := remote.New(store, remote.Options{PartSize: ps, ReadErrorsReturned: true})
	if err != nil {
		t.Fatal(err)
	}
	open := func() backing.Source {
		t.Helper()
		src, err := c.Open(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		return src
	}
	tensor := index.Tensor{Name: "w", DType: dtype.F32, Shape: []int64{(int64(len(data)) - 100) / 4}, Offset: 100, Size: int64(len(data)) - 100}
	// The same bytes as 5 tensors, with padding between some.
	var tensors []index.Tensor
	for i, at := range []int64{100, 3*ps + 100, 5*ps + 132, 9*ps + 132, 9*ps + 4132, 12 * ps} {
		if i > 0 {
			prev := &tensors[i-1]
			prev.Size = at - prev.Offset - []int64{0, 32, 0, 4000, 0}[i-1]
			prev.Shape = []int64{prev.Size / 4}
		}
		if i < 5 {
			tensors = append(tensors, index.Tensor{Name: fmt.Sprintf("w%d", i), DType: dtype.F32, Offset: at})
		}
	}
	for _, tc := range []struct {
		name    string
		hash    bool // the file's sha256 is stated: hashed whole
		values  bool // NaN and Inf counted, through the tensor's float32 view
		cut     int64
		gets    int64 // after Open's
		digest  string
		tensors []index.Tensor // nil: tensor
	}{
		{"hashed", true, false, 0, 1, "sha256 ok", nil},
		{"tensor", false, false, 0, 1, "", nil},
		{"values", false, true, 0, 1, "", nil},
		{"hashed, cut", true, false, 1, 2, "sha256 ok", nil},
		{"tensors", false, false, 0, 1, "", tensors},      // one plan
		{"tensors, cut", false, false, 1, 2, "", tensors}, // one plan, a resumption
	} {
		src := open()
		gets.Store(0)
		cuts.Store(tc.cut)
		ts := tc.tensors
		if ts == nil {
			ts = []index.Tensor{tensor}
		}
		ck := &Checkpoint{Source: srv.URL, Index: &index.Index{Format: "safetensors", Sources: []string{srv.URL + "/model.bin"}, Tensors: ts}, Sources: []backing.Source{src}}
		if tc.hash {
			ck.SHA256 = func(int) (string, bool) { return want, true }
		}
		rep, ps := Data(ck, DataOptions{Values: tc.values})
		src.Close()
		if len(ps) != 0 {
			t.Fatalf("%s: problems %v", tc.name, ps)
		}
		if tc.values && (len(rep.Tensors) != 1 || rep.Tensors[0].Elements != tensor.Shape[0]) {
			t.Fatalf("%s: values %+v", tc.name, rep.Tensors)
		}
		if tc.hash && (len(rep.Files) != 1 || rep.Files[0].Status != tc.digest) {
			t.Fatalf("%s: files %+v", tc.name, rep.Files)
		}
		if g := gets.Load(); g != tc.gets {
			t.Errorf("%s: %d GETs for a file of 12 parts read whole (%d tensors); want %d", tc.name, g, len(ts), tc.gets)
		}
	}
}
