package numpy

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/index"
)

// npyExact is a format-1.0 .npy whose header text is exactly hlen bytes
// (the dict, padded with spaces, ending in "\n") followed by 8 bytes of
// float32 data.
func npyExact(hlen int) []byte {
	dict := "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"
	hdr := dict + strings.Repeat(" ", hlen-len(dict)-1) + "\n"
	b := []byte("\x93NUMPY\x01\x00")
	b = binary.LittleEndian.AppendUint16(b, uint16(len(hdr)))
	return append(append(b, hdr...), ptF32(2)...)
}

// numpy (1.24.2, format._read_array_header) refuses a header of more
// than 10,000 characters unless told to trust the file; so does tensorfs,
// in a .npy, a stored and a deflated .npz member.
func TestNPYHeaderCap(t *testing.T) {
	for _, c := range []struct {
		hlen int
		ok   bool
	}{{100, true}, {10000, true}, {10001, false}, {65535, false}} {
		b := npyExact(c.hlen)
		files := map[string]func() error{
			"npy": func() error { _, err := ParseNPY(ptMem("a.npy", b)); return err },
			"stored": func() error {
				_, err := ParseNPZ(ptMem("a.npz", ptZip(t, ptMember{Name: "w.npy", Data: b})))
				return err
			},
			"deflate": func() error {
				_, err := ParseNPZ(ptMem("a.npz", ptZip(t, ptMember{Name: "w.npy", Data: b, Deflate: true})))
				return err
			},
		}
		for kind, parse := range files {
			err := parse()
			if c.ok && err != nil {
				t.Errorf("%s header %d: %v", kind, c.hlen, err)
			}
			if !c.ok && (err == nil || !strings.Contains(err.Error(), "header of ") || !strings.Contains(err.Error(), "at most 10000")) {
				t.Errorf("%s header %d: got %v, want a refusal naming the 10000 cap", kind, c.hlen, err)
			}
		}
	}
}

// zipEntries returns the offsets of the central directory entries of a
// zip built by ptZip (no comments, no signatures inside data).
func zipEntries(b []byte) []int {
	var at []int
	for i := 0; i+4 <= len(b); i++ {
		if string(b[i:i+4]) == "PK\x01\x02" {
			at = append(at, i)
		}
	}
	return at
}

// zipWithEntries rebuilds one's central directory from entries (whole
// central entries).
func zipWithEntries(one []byte, entries [][]byte) []byte {
	cd := zipEntries(one)[0]
	eocd := bytes.LastIndex(one, []byte("PK\x05\x06"))
	var out bytes.Buffer
	out.Write(one[:cd])
	size := 0
	for _, e := range entries {
		out.Write(e)
		size += len(e)
	}
	end := append([]byte(nil), one[eocd:]...)
	binary.LittleEndian.PutUint16(end[8:], uint16(len(entries)))
	binary.LittleEndian.PutUint16(end[10:], uint16(len(entries)))
	binary.LittleEndian.PutUint32(end[12:], uint32(size))
	binary.LittleEndian.PutUint32(end[16:], uint32(cd))
	out.Write(end)
	return out.Bytes()
}

// centralEntry is a copy of the central entry at off, renamed and
// pointed at the local header at local.
func centralEntry(b []byte, off int, name string, local uint32) []byte {
	n := int(binary.LittleEndian.Uint16(b[off+28:]))
	e := int(binary.LittleEndian.Uint16(b[off+30:]))
	c := int(binary.LittleEndian.Uint16(b[off+32:]))
	out := append([]byte(nil), b[off:off+46]...)
	binary.LittleEndian.PutUint16(out[28:], uint16(len(name)))
	binary.LittleEndian.PutUint32(out[42:], local)
	out = append(out, name...)
	return append(out, b[off+46+n:off+46+n+e+c]...)
}

// npzOverlap is the zip bomb of issue 28: n central entries of distinct
// names all pointing at the local header of one deflated member a.npy.
func npzOverlap(t testing.TB, n int, data []byte) []byte {
	one := ptZip(t, ptMember{Name: "a.npy", Data: data, Deflate: true})
	cd := zipEntries(one)[0]
	var es [][]byte
	for i := 0; i < n; i++ {
		name := "a.npy"
		if i > 0 {
			name = fmt.Sprintf("m%06d.npy", i)
		}
		es = append(es, centralEntry(one, cd, name, 0))
	}
	return zipWithEntries(one, es)
}

// npzNested is a stored member a.npy whose data (past its array) holds a
// whole stored member b.npy, local header and all, which the central
// directory lists too: names match, bytes overlap.
func npzNested(t testing.TB, arr []byte) []byte {
	inner := ptZip(t, ptMember{Name: "b.npy", Data: arr})
	local := 30 + len("b.npy") + len(arr)
	outer := ptZip(t, ptMember{Name: "a.npy", Data: append(append([]byte(nil), arr...), inner[:local]...)})
	ocd, icd := zipEntries(outer)[0], zipEntries(inner)[0]
	at := uint32(30 + len("a.npy") + len(arr))
	return zipWithEntries(outer, [][]byte{centralEntry(outer, ocd, "a.npy", 0), centralEntry(inner, icd, "b.npy", at)})
}

func TestNPZOverlapAndNames(t *testing.T) {
	arr := npyBuild("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 1, ptF32(2))
	two := ptZip(t, ptMember{Name: "a.npy", Data: arr}, ptMember{Name: "b.npy", Data: arr})
	renamed := append([]byte(nil), two...)
	copy(renamed[zipEntries(renamed)[1]+46:], "c.npy") // central says c.npy, local says b.npy
	for _, c := range []struct {
		name string
		file []byte
		want string
	}{
		{"local name differs", renamed, `its local header names it "b.npy", the central directory "c.npy" (zipfile refuses such a file) (member c.npy`},
		{"two entries one member", npzOverlap(t, 2, arr), `its local header names it "a.npy", the central directory "m000001.npy"`},
		{"nested member", npzNested(t, arr), "overlaps member a.npy (bytes 0 to"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseNPZ(ptMem("m.npz", c.file))
			ptErrContains(t, err, "m.npz: ", c.want)
		})
	}
	for _, b := range [][]byte{two, npzOverlap(t, 1, arr)} {
		if idx, err := ParseNPZ(ptMem("m.npz", b)); err != nil {
			t.Fatal(err)
		} else {
			ptCheckIndex(t, idx, "m.npz", int64(len(b)))
		}
	}
}

// The overlapping-member bomb of issue 28: 1,000 central entries naming
// one deflated member of 4 MiB of zeros. Each entry alone is within
// deflate's ratio; the file is not. Refused before anything is inflated
// past a header.
func TestNPZOverlapBomb(t *testing.T) {
	big := npyBuild("{'descr': '<f4', 'fortran_order': False, 'shape': (1048576,), }", 1, make([]byte, 4<<20))
	b := npzOverlap(t, 1000, big)
	_, err := ParseNPZ(ptMem("bomb.npz", b))
	ptErrContains(t, err, "bomb.npz: ", `the central directory "m000001.npy"`)
}

// countingFile counts the reads of a File.
type countingFile struct {
	index.File
	reads int
}

func (c *countingFile) ReadAt(p []byte, off int64) (int, error) {
	c.reads++
	return c.File.ReadAt(p, off)
}

// TestNPZManyMembers: an .npz of 20,000 small string members beside one
// array is parsed with a read of the file per many members, not three
// or four per member (issue 41: 300,000 such members, 69 MB, took 9-12
// s), each member still in the metadata.
func TestNPZManyMembers(t *testing.T) {
	const n = 20_000
	arr := npyBuild("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 1, ptF32(2))
	s := npyBuild("{'descr': '|S3', 'fortran_order': False, 'shape': (), }", 1, []byte("abc"))
	ms := []ptMember{{Name: "w.npy", Data: arr}}
	for i := 0; i < n; i++ {
		ms = append(ms, ptMember{Name: fmt.Sprintf("s%06d.npy", i), Data: s})
	}
	f := &countingFile{File: ptMem("m.npz", ptZip(t, ms...))}
	idx, err := ParseNPZ(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(idx.Tensors) != 1 || len(idx.Metadata) != n || idx.Metadata["s000123"] != "abc" {
		t.Fatalf("%d tensors, %d metadata entries, s000123 = %v", len(idx.Tensors), len(idx.Metadata), idx.Metadata["s000123"])
	}
	if f.reads > n/10 {
		t.Fatalf("%d reads of the file for %d members, want at most %d", f.reads, n, n/10)
	}
}
