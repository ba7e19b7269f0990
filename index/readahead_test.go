package index

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"testing"
)

type bytesFile struct {
	*bytes.Reader
	reads int
}

func (b *bytesFile) ReadAt(p []byte, off int64) (int, error) {
	b.reads++
	return b.Reader.ReadAt(p, off)
}
func (b *bytesFile) Name() string { return "f" }

// TestReadAhead: reads through ReadAhead return what the file's own
// ReadAt returns (bytes, count, io.EOF at the end), whatever their
// offsets and sizes; small reads in file order cost a read a block.
func TestReadAhead(t *testing.T) {
	data := make([]byte, 3*ReadAheadBlock+1234)
	rand.New(rand.NewSource(1)).Read(data)
	plain := bytes.NewReader(data)
	f := &bytesFile{Reader: bytes.NewReader(data)}
	r := ReadAhead(f)
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < 20000; i++ {
		off := rng.Int63n(int64(len(data)) + 100)
		size := rng.Intn(300)
		if i%50 == 0 {
			size = rng.Intn(2 * ReadAheadBlock)
		}
		a, b := make([]byte, size), make([]byte, size)
		n1, err1 := r.ReadAt(a, off)
		n2, err2 := plain.ReadAt(b, off)
		if n1 != n2 || !bytes.Equal(a[:n1], b[:n2]) || (err1 == nil) != (err2 == nil) || (err2 != nil && !errors.Is(err1, io.EOF)) {
			t.Fatalf("ReadAt(%d bytes at %d) = %d, %v; want %d, %v", size, off, n1, err1, n2, err2)
		}
	}
	f.reads = 0
	r = ReadAhead(f)
	var p [100]byte
	for off := int64(0); off+100 <= int64(len(data)); off += 100 {
		r.ReadAt(p[:], off)
	}
	if f.reads > 5 {
		t.Fatalf("%d reads of the file for reads in order, want at most 5", f.reads)
	}
}

// TestReadAheadSmall: a file smaller than a block is read whole into a
// buffer of its size (a distributed checkpoint parses thousands of
// small item zips through it).
func TestReadAheadSmall(t *testing.T) {
	data := []byte("0123456789")
	r := ReadAhead(&bytesFile{Reader: bytes.NewReader(data)}).(*readAhead)
	var p [4]byte
	if n, err := r.ReadAt(p[:], 8); n != 2 || err != io.EOF || string(p[:2]) != "89" {
		t.Fatalf("ReadAt at 8: %d, %v, %q", n, err, p[:n])
	}
	if n, err := r.ReadAt(p[:], 0); n != 4 || err != nil || string(p[:]) != "0123" || cap(r.buf) != len(data) || r.reads != 1 {
		t.Fatalf("ReadAt at 0: %d, %v, %q; buffer of %d bytes, %d reads", n, err, p[:n], cap(r.buf), r.reads)
	}
}
