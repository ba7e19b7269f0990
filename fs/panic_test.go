package fs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// panicSource is a source whose reads of [from, to) panic, the way a bug
// in a new kind of backing store (or in a view over it) would.
type panicSource struct {
	*memSource
	from, to int64
}

func (p *panicSource) ReadAt(b []byte, off int64) (int, error) {
	if off < p.to && off+int64(len(b)) > p.from {
		panic(fmt.Sprintf("test panic reading [%d,+%d)", off, len(b)))
	}
	return p.memSource.ReadAt(b, off)
}

// lockedBuffer is a log destination safe for the serving goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestPanicBecomesEIO serves a tree whose source panics on the bytes of
// one tensor, through the public constructor (no test hook in the
// package), and reads it from a subprocess many times, natively and
// through the converted and .npy views: every such read is EIO and a log
// line, stats.json counts the panics, and the other files keep being
// served exactly between and after the panics.
func TestPanicBecomesEIO(t *testing.T) {
	idx, mem := fixture(t, basicSpecs)
	var bad index.Tensor
	for _, tn := range idx.Tensors {
		if tn.Name == "model/layers.1/attn.weight" {
			bad = tn
		}
	}
	src := &panicSource{memSource: mem, from: bad.Offset, to: bad.Offset + bad.Size}
	logs := &lockedBuffer{}
	r := newRoot(t, idx, src, Options{})
	if _, err := os.Stat("/dev/fuse"); err != nil {
		testenv.SkipOrFail(t, "no /dev/fuse: "+err.Error())
	}
	dir := t.TempDir()
	server, err := Mount(dir, r, MountOptions{Logger: log.New(logs, "tensorfs: ", 0)})
	if err != nil {
		testenv.SkipOrFail(t, "cannot mount FUSE here: "+err.Error())
	}
	t.Cleanup(func() {
		if err := server.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
			Detach(dir)
		}
	})

	good := r.lookupPath("model/embed").file.t
	const rounds = 20
	out := py(t, `
import errno, json, os, sys
m, rounds = sys.argv[1], int(sys.argv[2])
res = {'errors': {}, 'good': []}
def read(p, direct):
    fd = os.open(os.path.join(m, p), os.O_RDONLY | (os.O_DIRECT if direct else 0))
    try:
        return os.pread(fd, 1 << 20, 0)
    finally:
        os.close(fd)
for i in range(rounds):
    for p in ('model/layers.1/attn.weight', '.f32/model/layers.1/attn.weight', '.npy/model/layers.1/attn.weight.npy'):
        try:
            read(p, True)
            e = 'no error'
        except OSError as ex:
            e = errno.errorcode[ex.errno]
        res['errors'][e] = res['errors'].get(e, 0) + 1
    res['good'].append(read('model/embed', i % 2 == 0).hex())
res['stats'] = json.load(open(os.path.join(m, '.tensorfs', 'stats.json')))
print(json.dumps(res))
`, dir, fmt.Sprint(rounds))
	var res struct {
		Errors map[string]int `json:"errors"`
		Good   []string       `json:"good"`
		Stats  Stats          `json:"stats"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(res.Errors) != 1 || res.Errors["EIO"] != 3*rounds {
		t.Errorf("reads that panic: %v, want EIO %d times", res.Errors, 3*rounds)
	}
	want := hexOf(mem.data[good.Offset : good.Offset+good.Size])
	for i, g := range res.Good {
		if g != want {
			t.Errorf("round %d: model/embed = %s, want %s", i, g, want)
		}
	}
	if len(res.Good) != rounds {
		t.Errorf("%d good reads, want %d", len(res.Good), rounds)
	}
	if res.Stats.Panics != 3*rounds {
		t.Errorf("stats.json panics = %d, want %d", res.Stats.Panics, 3*rounds)
	}
	lines := strings.Count(logs.String(), "panic while serving a request (answered EIO): test panic reading")
	if lines != 3*rounds {
		t.Errorf("%d log lines about the panics, want %d; log:\n%s", lines, 3*rounds, logs)
	}
}
