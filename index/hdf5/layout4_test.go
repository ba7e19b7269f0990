package hdf5

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestChunkIndexLoops: a v2 B-tree chunk index whose internal node
// names one leaf twice, and an extensible array whose index block lists
// itself as a super block, are one line each (checksums resealed so
// that the structure check is reached).
func TestChunkIndexLoops(t *testing.T) {
	b := gunzipFixture(t, "chunks.h5")
	r := fileReader(b)
	var bt *btree2
	for _, off := range all(b, "BTHD") {
		if t2, err := r.btree2(uint64(off), 10, "test"); err == nil && t2.depth == 1 {
			bt = t2
		}
	}
	if bt == nil {
		t.Fatal("chunks.h5: no chunk index B-tree of depth 1")
	}
	root := int(bt.root)
	ptr := root + 6 + bt.rootN*bt.recSize
	step := r.so + bt.nrecSize
	loop := bytes.Clone(b)
	copy(loop[ptr+step:ptr+2*step], loop[ptr:ptr+step])
	reseal(loop, root, 6+bt.rootN*bt.recSize+(bt.rootN+1)*step)
	_, err := Parse(mem(loop))
	oneLine(t, "chunk B-tree DAG", err, "reached twice (a loop)")

	// The extensible array with a super block (earray/many): its index
	// block's first super block address pointed at the index block.
	found := false
	for _, ib := range all(b, "EAIB") {
		hdr := int(binary.LittleEndian.Uint64(b[ib+6:]))
		if !bytes.Equal(b[hdr:hdr+4], []byte("EAHD")) || b[hdr+5] != 0 || b[hdr+6] != 8 {
			continue // unfiltered arrays only
		}
		idxElmts, minPtrs := int(b[hdr+8]), int(b[hdr+10])
		sb := ib + 6 + 8 + idxElmts*8 + 2*(minPtrs-1)*8
		if binary.LittleEndian.Uint64(b[sb:]) == ^uint64(0) {
			continue // no super block
		}
		found = true
		loop := bytes.Clone(b)
		binary.LittleEndian.PutUint64(loop[sb:], uint64(ib))
		n := len(loop) - ib // the index block's checksum: the first that matches the bytes before it
		for k := sb + 8; k+4 <= len(loop); k += 8 {
			if lookup3(b[ib:k]) == binary.LittleEndian.Uint32(b[k:]) {
				n = k - ib
				break
			}
		}
		reseal(loop, ib, n)
		_, err := Parse(mem(loop))
		oneLine(t, "index block as super block", err, "reached twice, also as its index block (a loop)")
	}
	if !found {
		t.Fatal("chunks.h5: no extensible array with a super block")
	}
}

// TestChunkIndexChecksums: a byte flipped in a fixed array header or
// data block, an extensible array header, index, super or data block,
// or a chunk index B-tree node is one line naming the checksum.
func TestChunkIndexChecksums(t *testing.T) {
	b := gunzipFixture(t, "chunks.h5")
	for _, sig := range []string{"FAHD", "FADB", "EAHD", "EAIB", "EASB", "EADB", "BTLF"} {
		offs := all(b, sig)
		if len(offs) == 0 {
			t.Fatalf("no %s", sig)
		}
		bad := bytes.Clone(b)
		bad[offs[0]+16] ^= 0x10
		_, err := Parse(mem(bad))
		oneLine(t, sig, err, "checksum")
		if err != nil && !strings.Contains(err.Error(), "(a damaged file)") {
			t.Errorf("%s: %v", sig, err)
		}
	}
}

// TestPagedExtensibleArray: testdata/eapaged.h5's extensible array has
// paged data blocks (super block 13), written sparsely: every chunk h5py
// stored is found (the page-initialised bits are packed across the
// super block's data blocks, not a byte per data block), none other,
// and their bytes are h5py's.
func TestPagedExtensibleArray(t *testing.T) {
	var exp map[string]struct {
		Stored map[string]struct {
			First  int64
			Chunks int
			SHA256 string
		}
	}
	raw, err := os.ReadFile("testdata/EXPECTED.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &exp); err != nil {
		t.Fatal(err)
	}
	want := exp["eapaged.h5"].Stored["ea"]
	if want.Chunks == 0 {
		t.Fatal("EXPECTED.json: no stored chunks for eapaged.h5")
	}
	b := gunzipFixture(t, "eapaged.h5")
	r := fileReader(b)
	root, _ := r.superblock(0)
	msgs, err := r.header(root)
	if err != nil {
		t.Fatal(err)
	}
	var d *dataset
	for _, m := range msgs {
		if l, ok, _, err := r.linkMessage(m); m.typ == msgLink && err == nil && ok && l.name == "ea" {
			dm, err := r.header(l.addr)
			if err != nil {
				t.Fatal(err)
			}
			if d, err = r.readDataset(dm); err != nil {
				t.Fatal(err)
			}
		}
	}
	if d == nil || d.index != indexEArray {
		t.Fatalf("eapaged.h5: no dataset ea with an extensible array index (%+v)", d)
	}
	chunks, err := r.chunks(d)
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) != want.Chunks {
		t.Fatalf("%d chunks found, h5py stored %d", len(chunks), want.Chunks)
	}
	h := sha256.New()
	for i, c := range chunks {
		if c.start[0] != want.First+int64(i) || c.size != 1 {
			t.Fatalf("chunk %d at %v of %d bytes, want at %d", i, c.start, c.size, want.First+int64(i))
		}
		h.Write(b[c.off : c.off+1])
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want.SHA256 {
		t.Errorf("sha256 %s, want %s", got, want.SHA256)
	}
}
