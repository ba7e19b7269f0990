package source

import (
	"context"
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"os/exec"
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
	ck, err := Load(context.Background(), srv.URL+"/dir/model.safetensors.index.json", Options{})
	if err == nil {
		ck.Close()
		t.Fatalf("loaded %v from outside the weight map's directory", ck.Index.Sources)
	}
	if !strings.Contains(err.Error(), "404") {
		t.Fatalf("error %v, want the shard not found", err)
	}
}

// TestS3NeedsOpener: an s3:// SOURCE opened without an S3 opener fails
// with one line naming it and saying how to enable it, before any
// request; a malformed one still says what is wrong with it.
func TestS3NeedsOpener(t *testing.T) {
	for _, tc := range []struct {
		source string
		want   string
	}{
		{"s3://bucket/model.safetensors", "s3://bucket/model.safetensors: s3:// is not enabled in this program: pass an S3 opener (source.RemoteOptions{S3: s3.Open}"},
		{"S3://bucket/prefix/", "S3://bucket/prefix/: s3:// is not enabled"},
		{"s3:///key", "s3:///key: no bucket"},
	} {
		_, err := Load(context.Background(), tc.source, Options{})
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line starting %q", tc.source, err, tc.want)
		}
	}
}

// TestSchemesTable: detection follows the table, case aside; every
// scheme's paragraph is in the help; a local path is not remote.
func TestSchemesTable(t *testing.T) {
	for _, s := range Schemes() {
		for _, src := range []string{s.Prefix + "x/y", strings.ToUpper(s.Prefix) + "x/y"} {
			if !IsRemote(src) {
				t.Errorf("IsRemote(%q) is false", src)
			}
		}
		if s.Help != "" && !strings.Contains(RemoteHelp(), s.Help) {
			t.Errorf("%s: its help is not in RemoteHelp", s.Prefix)
		}
	}
	for _, src := range []string{"/tmp/x", "model.safetensors", "s3:/x", "ftp://x/y"} {
		if IsRemote(src) {
			t.Errorf("IsRemote(%q) is true", src)
		}
	}
}

// TestClientLinksNoAWS: the Go client and this package reach every
// scheme but s3:// without the AWS SDK (the S3 opener is injected).
func TestClientLinksNoAWS(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/lazyweights/tensorfs/client", "github.com/lazyweights/tensorfs/source").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.Contains(p, "aws") || strings.Contains(p, "backing/s3") {
			t.Errorf("the client links %s", p)
		}
	}
}
