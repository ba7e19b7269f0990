package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/backing/remote"
)

func (s *suite) validators(t *testing.T) {
	t.Run("identity", func(t *testing.T) {
		obj := s.storeOpen(t, keyRanges, 16)
		id, ok := obj.Identity()
		if !ok {
			t.Fatalf("%s: opened with no validator (no ETag, version or Last-Modified): %+v", keyRanges, obj)
		}
		// The disk cache keys parts by it: the same version opened
		// again is the same.
		if again, _ := s.storeOpen(t, keyRanges, 0).Identity(); again != id {
			t.Fatalf("%s: opened twice, two identities: %q and %q", keyRanges, id, again)
		}
	})
	s.lacks(t, "Replace", s.f.Replace == nil)
	t.Run("store", func(t *testing.T) {
		for _, r := range []struct {
			key  string
			data []byte
		}{
			{keySameSize, data(len(s.objects[keySameSize]), 102)},
			{keyOtherSize, data(len(s.objects[keyOtherSize])+1, 103)},
		} {
			obj := s.storeOpen(t, r.key, 100)
			buf := make([]byte, 1000)
			if err := s.f.Store.Get(context.Background(), obj, 5000, [][]byte{buf}, nil); err != nil {
				t.Fatalf("%s: Get before the object is replaced: %v", r.key, err)
			}
			s.f.Replace(t, r.key, r.data)
			err := s.f.Store.Get(context.Background(), obj, 5000, [][]byte{buf}, nil)
			if remote.KindOf(err) != remote.Changed {
				t.Fatalf("%s replaced (%d bytes, was %d): Get of the version opened: %v (equal to the old bytes: %v); want an error of kind changed", r.key, len(r.data), obj.Size, err, bytes.Equal(buf, s.objects[r.key][5000:6000]))
			}
			s.oneLine(t, err, r.key)
			s.reopened(t, r.key, obj, r.data)
		}
	})
	t.Run("source", func(t *testing.T) {
		old := s.objects[keyClientRepl]
		src := s.open(t, s.client(t, context.Background()), keyClientRepl)
		buf := make([]byte, 100)
		if _, err := src.ReadAt(buf, partSize); err != nil || !bytes.Equal(buf, old[partSize:partSize+100]) {
			t.Fatalf("read before the object is replaced: %v", err)
		}
		s.f.Replace(t, keyClientRepl, data(len(old), 104))
		for _, off := range []int64{3 * partSize, partSize} { // a part not read yet, then one cached
			n, err := src.ReadAt(buf, off)
			if !errors.Is(err, backing.ErrFault) || remote.KindOf(err) != remote.Changed {
				t.Fatalf("read at %d after the object was replaced: %d bytes, %v; want an error of kind changed wrapping backing.ErrFault", off, n, err)
			}
			s.oneLine(t, err, keyClientRepl)
		}
	})
	t.Run("disk cache", func(t *testing.T) {
		// A second Client over the same cache directory (a warm
		// start) after the object was replaced: the new bytes or
		// Changed, never the old version's parts from disk.
		old, dir := s.objects[keyDisk], t.TempDir()
		cached := func() *remote.Client {
			c, err := remote.New(s.f.Store, remote.Options{PartSize: partSize, Readahead: -1, CacheDir: dir, Timeout: time.Minute, ReadErrorsReturned: true, Logf: t.Logf})
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		buf := make([]byte, len(old))
		if n, err := s.open(t, cached(), keyDisk).ReadAt(buf, 0); n != len(old) || !bytes.Equal(buf, old) {
			t.Fatalf("read before the object is replaced: %d bytes, %v", n, err)
		}
		repl := data(len(old), 107)
		s.f.Replace(t, keyDisk, repl)
		src, err := cached().Open(context.Background(), keyDisk)
		if err != nil {
			if remote.KindOf(err) != remote.Changed {
				t.Fatalf("Open of the replaced object, warm: %v; want it opened, or an error of kind changed", err)
			}
			return
		}
		defer src.Close()
		clear(buf)
		n, err := src.ReadAt(buf, 0)
		switch {
		case n == len(buf) && bytes.Equal(buf, repl):
		case err != nil && remote.KindOf(err) == remote.Changed && !bytes.Equal(buf[:n], old[:n]):
		default:
			t.Fatalf("read of the replaced object, warm: %d bytes, %v (the old version's: %v); want the new bytes, or an error of kind changed", n, err, n > 0 && bytes.Equal(buf[:n], old[:n]))
		}
	})
}

// reopened checks key, replaced by data after obj was opened, opened
// again: another identity and the new bytes, or (a store whose objects
// are named by their content: the replaced bytes are a fault, not a
// version) the same identity and an error of kind Changed, never the
// new bytes under the old identity, which the disk cache would mix with
// the old version's parts.
func (s *suite) reopened(t *testing.T, key string, obj remote.Object, data []byte) {
	t.Helper()
	head := make([]byte, 100)
	again, n, err := s.f.Store.Open(context.Background(), key, head)
	if err != nil {
		if remote.KindOf(err) != remote.Changed {
			t.Fatalf("%s replaced, opened again: %v; want it opened, or an error of kind changed", key, err)
		}
		return
	}
	oldID, _ := obj.Identity()
	newID, _ := again.Identity()
	buf := make([]byte, 1000)
	err = s.f.Store.Get(context.Background(), again, 5000, [][]byte{buf}, nil)
	if newID == oldID {
		if remote.KindOf(err) != remote.Changed {
			t.Fatalf("%s replaced, opened again with the identity it had: Get %v; want an error of kind changed", key, err)
		}
		return
	}
	if again.Size != int64(len(data)) || n != 100 || !bytes.Equal(head, data[:100]) || err != nil || !bytes.Equal(buf, data[5000:6000]) {
		t.Fatalf("%s replaced, opened again: size %d (want %d), its bytes the new ones: head %v, Get %v (%v)", key, again.Size, len(data), bytes.Equal(head[:n], data[:n]), bytes.Equal(buf, data[5000:6000]), err)
	}
}
