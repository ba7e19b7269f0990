package integration

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// faultTensors are three 64 KiB tensors: a (U8), b and c (F32 holding
// small exact values, so that Python can compute the .f64 view).
func faultTensors() []stTensor {
	f32 := func(seed float32) []byte {
		b := make([]byte, 0, 64<<10)
		for i := 0; i < 16<<10; i++ {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(seed+float32(i)*0.25))
		}
		return b
	}
	return []stTensor{
		{Name: "a", DType: "U8", Shape: []int64{64 << 10}, Data: pattern(64<<10, 5)},
		{Name: "b", DType: "F32", Shape: []int64{16 << 10}, Data: f32(1)},
		{Name: "c", DType: "F32", Shape: []int64{16 << 10}, Data: f32(-3)},
	}
}

// pyFaultReads runs a list of read checks on a mount and prints a JSON
// list of failures. argv[1] is a file holding a JSON list of checks:
//
//	{"path", "off", "n", "direct": bool, "want": hex or null, "errno": name or null, "size": int or null}
//
// "want" is the bytes expected, "errno" the error expected instead;
// "size", when set, is the size stat must still report. Reads with
// O_DIRECT go to the server every time; the others may be served from
// the page cache.
const pyFaultReads = `
import errno, json, os, sys
checks = json.load(open(sys.argv[1]))
bad = []
for c in checks:
    what = '%s pread(%d at %d)%s' % (c['path'], c['n'], c['off'], ' O_DIRECT' if c['direct'] else '')
    if c.get('size') is not None and os.stat(c['path']).st_size != c['size']:
        bad.append('%s: stat size %d, want %d' % (what, os.stat(c['path']).st_size, c['size']))
    fd = os.open(c['path'], os.O_RDONLY | (os.O_DIRECT if c['direct'] else 0))
    try:
        got = os.pread(fd, c['n'], c['off'])
    except OSError as e:
        if c['errno'] is None or errno.errorcode.get(e.errno) != c['errno']:
            bad.append('%s: %s' % (what, e))
        continue
    finally:
        os.close(fd)
    if c['errno'] is not None:
        bad.append('%s: read %d bytes, want %s' % (what, len(got), c['errno']))
    elif got.hex() != c['want']:
        bad.append('%s: %d bytes, not the expected %d' % (what, len(got), len(c['want']) // 2))
print(json.dumps(bad))
`

// faultCheck is one read for pyFaultReads.
type faultCheck struct {
	Path   string  `json:"path"`
	Off    int64   `json:"off"`
	N      int64   `json:"n"`
	Direct bool    `json:"direct"`
	Want   *string `json:"want"`
	Errno  *string `json:"errno"`
	Size   *int64  `json:"size"`
}

func wantBytes(b []byte) *string { s := hexString(b); return &s }
func wantErrno(e string) *string { return &e }

// runFaultChecks runs checks in a subprocess and fails t for each one
// that did not come out as expected.
func runFaultChecks(t *testing.T, checks []faultCheck) {
	t.Helper()
	arg, err := json.Marshal(checks)
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	out := runPy(t, pyFaultReads, writeTemp(t, string(arg)))
	if err := json.Unmarshal([]byte(out), &bad); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, b := range bad {
		t.Error(b)
	}
}

// f64Of converts little-endian float32 bytes to little-endian float64
// bytes, the .f64 view's contents.
func f64Of(b []byte) []byte {
	out := make([]byte, 0, 2*len(b))
	for i := 0; i+4 <= len(b); i += 4 {
		out = binary.LittleEndian.AppendUint64(out, math.Float64bits(float64(math.Float32frombits(binary.LittleEndian.Uint32(b[i:])))))
	}
	return out
}

// serverAlive fails t if the mount's server has exited.
func serverAlive(t *testing.T, m *Mount) {
	t.Helper()
	select {
	case <-m.done:
		t.Fatalf("the server exited (%v); stderr:\n%s", m.err, m.Stderr())
	default:
	}
	if s := m.Stderr(); strings.Contains(s, "panic") || strings.Contains(s, "SIGBUS") || strings.Contains(s, "fatal") {
		t.Errorf("server log:\n%s", s)
	}
}

// TestTruncatedUnderMount truncates the checkpoint in the middle of
// tensor b while it is mounted, in every way of reading it (splicing from
// the file, copying out of the mapping, where a vanished page raises
// SIGBUS, and pread): reads of vanished bytes fail with EIO, files keep
// their size, the bytes that still exist and every other file are still
// served exactly, and the server keeps running and unmounts cleanly.
func TestTruncatedUnderMount(t *testing.T) {
	ts := faultTensors()
	for _, flags := range [][]string{
		nil, // splice from the file
		{"--no-splice"},
		{"--backing", "pread"},
		{"--backing", "pread", "--no-splice"},
	} {
		t.Run(strings.Join(append([]string{"default"}, flags...), " "), func(t *testing.T) {
			src := filepath.Join(t.TempDir(), "f.safetensors")
			base := writeSafetensors(t, src, ts, nil)
			m := mount(t, src, flags...)
			a, b, c := ts[0].Data, ts[1].Data, ts[2].Data
			// b keeps keep bytes; the cut is not on a page boundary, so
			// the mapping has a partial last page (zeros, no fault) and
			// whole vanished pages (SIGBUS).
			const keep = 30001
			if err := os.Truncate(src, base+int64(len(a))+keep); err != nil {
				t.Fatal(err)
			}
			size := func(n int) *int64 { v := int64(n); return &v }
			eio := wantErrno("EIO")
			var checks []faultCheck
			for _, direct := range []bool{true, false} {
				checks = append(checks,
					faultCheck{Path: m.Path("a"), N: 1 << 20, Direct: direct, Want: wantBytes(a), Size: size(len(a))},
					faultCheck{Path: m.Path("a"), Off: 4000, N: 5000, Direct: direct, Want: wantBytes(a[4000:9000])},
				)
			}
			checks = append(checks,
				// What is left of b.
				faultCheck{Path: m.Path("b"), N: 100, Direct: true, Want: wantBytes(b[:100]), Size: size(len(b))},
				faultCheck{Path: m.Path("b"), Off: keep - 1000, N: 1000, Direct: true, Want: wantBytes(b[keep-1000 : keep])},
				// Vanished: in the partial page, whole pages, straddling,
				// everything.
				faultCheck{Path: m.Path("b"), Off: keep, N: 10, Direct: true, Errno: eio},
				faultCheck{Path: m.Path("b"), Off: 50000, N: 4096, Direct: true, Errno: eio},
				faultCheck{Path: m.Path("b"), Off: keep - 10, N: 20, Direct: true, Errno: eio},
				faultCheck{Path: m.Path("b"), N: 1 << 20, Direct: true, Errno: eio},
				faultCheck{Path: m.Path("c"), N: 1 << 20, Direct: true, Errno: eio, Size: size(len(c))},
				faultCheck{Path: m.Path("c"), Off: 60000, N: 100, Direct: false, Errno: eio},
				// Views read the same bytes through the view layer.
				faultCheck{Path: m.Path(".f64/b"), N: 800, Direct: true, Want: wantBytes(f64Of(b[:400]))},
				faultCheck{Path: m.Path(".f64/b"), Off: 2 * 40000, N: 800, Direct: true, Errno: eio},
				faultCheck{Path: m.Path(".f64/c"), N: 8, Direct: true, Errno: eio, Size: size(2 * len(c))},
				faultCheck{Path: m.Path(".npy/c.npy"), Off: 128, N: 4096, Direct: true, Errno: eio},
				// The index is static and still served.
				faultCheck{Path: m.Path(".tensorfs/index.json"), N: 1, Direct: true, Want: wantBytes([]byte("{"))},
			)
			// The same reads again: nothing changed after the faults,
			// and what still exists is served as before.
			checks = append(checks, checks...)
			runFaultChecks(t, checks)

			serverAlive(t, m)
			var st struct {
				Errors uint64 `json:"errors"`
				Panics uint64 `json:"panics"`
			}
			if err := json.Unmarshal([]byte(mustRun(t, "cat", m.Path(".tensorfs/stats.json"))), &st); err != nil {
				t.Fatal(err)
			}
			if st.Errors == 0 || st.Panics != 0 {
				t.Errorf("stats.json: %d errors, %d panics; want some errors and no panics", st.Errors, st.Panics)
			}
			m.Unmount()
		})
	}
}

// TestReplacedUnderMount replaces the checkpoint by renaming another
// file over it while it is mounted (what a download or conversion tool
// does): the mount holds the file it validated, so it keeps serving
// exactly the old bytes, natively and converted, and never the new
// file's.
func TestReplacedUnderMount(t *testing.T) {
	ts := faultTensors()
	for _, flags := range [][]string{nil, {"--no-splice"}} {
		t.Run(strings.Join(append([]string{"default"}, flags...), " "), func(t *testing.T) {
			dir := t.TempDir()
			src := filepath.Join(dir, "f.safetensors")
			writeSafetensors(t, src, ts, nil)
			m := mount(t, src, flags...)

			other := make([]stTensor, len(ts))
			for i, tt := range ts {
				other[i] = tt
				other[i].Data = pattern(len(tt.Data), 99)
			}
			tmp := filepath.Join(dir, "f.safetensors.tmp")
			writeSafetensors(t, tmp, other, map[string]string{"replaced": "yes"})
			if err := os.Rename(tmp, src); err != nil {
				t.Fatal(err)
			}
			var checks []faultCheck
			for _, direct := range []bool{true, false} {
				for _, tt := range ts {
					checks = append(checks, faultCheck{Path: m.Path(tt.Name), N: 1 << 20, Direct: direct, Want: wantBytes(tt.Data)})
				}
				checks = append(checks, faultCheck{Path: m.Path(".f64/c"), Off: 8 * 1000, N: 8 * 3000, Direct: direct, Want: wantBytes(f64Of(ts[2].Data[4*1000 : 4*4000]))})
			}
			runFaultChecks(t, checks)
			serverAlive(t, m)
			m.Unmount()
		})
	}
}
