package remote

import (
	"context"
	"testing"
)

// downStore is a store whose every request fails as an unreachable
// endpoint does (Transient).
type downStore struct{ *memStore }

func (downStore) List(ctx context.Context, prefix string) ([]Entry, bool, error) {
	return nil, false, &Error{URL: "mem://" + prefix, Kind: Transient, Msg: "connection refused"}
}

// TestTreeDirGivesUp: a SOURCE naming a whole store or a prefix of one
// that cannot be reached fails after OpenTimeout (retries included), as
// an object does, instead of retrying for ever.
func TestTreeDirGivesUp(t *testing.T) {
	c, err := New(downStore{&memStore{}}, Options{OpenTimeout: 300e6, Timeout: 300e6})
	if err != nil {
		t.Fatal(err)
	}
	// Before the fix this call never returned (the test binary's
	// -timeout ends it).
	if _, err := (Tree{C: c}).IsDir("/"); err == nil {
		t.Fatal("a store that cannot be reached was listed")
	}
}
