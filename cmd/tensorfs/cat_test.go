package main

import (
	"errors"
	"io"
	"testing"
)

// failingAt is a reader whose every read fails with err.
type failingAt struct{ err error }

func (r failingAt) ReadAt([]byte, int64) (int, error) { return 0, r.err }

// TestCopyOutNamesRemoteOnce: cat's read error names a remote SOURCE
// once, though the store's error (a backing.FaultError) names it too;
// a local path is said as it was.
func TestCopyOutNamesRemoteOnce(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"http://h:1/m", `http://h:1/m: tensor "w": reading at byte 0: file changed or unreadable (I/O fault): asked for bytes 1-2`},
		{"/a/m", `/a/m: tensor "w": reading at byte 0: /a/m: file changed or unreadable (I/O fault): asked for bytes 1-2`},
	} {
		err := copyOut(io.Discard, failingAt{errors.New(tc.src + ": file changed or unreadable (I/O fault): asked for bytes 1-2")}, 4, tc.src+`: tensor "w"`, tc.src)
		if err == nil || err.Error() != tc.want {
			t.Errorf("copyOut from %s: %v, want %s", tc.src, err, tc.want)
		}
	}
}
