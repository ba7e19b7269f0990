package integration

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// pySafetensorsCheck is an independent reader: it parses the safetensors
// files itself (json + struct) and compares a mount with them: index.json
// (format, sources, metadata, tensors in name order with dtype, shape,
// size, source, offset), every tensor file's size, bytes and xattrs, that
// the stored tree holds exactly the index's files, and the metadata files.
//
// argv: MOUNT METADATA SOURCE... where METADATA is the expected metadata
// as JSON, or "-" for the sources' __metadata__ merged in order.
const pySafetensorsCheck = `
import json, os, struct, sys
mnt, want_meta, srcs = sys.argv[1], sys.argv[2], sys.argv[3:]
X = 'user.tensorfs.'
real = os.path.realpath
fail = []
def check(cond, msg):
    if not cond:
        fail.append(msg)

tensors, metadata = {}, {}
for s in srcs:
    with open(s, 'rb') as f:
        raw = f.read()
    n = struct.unpack('<Q', raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    for k, v in (hdr.pop('__metadata__', None) or {}).items():
        metadata.setdefault(k, v)
    base = 8 + n
    for name, h in hdr.items():
        assert name not in tensors, 'duplicate ' + name
        a, b = h['data_offsets']
        tensors[name] = (s, raw[base + a:base + b], base + a, h)
if want_meta != '-':
    metadata = json.loads(want_meta)

with open(os.path.join(mnt, '.tensorfs', 'index.json'), encoding='utf-8') as f:
    doc = json.load(f)
check(doc['format'] == 'safetensors', 'format %r' % doc['format'])
check(sorted(map(real, doc['sources'])) == sorted(map(real, srcs)), 'sources %r' % doc['sources'])
check(doc['metadata'] == metadata, 'metadata %r, want %r' % (doc['metadata'], metadata))
names = [t['name'] for t in doc['tensors']]
check(names == sorted(tensors, key=lambda s: s.encode('utf-8')), 'tensor names or order: %r' % names[:8])

for t in doc['tensors']:
    name = t['name']
    if name not in tensors:
        fail.append('unknown tensor %r' % name)
        continue
    src, want, off, h = tensors[name]
    p = os.path.join(mnt, t['path'])
    st = os.stat(p)
    check(st.st_size == len(want), '%r: size %d, want %d' % (name, st.st_size, len(want)))
    check(st.st_mode & 0o777 == 0o444, '%r: mode %o' % (name, st.st_mode))
    with open(p, 'rb') as f:
        got = f.read()
    check(got == want, '%r: bytes differ' % name)
    check(t['dtype'] == h['dtype'], '%r: index dtype %r' % (name, t['dtype']))
    check(t['shape'] == h['shape'], '%r: index shape %r' % (name, t['shape']))
    check(t['size'] == len(want), '%r: index size %r' % (name, t['size']))
    check(t.get('offset') == off, '%r: index offset %r, want %d' % (name, t.get('offset'), off))
    check(real(t.get('source', '')) == real(src), '%r: index source %r' % (name, t.get('source')))
    x = {k[len(X):]: os.getxattr(p, k) for k in os.listxattr(p)}
    check(set(x) == {'name', 'dtype', 'shape', 'source', 'offset'}, '%r: xattrs %r' % (name, sorted(x)))
    check(x.get('name') == name.encode('utf-8'), '%r: xattr name %r' % (name, x.get('name')))
    check(x.get('dtype') == h['dtype'].encode(), '%r: xattr dtype %r' % (name, x.get('dtype')))
    check(json.loads(x.get('shape', b'null')) == h['shape'], '%r: xattr shape %r' % (name, x.get('shape')))
    check(x.get('offset') == str(off).encode(), '%r: xattr offset %r' % (name, x.get('offset')))
    check(real(x.get('source', b'').decode()) == real(src), '%r: xattr source %r' % (name, x.get('source')))

files = []
# A model directory's mount is one: its other files and model.safetensors
# (the export) sit beside the tensors, with no tensor xattrs.
beside = set(os.listdir(os.path.dirname(srcs[0]))) | {'model.safetensors'}
for dp, dns, fns in os.walk(mnt):
    if dp == mnt:
        dns[:] = [d for d in dns if not d.startswith('.')]
        fns = [f for f in fns if f not in beside or 'user.tensorfs.name' in os.listxattr(os.path.join(dp, f))]
    files += [os.path.relpath(os.path.join(dp, f), mnt) for f in fns]
check(sorted(files) == sorted(t['path'] for t in doc['tensors']),
      'stored tree has %d files, index %d' % (len(files), len(doc['tensors'])))

for k, v in metadata.items():
    if isinstance(v, str) and k and '/' not in k and '%' not in k and not k.startswith('.') and '\0' not in k:
        with open(os.path.join(mnt, '.tensorfs', 'metadata', k), encoding='utf-8') as f:
            check(f.read() == v, 'metadata file %r' % k)

if fail:
    sys.stderr.write('\n'.join(fail[:30]) + '\n')
    sys.exit(1)
print(len(doc['tensors']))
`

// TestHardNames mounts names that cannot be paths as they are: all are
// reachable through index.json's paths, with the exact name in the xattr.
func TestHardNames(t *testing.T) {
	names := []string{
		"a", "a/b", // a file that is also a directory
		"/lead", "trail/", "x//y", // empty components
		"..", "./.", "dir/../up", // dot components
		".hidden", "dir/.hidden", // leading dots
		"nul\x00byte", "tab\tand\nnewline", "del\x7f",
		strings.Repeat("long", 100),               // a 400-byte component
		"deep/" + strings.Repeat("é", 200) + "/w", // a 400-byte directory
		"pct%41", "%", "%2E", "sp ace", "ünï/cödé", "emoji🙂", // escapes and UTF-8
		".f32", ".tensorfs/index.json", ".npy/x", // would hide the control and view dirs
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "hard.safetensors")
	var ts []stTensor
	for i, n := range names {
		ts = append(ts, stTensor{Name: n, DType: "U8", Shape: []int64{int64(i + 1)}, Data: pattern(i+1, byte(i))})
	}
	writeSafetensors(t, src, ts, map[string]string{"odd/key": "v1", ".dot": "v2", "%": "v3"})
	m := mount(t, src)
	out := runPy(t, pySafetensorsCheck, m.Dir, "-", src)
	if got := strings.TrimSpace(out); got != fmt.Sprint(len(names)) {
		t.Errorf("checked %s tensors, want %d", got, len(names))
	}
	// Metadata keys that are not file names are percent-escaped.
	got := runPy(t, `
import os, sys
d = os.path.join(sys.argv[1], '.tensorfs', 'metadata')
print(' '.join(sorted(n + '=' + open(os.path.join(d, n)).read() for n in os.listdir(d))))
`, m.Dir)
	if want := "%25=v3 %2Edot=v2 odd%2Fkey=v1"; strings.TrimSpace(got) != want {
		t.Errorf("metadata files: %s, want %s", got, want)
	}
	m.Unmount()
}
