package hdf5

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// all returns the offsets of sig in b.
func all(b []byte, sig string) []int {
	var out []int
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte(sig))
		if j < 0 {
			return out
		}
		out = append(out, i+j)
		i += j + 1
	}
}

// reseal rewrites the checksum of the n bytes at start (it follows
// them), so that a test reaches the check behind the checksum.
func reseal(b []byte, start, n int) {
	binary.LittleEndian.PutUint32(b[start+n:], lookup3(b[start:start+n]))
}

func fileReader(b []byte) *reader {
	r := &reader{f: mem(b), name: "w.h5", size: int64(len(b))}
	if _, err := r.superblock(0); err != nil {
		panic(err)
	}
	return r
}

// nameIndex returns dense.h5's link name index of depth 1 (the group
// "many": 100 links in a root internal node over leaves).
func nameIndex(t *testing.T, b []byte) *btree2 {
	t.Helper()
	r := fileReader(b)
	for _, off := range all(b, "BTHD") {
		bt, err := r.btree2(uint64(off), 5, "test")
		if err == nil && bt.depth == 1 {
			return bt
		}
	}
	t.Fatal("no link name index of depth 1")
	return nil
}

// TestDenseLoops: a name index whose internal node names one leaf twice,
// a fractal heap whose nested indirect block is its root (a loop of
// indirect blocks), and a record whose hash is not its name's are one
// line each, checksums resealed so that the structure check is reached.
func TestDenseLoops(t *testing.T) {
	b := gunzipFixture(t, "dense.h5")
	bt := nameIndex(t, b)
	root := int(bt.root)
	ptr := root + 6 + bt.rootN*bt.recSize // first child pointer
	step := 8 + bt.nrecSize
	loop := bytes.Clone(b)
	copy(loop[ptr+step:ptr+2*step], loop[ptr:ptr+step]) // child 1 = child 0
	reseal(loop, root, 6+bt.rootN*bt.recSize+(bt.rootN+1)*step)
	_, err := Parse(mem(loop))
	oneLine(t, "B-tree DAG", err, "reached twice (a loop)")

	// A record whose hash is not its name's.
	hash := bytes.Clone(b)
	hash[root+6] ^= 1
	reseal(hash, root, 6+bt.rootN*bt.recSize+(bt.rootN+1)*step)
	_, err = Parse(mem(hash))
	oneLine(t, "hash", err, "hashes")

	// deep.h5: the root indirect block of "deep"'s heap has a nested
	// indirect block; point that entry at the root itself.
	d := gunzipFixture(t, "deep.h5")
	r := fileReader(d)
	ibs := all(d, "FHIB")
	if len(ibs) < 2 {
		t.Fatalf("deep.h5: %d indirect blocks, want a nested one", len(ibs))
	}
	heaps := all(d, "FRHP")
	var h *fheap
	for _, off := range heaps {
		if hh, err := r.fheap(uint64(off), "test"); err == nil && hh.rows > hh.directRows {
			h = hh
		}
	}
	if h == nil {
		t.Fatal("deep.h5: no heap with indirect rows")
	}
	rootIB := int(h.root)
	head := 5 + 8 + h.offSize
	n := h.rows * int(h.width)
	found := false
	for i := h.directRows * int(h.width); i < n; i++ {
		p := rootIB + head + 8*i
		if a := binary.LittleEndian.Uint64(d[p:]); a != ^uint64(0) && !found {
			loop := bytes.Clone(d)
			binary.LittleEndian.PutUint64(loop[p:], uint64(rootIB))
			reseal(loop, rootIB, head+8*n)
			_, err := Parse(mem(loop))
			oneLine(t, "indirect block loop", err, "(a loop")
			found = true
		}
	}
	if !found {
		t.Fatal("deep.h5: no nested indirect block in the root's rows")
	}
}

// TestDenseChecksums: a byte flipped in a v2 B-tree header, leaf or
// internal node, a fractal heap header, direct block or indirect block
// is one line naming the structure, its offset and the checksum.
func TestDenseChecksums(t *testing.T) {
	b := gunzipFixture(t, "deep.h5")
	d := gunzipFixture(t, "dense.h5")
	for _, c := range []struct {
		file []byte
		sig  string
		at   int // byte flipped, after the signature
		what string
	}{
		{d, "BTHD", 10, "B-tree header"},
		{d, "BTIN", 8, "B-tree node"},
		{d, "BTLF", 8, "B-tree node"},
		{d, "FRHP", 30, "fractal heap header"},
		{d, "FHDB", 40, "fractal heap direct block"},
		{d, "FHIB", 20, "fractal heap indirect block"},
		{b, "FHIB", 20, "fractal heap indirect block"},
	} {
		var offs []int
		for _, o := range all(c.file, c.sig) {
			if !strings.HasPrefix(c.sig, "BT") || c.file[o+5] == 5 { // name indexes (not creation order)
				offs = append(offs, o)
			}
		}
		if len(offs) == 0 {
			t.Fatalf("no %s", c.sig)
		}
		bad := bytes.Clone(c.file)
		off := offs[len(offs)-1]
		bad[off+c.at] ^= 0x40
		_, err := Parse(mem(bad))
		oneLine(t, c.sig, err, c.what)
		if err != nil && (!strings.Contains(err.Error(), "checksum") || !strings.Contains(err.Error(), "(at byte")) {
			t.Errorf("%s: %v, want a checksum mismatch", c.sig, err)
		}
	}
}
