package integration

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestDtypeTop mounts with --dtype f32: the top level is the F32 view
// (integers and bool absent), the stored tree is under .native/, and
// index.json describes the top level.
func TestDtypeTop(t *testing.T) {
	src, ts := cliFixture(t)
	m := mount(t, src, "--dtype", "f32")
	out := runPy(t, `
import json, os, struct, sys
m = sys.argv[1]
doc = json.load(open(os.path.join(m, '.tensorfs', 'index.json')))
res = {'view': doc.get('view'), 'tensors': {}}
for t in doc['tensors']:
    p = os.path.join(m, t['path'])
    data = open(p, 'rb').read()
    res['tensors'][t['name']] = {
        'dtype': t['dtype'], 'size': t['size'], 'len': len(data),
        'values': list(struct.unpack('<%df' % (len(data) // 4), data))[:4],
        'xdtype': os.getxattr(p, 'user.tensorfs.dtype').decode(),
        'direct': 'offset' in t, 'xoffset': 'user.tensorfs.offset' in os.listxattr(p)}
res['top'] = sorted(n for n in os.listdir(m) if not n.startswith('.'))
res['dots'] = sorted(n for n in os.listdir(m) if n.startswith('.'))
res['native_ids'] = open(os.path.join(m, '.native', 'ids'), 'rb').read().hex()
print(json.dumps(res))
`, m.Dir)
	var res struct {
		View    string `json:"view"`
		Tensors map[string]struct {
			DType   string    `json:"dtype"`
			Size    int64     `json:"size"`
			Len     int64     `json:"len"`
			Values  []float64 `json:"values"`
			XDType  string    `json:"xdtype"`
			Direct  bool      `json:"direct"`
			XOffset bool      `json:"xoffset"`
		} `json:"tensors"`
		Top       []string `json:"top"`
		Dots      []string `json:"dots"`
		NativeIDs string   `json:"native_ids"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.View != "F32" {
		t.Errorf(`index.json "view" = %q`, res.View)
	}
	if got := strings.Join(res.Top, ","); got != "model,scale" {
		t.Errorf("top level %s, want model,scale (ids and the U8 tensor cannot be F32)", got)
	}
	if got := strings.Join(res.Dots, ","); got != ".bf16,.f16,.f32,.f64,.files,.native,.npy,.safetensors,.split,.tensorfs" {
		t.Errorf("hidden top level %s", got)
	}
	if res.NativeIDs != hexString(ts[2].Data) {
		t.Errorf(".native/ids = %s", res.NativeIDs)
	}
	want := map[string]struct {
		size   int64
		values []float64
		direct bool
	}{
		"model/layers.0/w": {48, nil, true},
		"model/layers.0/b": {16, []float64{1, 2, 3, -1}, false},
		"scale":            {4, []float64{1}, false},
	}
	if len(res.Tensors) != len(want) {
		t.Errorf("index.json lists %d tensors, want %d", len(res.Tensors), len(want))
	}
	for name, w := range want {
		got, ok := res.Tensors[name]
		if !ok {
			t.Errorf("%s missing", name)
			continue
		}
		if got.DType != "F32" || got.XDType != "F32" || got.Size != w.size || got.Len != w.size || got.Direct != w.direct || got.XOffset != w.direct {
			t.Errorf("%s: %+v, want F32, %d bytes, direct %v", name, got, w.size, w.direct)
		}
		if w.values != nil && !equalFloats(got.Values, w.values) {
			t.Errorf("%s values %v, want %v", name, got.Values, w.values)
		}
	}
	// The client reads such a mount as the checkpoint as stored (through
	// index.json's "native" and .native/): tensorfs load gives the same
	// hashes through it as from the file, integers and bool included.
	for _, args := range [][]string{{}, {"--dtype", "f32"}, {"--dtype", "bf16"}} {
		direct := runTensorfs(t, append(append([]string{"load", "--sha256", "--quiet"}, args...), src)...)
		via := runTensorfs(t, append(append([]string{"load", "--sha256", "--quiet"}, args...), m.Dir)...)
		if direct.code != 0 || via.code != 0 || via.stdout != direct.stdout || strings.Count(direct.stdout, "\n") != len(ts) {
			t.Errorf("load --sha256 %v: through the --dtype f32 mount (exit %d)\n%s\ndirectly (exit %d)\n%s\nstderr: %s%s",
				args, via.code, via.stdout, direct.code, direct.stdout, via.stderr, direct.stderr)
		}
	}
	m.Unmount()
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestStats reads through the mount and checks .tensorfs/stats.json
// counts it.
func TestStats(t *testing.T) {
	src, ts := cliFixture(t)
	m := mount(t, src)
	out := runPy(t, `
import json, os, sys
m = sys.argv[1]
before = json.load(open(os.path.join(m, '.tensorfs', 'stats.json')))
n = len(open(os.path.join(m, 'model', 'layers.0', 'w'), 'rb').read())
after = json.load(open(os.path.join(m, '.tensorfs', 'stats.json')))
print(json.dumps([before, after, n]))
`, m.Dir)
	var res []json.RawMessage
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res) != 3 {
		t.Fatalf("%v: %s", err, out)
	}
	var before, after struct {
		Reads, Bytes, Errors, Panics, Tensors uint64
	}
	json.Unmarshal(res[0], &before)
	json.Unmarshal(res[1], &after)
	if after.Reads <= before.Reads || after.Bytes < before.Bytes+48 || after.Errors != 0 || after.Panics != 0 || after.Tensors != uint64(len(ts)) {
		t.Errorf("stats before %+v after %+v", before, after)
	}
	m.Unmount()
}
