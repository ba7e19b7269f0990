package integration

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// loadDigests runs `tensorfs load --sha256 FLAGS... SRC` and returns its
// lines as tensor name → hex sha256; an exit other than 0 fails t.
func loadDigests(t *testing.T, src string, flags ...string) map[string]string {
	t.Helper()
	r := runTensorfs(t, append(append([]string{"load", "--sha256"}, flags...), src)...)
	if r.code != 0 {
		t.Fatalf("load %s %v: exit %d: %s", src, flags, r.code, r.stderr)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if sum, tn, ok := strings.Cut(line, "  "); ok {
			got[tn] = sum
		}
	}
	return got
}

// convertDigests runs `tensorfs convert --quiet SRC OUT` and returns the
// hex sha256 of each tensor's bytes in OUT, by name; an exit other than
// 0 or an unreadable OUT fails t.
func convertDigests(t *testing.T, src string) map[string]string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "model.safetensors")
	if r := runTensorfs(t, "convert", "--quiet", src, out); r.code != 0 {
		t.Fatalf("convert %s: exit %d: %s", src, r.code, r.stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(data)
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(data[8:8+n], &hdr); err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	for tn, raw := range hdr {
		var e struct {
			DataOffsets [2]int64 `json:"data_offsets"`
		}
		if tn == "__metadata__" || json.Unmarshal(raw, &e) != nil {
			continue
		}
		h := sha256.Sum256(data[8+int64(n)+e.DataOffsets[0] : 8+int64(n)+e.DataOffsets[1]])
		sums[tn] = hex.EncodeToString(h[:])
	}
	return sums
}
