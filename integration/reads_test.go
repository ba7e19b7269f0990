package integration

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// pyReadSweep reads files of a mount at a sweep of offsets and lengths
// (page edges, max_read edges, mid-element, the end, past the end, and
// 200 seeded random ones) with os.pread, both through the page cache and
// with O_DIRECT (which hands the server the exact offset and length), and
// compares with the expected bytes.
//
// argv: FILE SOURCE OFFSET SIZE ...: FILE must equal SIZE bytes of
// SOURCE at OFFSET; SOURCE "-" means FILE's own whole contents (read in
// one go), which checks that pieces agree with the whole.
const pyReadSweep = `
import os, random, sys
args = sys.argv[1:]
fail = []
checked = 0
for i in range(0, len(args), 4):
    path, src, off0, size = args[i], args[i + 1], int(args[i + 2]), int(args[i + 3])
    if src == '-':
        with open(path, 'rb') as f:
            want = f.read()
    else:
        with open(src, 'rb') as f:
            f.seek(off0)
            want = f.read(size)
    size = len(want)
    if os.stat(path).st_size != size:
        fail.append('%s: size %d, want %d' % (path, os.stat(path).st_size, size))
        continue
    M = 1 << 20
    offs = sorted(set(o for o in [0, 1, 2, 3, 5, 7, 4095, 4096, 4097, 65535, 65536, 131071, 131072, 131073,
        M - 4096, M - 1, M, M + 1, size // 2, size // 2 + 1, size - 4097, size - 4096, size - 3,
        size - 1, size, size + 1, size + 4096, 1 << 40] if o >= 0))
    lens = [0, 1, 2, 3, 5, 4095, 4096, 4097, 65539, 131072, 131073, M - 8192, M, M + 4097, size, size + 7]
    rnd = random.Random(len(path) + size)
    pairs = [(o, n) for o in offs for n in lens]
    pairs += [(rnd.randrange(size + 10), rnd.randrange(1 << 21)) for _ in range(200)]
    for flags in (os.O_RDONLY, os.O_RDONLY | os.O_DIRECT):
        fd = os.open(path, flags)
        try:
            for off, n in pairs:
                got = os.pread(fd, n, off)
                checked += 1
                if got != want[off:off + n]:
                    fail.append('%s: pread(%d, %d)%s: %d bytes, differ from the whole file' %
                                (path, n, off, ' O_DIRECT' if flags & os.O_DIRECT else '', len(got)))
                    break
        finally:
            os.close(fd)
if fail:
    sys.stderr.write('\n'.join(fail[:20]) + '\n')
    sys.exit(1)
print(checked)
`

// sweepFixture writes a safetensors file whose tensors straddle the
// kernel's request sizes: one just over 3 MiB, an odd-sized one, an empty
// one and small ones of several dtypes.
func sweepFixture(t *testing.T, dir string) (string, []stTensor, int64) {
	big := 3<<20 + 12
	ts := []stTensor{
		{Name: "big", DType: "F32", Shape: []int64{int64(big / 4)}, Data: pattern(big, 1)},
		{Name: "odd", DType: "U8", Shape: []int64{3, 333}, Data: pattern(999, 2)},
		{Name: "empty", DType: "F32", Shape: []int64{0, 4}, Data: nil},
		{Name: "half", DType: "BF16", Shape: []int64{7, 3}, Data: pattern(42, 3)},
		{Name: "scalar", DType: "F64", Shape: []int64{}, Data: pattern(8, 4)},
	}
	src := filepath.Join(dir, "sweep.safetensors")
	base := writeSafetensors(t, src, ts, nil)
	return src, ts, base
}

// TestReadSweep reads every tensor file at a sweep of offsets and lengths
// in every backing mode, with and without splicing, and compares with the
// source file's bytes.
func TestReadSweep(t *testing.T) {
	dir := t.TempDir()
	src, ts, base := sweepFixture(t, dir)
	for _, flags := range [][]string{
		nil,
		{"--no-splice"},
		{"--backing", "pread"},
		{"--backing", "direct"},
		{"--max-write", "65536"},
	} {
		t.Run(strings.Join(append([]string{"default"}, flags...), " "), func(t *testing.T) {
			m := startMount(t, src, flags...)
			if err := m.waitReady(); err != nil {
				if strings.Contains(err.Error(), "O_DIRECT") {
					t.Skipf("direct I/O unsupported here: %v", err)
				}
				t.Fatal(err)
			}
			var args []string
			off := base
			for _, tt := range ts {
				args = append(args, m.Path(tt.Name), src, itoa(off), itoa(int64(len(tt.Data))))
				off += int64(len(tt.Data))
			}
			runPy(t, pyReadSweep, args...)
			m.Unmount()
		})
	}
}

// TestEveryFileConsistent checks, for every file of a mount (the stored
// tree, the converted views, .npy and .tensorfs), that reads at any
// offset and length equal the bytes of the whole file.
func TestEveryFileConsistent(t *testing.T) {
	dir := t.TempDir()
	src, _, _ := sweepFixture(t, dir)
	m := mount(t, src)
	// The walk is a subprocess too: only subprocesses touch the mount.
	files := strings.Fields(runPy(t, `
import os, sys
for dp, dns, fns in os.walk(sys.argv[1]):
    for f in fns:
        if f != 'stats.json':
            print(os.path.join(dp, f))
`, m.Dir))
	if len(files) < 7 { // 5 tensors, index.json, metadata at least
		t.Fatalf("only %d files: %q", len(files), files)
	}
	var args []string
	for _, f := range files {
		args = append(args, f, "-", "0", "0")
	}
	runPy(t, pyReadSweep, args...)
	m.Unmount()
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
