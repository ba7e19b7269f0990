package dcp

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

func TestParseShardingInfo(t *testing.T) {
	got, err := ParseShardingInfo(`{"a.w": {"saved_offsets": [0, 15]}, "b": {"saved_offsets": []}}`)
	if err != nil || len(got) != 2 || len(got["a.w"]) != 2 || got["a.w"][1] != 15 || got["b"] == nil {
		t.Fatalf("%v, %v", got, err)
	}
	for _, bad := range []string{``, `[]`, `{"a": 1}`, `{"a": {}}`, `{"a": {"saved_offsets": [-1]}}`, `{"a": {"saved_offsets": [1.5]}}`, `{"a": {"saved_offsets": [0]}} x`, `{"a": {"saved_offsets": [99999999999999999999]}}`} {
		if _, err := ParseShardingInfo(bad); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func FuzzShardingInfo(f *testing.F) {
	f.Add(`{"a.w": {"saved_offsets": [0, 15]}}`)
	f.Add(`{"a": {"saved_offsets": []}, "b": {"saved_offsets": [1,2,3], "x": null}}`)
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseShardingInfo(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("two lines: %v", err)
			}
			return
		}
		for _, offs := range m {
			for _, o := range offs {
				if o < 0 {
					t.Fatalf("%v", m)
				}
			}
		}
	})
}

// stDCP copies formats2's dcp_st_ws2 (torch 2.14's safetensors .distcp)
// into a temporary directory.
func stDCP(t *testing.T) string {
	t.Helper()
	src := testenv.Path(t, filepath.Join("formats2", "dcp_st_ws2"))
	dir := t.TempDir()
	for _, n := range []string{MetadataName, "__0_0.distcp", "__1_0.distcp"} {
		data, err := os.ReadFile(filepath.Join(src, n))
		if err != nil {
			testenv.SkipOrFail(t, err.Error())
		}
		if err := os.WriteFile(filepath.Join(dir, n), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestSafetensorsDistcp: a safetensors-format .distcp (torch >= 2.8)
// loads; a blob whose DCP_SHARDING_INFO places a piece elsewhere than the
// .metadata (out of its tensor, overlapping another), or is not JSON, or
// a blob cut short, is one line naming the file.
func TestSafetensorsDistcp(t *testing.T) {
	// __0_0.distcp's blob starts at byte 0; its header is JSON with
	// "saved_offsets": [0, 0] for every key: each change keeps the
	// header's length.
	cases := []struct {
		name   string
		change func(hdr string) string
		err    string
	}{
		{"as saved", nil, ""},
		{"out of bounds", func(h string) string {
			return strings.Replace(h, `\"model.blocks.0.attn.proj.weight\": {\"saved_offsets\": [0, 0]}`, `\"model.blocks.0.attn.proj.weight\": {\"saved_offsets\": [0, 9]}`, 1)
		}, "places the chunk at [0 9]; the metadata at [0 0]"},
		{"overlapping", func(h string) string {
			return strings.Replace(h, `\"model.blocks.0.attn.proj.weight\": {\"saved_offsets\": [0, 0]}`, `\"model.blocks.0.attn.proj.weight\": {\"saved_offsets\": [0, 1]}`, 1)
		}, "places the chunk at [0 1]"},
		{"not JSON", func(h string) string {
			return strings.Replace(h, `{\"model.embed.weight\"`, `[\"model.embed.weight\"`, 1)
		}, "DCP_SHARDING_INFO is not a JSON object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := stDCP(t)
			p := filepath.Join(dir, "__0_0.distcp")
			data, _ := os.ReadFile(p)
			n := binary.LittleEndian.Uint64(data)
			if c.change != nil {
				h := c.change(string(data[8 : 8+n]))
				if len(h) != int(n) || h == string(data[8:8+n]) {
					t.Fatalf("the change did not apply")
				}
				copy(data[8:], h)
				os.WriteFile(p, data, 0o644)
			}
			idx, files, err := load(dir)
			for _, f := range files {
				f.(interface{ Close() error }).Close()
			}
			if c.err == "" {
				if err != nil || len(idx.Tensors) != 16 {
					t.Fatalf("%v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) || strings.Contains(err.Error(), "\n") || !errors.Is(err, index.ErrFormat) || !strings.Contains(err.Error(), "__0_0.distcp") {
				t.Fatalf("error %v, want one line naming the file with %q", err, c.err)
			}
		})
	}
	t.Run("cut short", func(t *testing.T) {
		dir := stDCP(t)
		os.Truncate(filepath.Join(dir, "__0_0.distcp"), 1000)
		_, files, err := load(dir)
		for _, f := range files {
			f.(interface{ Close() error }).Close()
		}
		if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "__0_0.distcp") {
			t.Fatalf("error %v", err)
		}
	})
}
