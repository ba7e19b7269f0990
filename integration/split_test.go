package integration

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// splitScript checks every mount given (after the dtype table) against
// NumPy: every part (numpy.array_split bounds; parts 1, 2, 3 and 8) of
// every dimension of every tensor in the stored tree, and every part of 3
// of every dimension in each float view and .npy/, byte for byte; parts
// of a quantized type as stored exist exactly where they fall on whole
// blocks; xattrs; what is absent; listings.
//
// The views are checked at 3 parts only: a view of a part is the view's
// conversion of the part's elements, and 3 parts already have every case
// the view adds (the first, a middle and the last part; uneven parts;
// bounds inside a quantized block; empty parts of a dimension shorter
// than 3), while the part bounds themselves (1, 2, 3, 8) are checked in
// the stored tree. Checking each view at every part count as well was
// 96,171 slices instead of 36,474, and 351 s instead of 158 s (two cores,
// load average about 10).
const splitScript = `
import json, os, sys, errno
import numpy as np
blocks = json.loads(sys.argv[1])
mounts = sys.argv[2:]
VIEWS = {'.f32': '<f4', '.f16': '<f2', '.bf16': '<u2', '.f64': '<f8'}
PARTS = (1, 2, 3, 8)
VIEW_PARTS = (3,)
bad = []
checked = 0
def read(p):
    with open(p, 'rb') as f:
        return f.read()
def exists(p):
    try:
        os.stat(p)
        return True
    except OSError as e:
        if e.errno != errno.ENOENT:
            bad.append('%s: %s' % (p, e))
        return False
def bounds(n, parts, k):
    a = np.array_split(np.arange(n), parts)[k]
    s = int(np.sum([len(x) for x in np.array_split(np.arange(n), parts)[:k]]))
    return s, s + len(a)
for m in mounts:
    doc = json.load(open(os.path.join(m, '.tensorfs', 'index.json')))
    ranks = [len(t['shape']) for t in doc['tensors']]
    maxrank = max(ranks + [0])
    got = sorted(os.listdir(os.path.join(m, '.split')), key=int)
    if got != [str(d) for d in range(maxrank)]:
        bad.append('%s/.split lists %s (max rank %d)' % (m, got, maxrank))
    for absent in ('.split/%d' % maxrank, '.split/0/0', '.split/0/3/3', '.split/00', '.split/0/1024'):
        if exists(os.path.join(m, absent)):
            bad.append('%s/%s exists' % (m, absent))
    if maxrank > 0:
        listed = set()
        top = os.path.join(m, '.split', '0', '1', '0')
        for d, _, fs in os.walk(top):
            for f in fs:
                listed.add(os.path.relpath(os.path.join(d, f), top))
        want = set(t['path'] for t in doc['tensors'] if len(t['shape']) > 0)
        if listed != want:
            bad.append('%s/.split/0/1/0 lists %d files, want %d: %s' % (m, len(listed), len(want), sorted(listed ^ want)[:5]))
    for t in doc['tensors']:
        shape, path, dt = t['shape'], t['path'], t['dtype']
        if not shape:
            if exists(os.path.join(m, '.split', '0', '1', '0', path)):
                bad.append('%s: scalar %s has a part' % (m, path))
            continue
        if len(shape) < maxrank and exists(os.path.join(m, '.split', str(len(shape)), '1', '0', path)):
            bad.append('%s: %s has a part of dim %d' % (m, path, len(shape)))
        be, bb = blocks[dt]
        raw = read(os.path.join(m, path))
        n = shape[-1]
        row = n // be * bb
        stored = np.frombuffer(raw, np.uint8).reshape(tuple(shape[:-1]) + (row,))
        whole = {}
        for v, npdt in VIEWS.items():
            p = os.path.join(m, v, path)
            if os.path.exists(p):
                whole[v] = np.frombuffer(read(p), npdt).reshape(shape)
        npyp = os.path.join(m, '.npy', path + '.npy')
        if os.path.exists(npyp):
            whole['.npy'] = np.load(npyp)
        for dim in range(len(shape)):
            for parts in PARTS:
                for k in range(parts):
                    sub = os.path.join('.split', str(dim), str(parts), str(k))
                    # the stored tree
                    p = os.path.join(m, sub, path)
                    if dim < len(shape) - 1:
                        ref = np.array_split(stored, parts, axis=dim)[k].tobytes()
                    else:
                        s, e = bounds(n, parts, k)
                        ref = None
                        if s % be == 0 and e % be == 0:
                            ref = stored[..., s // be * bb:e // be * bb].tobytes()
                    if ref is None:
                        if exists(p):
                            bad.append('%s: %s is off the %s blocks but exists' % (m, p, dt))
                    elif not exists(p):
                        bad.append('%s: %s missing' % (m, p))
                    else:
                        checked += 1
                        if read(p) != ref:
                            bad.append('%s: %s differs from numpy.array_split' % (m, p))
                        xs = json.loads(os.getxattr(p, 'user.tensorfs.split'))
                        s, e = bounds(shape[dim], parts, k)
                        if xs != {'dim': dim, 'parts': parts, 'part': k, 'start': s, 'end': e}:
                            bad.append('%s: %s split xattr %s' % (m, p, xs))
                        sh = list(shape)
                        sh[dim] = e - s
                        if json.loads(os.getxattr(p, 'user.tensorfs.shape')) != sh:
                            bad.append('%s: %s shape xattr' % (m, p))
                    # the views and .npy/
                    if parts not in VIEW_PARTS:
                        continue
                    for v, w in whole.items():
                        ref = np.array_split(w, parts, axis=dim)[k]
                        if v == '.npy':
                            p = os.path.join(m, v, sub, path + '.npy')
                        else:
                            p = os.path.join(m, v, sub, path)
                        if not exists(p):
                            bad.append('%s: %s missing' % (m, p))
                            continue
                        checked += 1
                        if v == '.npy':
                            a = np.load(p, mmap_mode='r')
                            if a.dtype != ref.dtype or a.shape != ref.shape or a.tobytes() != ref.tobytes():
                                bad.append('%s: %s differs from numpy.array_split (%s %s)' % (m, p, a.dtype, a.shape))
                        elif read(p) != ref.tobytes():
                            bad.append('%s: %s differs from numpy.array_split' % (m, p))
print(json.dumps({'checked': checked, 'bad': bad[:40], 'nbad': len(bad)}))
`

// TestSplitThroughMount: every slice of every tensor of the whole shared
// test set (every format, strided PyTorch tensors, Fortran-order and
// big-endian NumPy arrays, GGUF quantized blocks) is byte-identical to
// numpy.array_split through the mount, in the stored tree, every float
// view and .npy/ (valid .npy files; the views at 3 parts, see
// splitScript); and `tensorfs cat --split` writes the same bytes without
// mounting.
func TestSplitThroughMount(t *testing.T) {
	needFUSE(t)
	testenv.Python(t, "numpy")
	root := testenv.Dir(t)
	var srcs []fxSource
	for _, f := range fxFiles(t, root) {
		if strings.Contains(f, "negative") || strings.HasSuffix(f, ".f32ref") || strings.HasSuffix(f, ".json") || strings.HasSuffix(f, ".tsv") {
			continue
		}
		if r := runTensorfs(t, "ls", f); r.code != 0 {
			continue // refused: the formats' own tests check why
		}
		srcs = append(srcs, fxSource{path: f})
	}
	if len(srcs) < 50 {
		testenv.SkipOrFail(t, "expected the shared test files under "+root)
	}
	blocks := map[string][2]int64{}
	for _, d := range dtype.All() {
		blocks[d.String()] = [2]int64{d.Info().BlockElems, d.Info().BlockBytes}
	}
	bj, _ := json.Marshal(blocks)
	out := fxCheckMounts(t, splitScript, []string{string(bj)}, srcs)
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var res struct {
			Checked int      `json:"checked"`
			Bad     []string `json:"bad"`
			NBad    int      `json:"nbad"`
		}
		if err := json.Unmarshal([]byte(line), &res); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		checked += res.Checked
		for _, b := range res.Bad {
			t.Error(b)
		}
		if res.NBad > len(res.Bad) {
			t.Errorf("... and %d more", res.NBad-len(res.Bad))
		}
	}
	t.Logf("%d sources, %d slices checked against numpy.array_split", len(srcs), checked)
	if checked < 1000 {
		t.Errorf("only %d slices checked", checked)
	}
}

// TestCatSplit: `tensorfs cat --split D/N/K` writes, without mounting,
// the bytes of the mount's .split/D/N/K/ file (stored, --dtype, --npy);
// a part that does not exist is one line and exit 1, a malformed D/N/K a
// usage error.
func TestCatSplit(t *testing.T) {
	needFUSE(t)
	cases := []struct {
		src, name string
		flags     []string
		rel       string // under the mount
	}{
		{"generated/np_f4_fortran.npy", "np_f4_fortran", nil, ".split/1/3/1/np_f4_fortran"},
		{"generated/np_f4_fortran.npy", "np_f4_fortran", []string{"--npy"}, ".npy/.split/0/2/1/np_f4_fortran.npy"},
		{"gguf/quantized/ollama-ggml-q8_0.gguf", "blk.1.ffn_up.weight", nil, ".split/2/8/5/blk.1.ffn_up.weight"},
		{"gguf/quantized/ollama-ggml-q8_0.gguf", "blk.0.ffn_up.weight", []string{"--dtype", "f16"}, ".f16/.split/1/3/2/blk.0.ffn_up.weight"},
		{"generated/torch_nested_ckpt.pt", "model/bf16", []string{"--dtype", "f32"}, ".f32/.split/2/3/0/model/bf16"},
		{"generated/torch_nested_ckpt.pt", "model/expanded", nil, ".split/1/2/1/model/expanded"},
	}
	for _, c := range cases {
		src := testenv.Path(t, c.src)
		m := mount(t, src)
		want := runPy(t, "import sys; print(open(sys.argv[1], 'rb').read().hex())", m.Path(c.rel))
		split := c.rel[strings.Index(c.rel, ".split/")+len(".split/"):]
		split = strings.Join(strings.Split(split, "/")[:3], "/")
		r := runTensorfs(t, append(append([]string{"cat"}, c.flags...), "--split", split, src, c.name)...)
		if r.code != 0 || hexString([]byte(r.stdout)) != strings.TrimSpace(want) {
			t.Errorf("cat %v --split %s %s: exit %d (%s), %d bytes; mount has %d", c.flags, split, c.name, r.code, r.stderr, len(r.stdout), len(strings.TrimSpace(want))/2)
		}
		m.Unmount()
	}
	q8 := testenv.Path(t, "gguf/quantized/ollama-ggml-q8_0.gguf")
	for _, bad := range []struct {
		split string
		code  int
		frag  string
	}{
		{"3/1/0", 1, "no part 3/1/0"},
		{"1/3/1", 1, "whole blocks"},
		{"0/2/2", 2, "part K < N"},
		{"0/2", 2, "not D/N/K"},
	} {
		r := runTensorfs(t, "cat", "--split", bad.split, q8, "blk.0.ffn_up.weight")
		if r.code != bad.code || !strings.Contains(r.stderr, bad.frag) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 && bad.code == 1 {
			t.Errorf("cat --split %s: exit %d, stderr %q; want %d and %q", bad.split, r.code, r.stderr, bad.code, bad.frag)
		}
	}
}
