package hdf5

import (
	"bytes"
	"testing"

	"github.com/lazyweights/tensorfs/index"
)

// TestHeaderChecksums: a byte flipped where the structure alone cannot
// tell (the superblock's end-of-file address, a message tensorfs skips
// in a v2 object header, a letter of a link name in an OCHK
// continuation block) is found by the structure's checksum: one line
// naming it and its offset.
func TestHeaderChecksums(t *testing.T) {
	d := gunzipFixture(t, "dense.h5")
	bad := bytes.Clone(d)
	bad[8+4+2*8] ^= 1 // superblock v3: the end-of-file address
	_, err := Parse(mem(bad))
	oneLine(t, "superblock", err, "the superblock: checksum")

	skipped := map[uint16]bool{0x00: true, 0x05: true, 0x0A: true, 0x0C: true, 0x12: true, 0x15: true}
	for _, c := range []struct {
		file, sig, want string
	}{{"dense.h5", "OHDR", "an object header: checksum"}, {"chunks.h5", "OCHK", "an object header continuation block: checksum"}} {
		b := gunzipFixture(t, c.file)
		r := fileReader(b)
		flipped := false
		for _, oh := range all(b, "OHDR") {
			msgs, err := r.headerV2(int64(oh))
			if err != nil {
				continue
			}
			for _, m := range msgs {
				inOCHK := false
				for _, k := range all(b[:m.off], "OCHK") {
					inOCHK = inOCHK || k > oh
				}
				at := m.off // a message skipped: its first byte
				if c.sig == "OCHK" && m.typ == msgLink {
					at = m.off + int64(len(m.data)) - 9 // a hard link: its name's last letter, before the address
				} else if !skipped[m.typ] || len(m.data) == 0 {
					continue
				}
				if flipped || inOCHK != (c.sig == "OCHK") {
					continue
				}
				bad := bytes.Clone(b)
				bad[at] ^= 0x20
				_, err := Parse(mem(bad))
				oneLine(t, c.sig, err, c.want)
				flipped = true
			}
		}
		if !flipped {
			t.Errorf("%s: no skipped message in an %s block", c.file, c.sig)
		}
	}
}

// TestMetadataBudget: the bytes of structures read from one file are
// counted, and a file that makes the reader read more than the cap is
// one line (here with the cap lowered to what the fixture needs, less
// one byte).
func TestMetadataBudget(t *testing.T) {
	b := gunzipFixture(t, "dense.h5")
	r := &reader{f: mem(b), name: "w.h5", size: int64(len(b))}
	root, err := r.superblock(0)
	if err != nil {
		t.Fatal(err)
	}
	w := &walker{r: r, idx: &index.Index{}, groups: map[int64]bool{}}
	if err := w.group(root, "", 0); err != nil {
		t.Fatal(err)
	}
	if r.read <= 0 || r.read > int64(4*len(b)) {
		t.Fatalf("%d bytes of structures read from a file of %d", r.read, len(b))
	}
	r2 := &reader{f: mem(b), name: "w.h5", size: int64(len(b)), read: MaxMetadataBytes - r.read + 1}
	root, err = r2.superblock(0)
	if err == nil {
		w = &walker{r: r2, idx: &index.Index{}, groups: map[int64]bool{}}
		err = w.group(root, "", 0)
	}
	oneLine(t, "budget", err, "bytes of HDF5 structures read")
}
