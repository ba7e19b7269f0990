package dial

import (
	"context"
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"testing"
	"time"
)

// tinySafetensors is a safetensors file of one F32 tensor "w" of 4
// elements.
func tinySafetensors() []byte {
	hdr := []byte(`{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`)
	for len(hdr)%8 != 0 {
		hdr = append(hdr, ' ')
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	return append(append(b, hdr...), make([]byte, 16)...)
}

// TestShardNamesAreNames: a weight map over HTTP naming its shard
// "%2e%2e/x.safetensors" asks for a file of that name inside the map's
// directory (as a local directory and S3 would), never for "../x" on a
// server that decodes and cleans request paths.
func TestShardNamesAreNames(t *testing.T) {
	files := map[string][]byte{
		"/dir/model.safetensors.index.json": []byte(`{"weight_map":{"w":"%2e%2e/x.safetensors"}}`),
		"/x.safetensors":                    tinySafetensors(), // outside dir
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := files[path.Clean(r.URL.Path)] // decoded, then cleaned
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		http.ServeContent(w, r, "", time.Unix(1e9, 0), strings.NewReader(string(b)))
	}))
	defer srv.Close()
	idx, srcs, _, err := Load(context.Background(), srv.URL+"/dir/model.safetensors.index.json", Options{})
	if err == nil {
		for _, s := range srcs {
			s.Close()
		}
		t.Fatalf("loaded %v from outside the weight map's directory", idx.Sources)
	}
	if !strings.Contains(err.Error(), "404") {
		t.Fatalf("error %v, want the shard not found", err)
	}
}
