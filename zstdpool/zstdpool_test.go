package zstdpool

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

func encode(t *testing.T, b []byte, opts ...zstd.EOption) []byte {
	t.Helper()
	e, err := zstd.NewWriter(nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	return e.EncodeAll(b, nil)
}

// TestReuse: streams decoded one after another, a corrupt one and one
// asking for too large a window among them, are decoded by one decoder,
// each to its own bytes or its own error.
func TestReuse(t *testing.T) {
	a := bytes.Repeat([]byte("tensorfs "), 10_000)
	za := encode(t, a)
	big := encode(t, make([]byte, 1<<20), zstd.WithWindowSize(64<<20), zstd.WithSingleSegment(false))
	// The frame header of big says a 64 MiB window; make it say so
	// whatever the encoder chose for 1 MiB.
	big[5] = (26 - 10) << 3
	before := Built()
	for i, c := range []struct {
		z    []byte
		want []byte
		err  string
	}{
		{za, a, ""},
		{za[:len(za)/2], nil, "ends early"},
		{za, a, ""},
		{big, nil, "window is larger than the 32 MiB"},
		{za, a, ""},
	} {
		d, err := NewReader(bytes.NewReader(c.z))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(d)
		d.Close()
		d.Close() // twice: no decoder given back twice
		if c.err == "" {
			if err != nil || !bytes.Equal(got, c.want) {
				t.Fatalf("stream %d: %v, %d bytes", i, err, len(got))
			}
			continue
		}
		if err == nil || !strings.Contains(Cause(err), c.err) {
			t.Fatalf("stream %d: error %v, want %q", i, err, c.err)
		}
	}
	if n := Built() - before; n != 1 {
		t.Fatalf("%d decoders built, want 1", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(idle) != 1 {
		t.Fatalf("%d idle decoders, want 1", len(idle))
	}
}
