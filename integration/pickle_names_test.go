package integration

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPickleNamesThroughMount: entries of one dict whose names coincide
// (the int 1 and the str "1"; two tensor keys sharing a storage, as an
// old optimizer's state keyed by parameters has) are all mounted, the
// later ones as NAME#1, each with its own bytes, read from a subprocess.
func TestPickleNamesThroughMount(t *testing.T) {
	w := func(key string) []byte {
		return hPkTensor("FloatStorage", key, 4, 0, []int64{4}, []int64{1}, false)
	}
	pkl := hPkDict(hPkInt(1), w("0"), hPkStr("1"), w("1"),
		hPkStr("state"), hCat([]byte{'}', '('},
			w("2"), hCat([]byte{'}'}, hPkStr("exp_avg"), w("0"), []byte{'s'}),
			w("2"), hCat([]byte{'}'}, hPkStr("exp_avg"), w("1"), []byte{'s'}),
			[]byte{'u'}))
	s0, s1, s2 := pattern(16, 1), pattern(16, 2), pattern(16, 3)
	src := filepath.Join(t.TempDir(), "keys.pt")
	if err := os.WriteFile(src, hTorchZip(t, pkl, hMember{"0", s0}, hMember{"1", s1}, hMember{"2", s2}), 0o644); err != nil {
		t.Fatal(err)
	}
	m := mount(t, src)
	for path, want := range map[string][]byte{
		"1": s0, "1#1": s1, "state/2/exp_avg": s0, "state/2#1/exp_avg": s1,
	} {
		if got := mustRun(t, "cat", m.Path(path)); got != string(want) {
			t.Errorf("%s: %d bytes, not its tensor's", path, len(got))
		}
	}
	m.Unmount()
}
