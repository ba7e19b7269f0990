package client

import (
	"errors"
	"testing"
)

// TestTensorErrorNamesRemoteOnce: a read error of a one-file remote
// SOURCE names its URL once, though the store's error names the object
// too; a local path and another object (a weight map's shard) are said
// as they are.
func TestTensorErrorNamesRemoteOnce(t *testing.T) {
	for _, tc := range []struct{ source, cause, want string }{
		{"http://h:1/m", "http://h:1/m: file changed or unreadable (I/O fault): x",
			`http://h:1/m: tensor "w": read at byte 7: file changed or unreadable (I/O fault): x`},
		{"hf://o/n/m.safetensors", "hf://o/n/m.safetensors: HTTP 500",
			`hf://o/n/m.safetensors: tensor "w": read at byte 7: HTTP 500`},
		{"http://h:1/m.index.json", "http://h:1/m-1.safetensors: HTTP 500",
			`http://h:1/m.index.json: tensor "w": read at byte 7: http://h:1/m-1.safetensors: HTTP 500`},
		{"/a/m", "/a/m: file changed or unreadable (I/O fault): x",
			`/a/m: tensor "w": read at byte 7: /a/m: file changed or unreadable (I/O fault): x`},
	} {
		e := &TensorError{Source: tc.source, Name: "w", Op: "read", Off: 7, Err: errors.New(tc.cause)}
		if got := e.Error(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}
