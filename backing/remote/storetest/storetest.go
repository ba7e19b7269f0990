package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/backing/remote"
)

// Harness starts a store holding objects (key → bytes; keys are
// '/'-separated, as the suite's are: "conformance/ranges.bin") and
// returns it with what it can be made to do. Its servers stop at the
// test's end (t.Cleanup). Run calls it once.
type Harness func(t *testing.T, objects map[string][]byte) *Fixture

// Fixture is a store under test and its capabilities. A nil capability
// must be declared in Lacks, under its field's name, with the reason.
type Fixture struct {
	Store remote.Store
	// Replace makes key hold data from now on, under a new validator
	// (a new ETag, Last-Modified, or a CDN object changed under its
	// URL), as a file replaced on the server while it is read.
	Replace func(t *testing.T, key string, data []byte)
	// Expire makes every signed URL the store was given so far expire.
	Expire func(t *testing.T)
	// Redirect makes the requests of key's bytes go through hops
	// redirects; hops < 0 makes them redirect forever (a loop).
	Redirect func(t *testing.T, key string, hops int)
	// Holder holds the store's replies mid-body (the server serves
	// through Holder.Wrap).
	Holder *Holder
	// Denied returns a store of the same server and a key of it whose
	// reads are refused (no or bad credentials, no access).
	Denied func(t *testing.T) (remote.Store, string)
	// Secrets are strings (a secret key, a token, a signature) that no
	// error may hold.
	Secrets []string
	// Lacks says why a capability above is nil: "Replace": "blobs are
	// named by their digest". "List" says why the store cannot list
	// (List answers an error of kind Invalid).
	Lacks map[string]string
}

// The suite's objects.
const (
	keyRanges     = "conformance/ranges.bin"
	keyEmpty      = "conformance/empty.bin"
	keySameSize   = "conformance/replaced-same-size.bin"
	keyOtherSize  = "conformance/replaced-other-size.bin"
	keyClientRepl = "conformance/replaced-while-read.bin"
	keyDisk       = "conformance/replaced-disk-cached.bin"
	keyExpire     = "conformance/expire.bin"
	keyRedirect   = "conformance/redirect.bin"
	keyLoop       = "conformance/redirect-loop.bin"
	keyCancel     = "conformance/cancel.bin"
	keyCut        = "conformance/cut.bin"
	keyMissing    = "conformance/missing.bin"
	listPrefix    = "conformance/list/"
)

// partSize is the Client's part size: small, so that the objects have
// several parts.
const partSize = 16 << 10

// suiteObjects returns the objects Run gives the Harness, by key.
func suiteObjects() map[string][]byte {
	return map[string][]byte{
		keyRanges:                data(150_000, 1),
		keyEmpty:                 {},
		keySameSize:              data(70_000, 2),
		keyOtherSize:             data(70_000, 3),
		keyClientRepl:            data(5*partSize+100, 4),
		keyDisk:                  data(3*partSize+7, 12),
		keyExpire:                data(50_000, 5),
		keyRedirect:              data(60_000, 6),
		keyLoop:                  data(1000, 7),
		keyCancel:                data(6*partSize, 8),
		keyCut:                   data(6*partSize, 11),
		listPrefix + "a.bin":     data(1234, 9),
		listPrefix + "b.bin":     data(4321, 10),
		listPrefix + "sub/c.bin": data(99, 13),
	}
}

// data is n reproducible bytes.
func data(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// Run runs the conformance suite against the store h makes.
func Run(t *testing.T, h Harness) {
	objects := suiteObjects()
	f := h(t, objects)
	if f == nil || f.Store == nil {
		t.Fatal("storetest: the harness returned no store")
	}
	s := &suite{f: f, objects: objects}
	t.Run("name", s.name) // first: the store's first request
	t.Run("ranges", s.ranges)
	t.Run("size", s.size)
	t.Run("validators", s.validators)
	t.Run("redirects", s.redirects)
	t.Run("expiry", s.expiry)
	t.Run("cancel", s.cancel)
	t.Run("cut", s.cut)
	t.Run("errors", s.errors)
}

type suite struct {
	f       *Fixture
	objects map[string][]byte
}

// lacks skips t when the fixture declares that it lacks capability
// (saying why), and fails it when the capability is nil undeclared.
func (s *suite) lacks(t *testing.T, capability string, missing bool) {
	t.Helper()
	if !missing {
		return
	}
	why, ok := s.f.Lacks[capability]
	if !ok || why == "" {
		t.Fatalf("the harness has no %s and does not say why (Fixture.Lacks[%q])", capability, capability)
	}
	t.Skipf("the store has no %s: %s", capability, why)
}

// client is a remote.Client of the store with small parts, no readahead
// (each read's GETs are its own) and a deadline far beyond what any
// read here takes: reaching it is a failure, never a timing.
func (s *suite) client(t *testing.T, ctx context.Context) *remote.Client {
	t.Helper()
	c, err := remote.New(s.f.Store, remote.Options{
		PartSize: partSize, MemCache: 64 * partSize, Readahead: -1, Parallel: 4,
		Timeout: time.Minute, OpenTimeout: time.Minute,
		Context: ctx, ReadErrorsReturned: true, Logf: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// open opens key with a client of the store.
func (s *suite) open(t *testing.T, c *remote.Client, key string) *remote.Source {
	t.Helper()
	src, err := c.Open(context.Background(), key)
	if err != nil {
		t.Fatalf("Open %s: %v", key, err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

// storeOpen is Store.Open of key with a head of n bytes, checked.
func (s *suite) storeOpen(t *testing.T, key string, n int) remote.Object {
	t.Helper()
	want := s.objects[key]
	head := make([]byte, n)
	obj, got, err := s.f.Store.Open(context.Background(), key, head)
	if err != nil {
		t.Fatalf("Store.Open(%s, %d bytes): %v", key, n, err)
	}
	if obj.Size != int64(len(want)) || got != min(n, len(want)) {
		t.Fatalf("Store.Open(%s, %d bytes): size %d, %d bytes read; want size %d, %d bytes", key, n, obj.Size, got, len(want), min(n, len(want)))
	}
	if !bytes.Equal(head[:got], want[:got]) {
		t.Fatalf("Store.Open(%s, %d bytes): the head read differs from the object's first bytes", key, n)
	}
	return obj
}

// name checks that a Source opened by the store's first request is
// named as the store names the object once open (a store that resolves
// a revision at its first request names the object by what it pinned),
// so that its read errors name it once.
func (s *suite) name(t *testing.T) {
	src := s.open(t, s.client(t, context.Background()), keyRanges)
	if src.Name() != s.f.Store.URL(keyRanges) {
		t.Errorf("Source.Name() = %s, the store names it %s", src.Name(), s.f.Store.URL(keyRanges))
	}
}

func (s *suite) ranges(t *testing.T) {
	want := s.objects[keyRanges]
	size := int64(len(want))
	ctx := context.Background()
	t.Run("store", func(t *testing.T) {
		s.storeOpen(t, keyRanges, 100)
		s.storeOpen(t, keyRanges, len(want)+1000) // a head longer than the object
		obj := s.storeOpen(t, keyRanges, 16)
		for _, r := range []struct {
			name string
			off  int64
			lens []int
		}{
			{"start", 0, []int{1000}},
			{"middle", 70_001, []int{12_345}},
			{"last byte", size - 1, []int{1}},
			{"to the end", size - 5000, []int{5000}},
			{"the whole object", 0, []int{int(size)}},
			{"several buffers", 333, []int{1, 4096, 100, 50_000}},
		} {
			bufs := make([][]byte, len(r.lens))
			for i, n := range r.lens {
				bufs[i] = make([]byte, n)
			}
			var order []int
			err := s.f.Store.Get(ctx, obj, r.off, bufs, func(i int) { order = append(order, i) })
			if err != nil {
				t.Fatalf("%s: Get at %d of %v bytes: %v", r.name, r.off, r.lens, err)
			}
			at := r.off
			for i, b := range bufs {
				if !bytes.Equal(b, want[at:at+int64(len(b))]) {
					t.Fatalf("%s: Get at %d: buffer %d differs from the object's bytes %d-%d", r.name, r.off, i, at, at+int64(len(b))-1)
				}
				at += int64(len(b))
			}
			if len(order) != len(bufs) {
				t.Fatalf("%s: filled called for %v, want each of %d buffers once in order", r.name, order, len(bufs))
			}
			for i, k := range order {
				if k != i {
					t.Fatalf("%s: filled called for %v, want each of %d buffers once in order", r.name, order, len(bufs))
				}
			}
		}
	})
	t.Run("source", func(t *testing.T) {
		src := s.open(t, s.client(t, context.Background()), keyRanges)
		for _, r := range []struct {
			name    string
			off     int64
			n       int
			wantN   int
			wantEOF bool
		}{
			{"start", 0, 100, 100, false},
			{"middle, across parts", 3*partSize - 10, 2*partSize + 20, 2*partSize + 20, false},
			{"end", size - 100, 100, 100, false},
			{"across the end", size - 100, 300, 100, true},
			{"past the end", size + 10, 100, 0, true},
			{"at the end", size, 1, 0, true},
			{"zero bytes", 500, 0, 0, false},
			{"the whole object", 0, int(size), int(size), false},
		} {
			buf := make([]byte, r.n)
			n, err := src.ReadAt(buf, r.off)
			if n != r.wantN || (r.wantEOF && err != io.EOF) || (!r.wantEOF && err != nil && !(err == io.EOF && r.off+int64(n) == size)) {
				t.Fatalf("%s: ReadAt(%d bytes at %d) = %d, %v; want %d bytes (EOF %v)", r.name, r.n, r.off, n, err, r.wantN, r.wantEOF)
			}
			if n > 0 && !bytes.Equal(buf[:n], want[r.off:r.off+int64(n)]) {
				t.Fatalf("%s: ReadAt(%d bytes at %d): the bytes differ from the object's", r.name, r.n, r.off)
			}
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		src := s.open(t, s.client(t, context.Background()), keyRanges)
		errs := make(chan error, 4)
		for g := range 4 {
			go func() {
				r := rand.New(rand.NewPCG(uint64(g), 3))
				for range 20 {
					off, n := r.Int64N(size), r.IntN(3*partSize)
					buf := make([]byte, n)
					got, err := src.ReadAt(buf, off)
					end := min(off+int64(n), size)
					if int64(got) != end-off || (err != nil && err != io.EOF) || !bytes.Equal(buf[:got], want[off:end]) {
						errs <- fmt.Errorf("ReadAt(%d bytes at %d) = %d, %v; want %d bytes, the object's", n, off, got, err, end-off)
						return
					}
				}
				errs <- nil
			}()
		}
		for range 4 {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	})
	t.Run("empty object", func(t *testing.T) {
		obj := s.storeOpen(t, keyEmpty, 16)
		if obj.Size != 0 {
			t.Fatalf("size %d", obj.Size)
		}
		src := s.open(t, s.client(t, context.Background()), keyEmpty)
		if n, err := src.ReadAt(make([]byte, 10), 0); n != 0 || err != io.EOF {
			t.Fatalf("ReadAt of an empty object: %d, %v; want 0, EOF", n, err)
		}
	})
}

func (s *suite) size(t *testing.T) {
	c := s.client(t, context.Background())
	keys := make([]string, 0, len(s.objects))
	for k := range s.objects {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if src := s.open(t, c, k); src.Size() != int64(len(s.objects[k])) {
			t.Errorf("%s: Size() = %d, want %d", k, src.Size(), len(s.objects[k]))
		}
		if obj := s.storeOpen(t, k, 0); obj.Size != int64(len(s.objects[k])) {
			t.Errorf("%s: Store.Open with an empty head: size %d, want %d", k, obj.Size, len(s.objects[k]))
		}
	}
	t.Run("list", func(t *testing.T) {
		ents, any, err := s.f.Store.List(context.Background(), listPrefix)
		if remote.KindOf(err) == remote.Invalid && s.f.Lacks["List"] != "" {
			t.Skipf("the store cannot list: %s (%v)", s.f.Lacks["List"], err)
		}
		if err != nil || !any {
			t.Fatalf("List(%s): %v, %v", listPrefix, any, err)
		}
		got := map[string]int64{}
		for _, e := range ents {
			got[e.Name] = e.Size
		}
		want := map[string]int64{"a.bin": 1234, "b.bin": 4321} // not sub/c.bin: a level deeper
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("List(%s) = %v, want %v", listPrefix, got, want)
		}
		ents, any, err = s.f.Store.List(context.Background(), listPrefix+"sub/")
		if err != nil || !any || len(ents) != 1 || ents[0] != (remote.Entry{Name: "c.bin", Size: 99}) {
			t.Fatalf("List(%ssub/) = %v, %v, %v; want c.bin of 99 bytes", listPrefix, ents, any, err)
		}
		ents, any, err = s.f.Store.List(context.Background(), "conformance/nothing/")
		if err != nil || any || len(ents) != 0 {
			t.Fatalf("List of a prefix with nothing under it = %v, %v, %v; want nothing, no error", ents, any, err)
		}
	})
}

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

func (s *suite) redirects(t *testing.T) {
	s.lacks(t, "Redirect", s.f.Redirect == nil)
	want := s.objects[keyRedirect]
	t.Run("followed", func(t *testing.T) {
		s.f.Redirect(t, keyRedirect, 3)
		obj := s.storeOpen(t, keyRedirect, 100)
		buf := make([]byte, 20_000)
		if err := s.f.Store.Get(context.Background(), obj, 30_000, [][]byte{buf}, nil); err != nil || !bytes.Equal(buf, want[30_000:50_000]) {
			t.Fatalf("Get through redirects: %v", err)
		}
		if s.f.Replace != nil {
			s.f.Replace(t, keyRedirect, data(len(want), 106))
			if err := s.f.Store.Get(context.Background(), obj, 30_000, [][]byte{buf}, nil); remote.KindOf(err) != remote.Changed {
				t.Fatalf("Get through redirects of a replaced object: %v; want an error of kind changed", err)
			}
		}
	})
	t.Run("loop", func(t *testing.T) {
		s.f.Redirect(t, keyLoop, -1)
		_, _, err := s.f.Store.Open(context.Background(), keyLoop, make([]byte, 100))
		if err == nil || remote.KindOf(err) == remote.Transient {
			t.Fatalf("Open of an object that redirects forever: %v; want an error that is not retried", err)
		}
		s.oneLine(t, err, keyLoop)
	})
}

func (s *suite) expiry(t *testing.T) {
	s.lacks(t, "Expire", s.f.Expire == nil)
	want := s.objects[keyExpire]
	obj := s.storeOpen(t, keyExpire, 100)
	src := s.open(t, s.client(t, context.Background()), keyExpire)
	s.f.Expire(t)
	buf := make([]byte, 10_000)
	if err := s.f.Store.Get(context.Background(), obj, 20_000, [][]byte{buf}, nil); err != nil || !bytes.Equal(buf, want[20_000:30_000]) {
		t.Fatalf("Get after the signed URL expired: %v", err)
	}
	s.f.Expire(t)
	if n, err := src.ReadAt(buf, 35_000); n != len(buf) || !bytes.Equal(buf, want[35_000:45_000]) {
		t.Fatalf("ReadAt after the signed URL expired: %d bytes, %v", n, err)
	}
}

// waitOrFail waits for ch; a minute without it fails t. The bound is a
// guard against a hang, not a measure: everything here ends in
// milliseconds, or never.
func waitOrFail(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("a minute passed without %s", what)
	}
}

// waitErr is waitOrFail for a call that returns an error.
func waitErr(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("a minute passed without %s", what)
		return nil
	}
}

func (s *suite) cancel(t *testing.T) {
	t.Run("before", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, _, err := s.f.Store.Open(ctx, keyCancel, make([]byte, 100))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Open with a cancelled context: %v; want an error wrapping context.Canceled", err)
		}
		obj := s.storeOpen(t, keyCancel, 100)
		err = s.f.Store.Get(ctx, obj, 0, [][]byte{make([]byte, 100)}, nil)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Get with a cancelled context: %v; want an error wrapping context.Canceled", err)
		}
	})
	s.lacks(t, "Holder", s.f.Holder == nil)
	want := s.objects[keyCancel]
	t.Run("mid-body", func(t *testing.T) {
		obj := s.storeOpen(t, keyCancel, 100)
		before := s.goroutines()
		held, gone := s.f.Holder.Arm(4096)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		first, rest := make([]byte, 4096), make([]byte, 20_000)
		got := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- s.f.Store.Get(ctx, obj, 1000, [][]byte{first, rest}, func(i int) {
				if i == 0 {
					close(got)
				}
			})
		}()
		waitOrFail(t, held, "the server holding the reply")
		select {
		case <-got:
		case err := <-done:
			t.Fatalf("Get ended before the held reply's first bytes were used: %v", err)
		case <-time.After(time.Minute):
			t.Fatal("a minute passed without the held reply's first bytes")
		}
		if !bytes.Equal(first, want[1000:1000+4096]) {
			t.Fatal("the held reply's first bytes differ from the object's")
		}
		cancel()
		err := waitErr(t, done, "Get returning after its context was cancelled")
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Get cancelled mid-body: %v; want an error wrapping context.Canceled", err)
		}
		s.oneLine(t, err, keyCancel)
		waitOrFail(t, gone, "the store letting go of the held connection")
		s.noneLeft(t, before)
	})
	t.Run("client", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		src := s.open(t, s.client(t, ctx), keyCancel)
		before := s.goroutines()
		held, gone := s.f.Holder.Arm(1000)
		done := make(chan error, 1)
		go func() {
			_, err := src.ReadAt(make([]byte, 100), 4*partSize)
			done <- err
		}()
		waitOrFail(t, held, "the server holding the reply")
		cancel()
		err := waitErr(t, done, "ReadAt returning after the Client's Context was cancelled")
		if !errors.Is(err, context.Canceled) || !errors.Is(err, backing.ErrFault) {
			t.Fatalf("ReadAt interrupted: %v; want an error wrapping context.Canceled and backing.ErrFault", err)
		}
		s.oneLine(t, err, keyCancel)
		waitOrFail(t, gone, "the store letting go of the held connection")
		src.Close() // waits for the Source's fetches
		s.noneLeft(t, before)
	})
}

// goroutines returns the stacks of the goroutines in the store's code
// (a frame of the package that defines the store's type), by id.
func (s *suite) goroutines() map[string]string {
	pkg := storePackage(s.f.Store)
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		if f := strings.Fields(g); len(f) > 1 && f[0] == "goroutine" && strings.Contains(g, "\n"+pkg+".") {
			out[f[1]] = g
		}
	}
	return out
}

// noneLeft fails t when a goroutine in the store's code is running that
// was not before: a request cancelled, or its Source closed, has nothing
// of the store's left running (a goroutine still reading a body, or
// waiting on a channel no one will send on, would be a leak).
func (s *suite) noneLeft(t *testing.T, before map[string]string) {
	t.Helper()
	for id, g := range s.goroutines() {
		if _, ok := before[id]; !ok {
			t.Errorf("a goroutine in the store's code is left running:\n%s", g)
		}
	}
}

// storePackage is the import path of the package that defines st's type.
func storePackage(st remote.Store) string {
	ty := reflect.TypeOf(st)
	for ty.Kind() == reflect.Pointer {
		ty = ty.Elem()
	}
	return ty.PkgPath()
}

func (s *suite) cut(t *testing.T) {
	s.lacks(t, "Holder", s.f.Holder == nil)
	want := s.objects[keyCut]
	t.Run("store", func(t *testing.T) {
		obj := s.storeOpen(t, keyCut, 100)
		held := s.f.Holder.Cut(4096)
		bufs := [][]byte{make([]byte, 4096), make([]byte, 20_000)}
		var filled []int
		err := s.f.Store.Get(context.Background(), obj, 1000, bufs, func(i int) { filled = append(filled, i) })
		waitOrFail(t, held, "the server cutting the reply")
		if remote.KindOf(err) != remote.Transient {
			t.Fatalf("Get of a reply cut after 4096 bytes: %v; want an error of kind transient (retried)", err)
		}
		if len(filled) != 1 || filled[0] != 0 || !bytes.Equal(bufs[0], want[1000:1000+4096]) {
			t.Fatalf("Get of a reply cut after its first buffer: filled %v (want [0], the first buffer's bytes right)", filled)
		}
		s.oneLine(t, err, keyCut)
	})
	t.Run("unavailable", func(t *testing.T) {
		obj := s.storeOpen(t, keyCut, 100)
		answered := s.f.Holder.Answer(http.StatusServiceUnavailable)
		buf := make([]byte, 1000)
		err := s.f.Store.Get(context.Background(), obj, 1000, [][]byte{buf}, nil)
		waitOrFail(t, answered, "the server answering 503")
		// A store may get past it itself (a cache tier's transport
		// sends a GET that failed through the tier again, directly):
		// then with the right bytes.
		if err == nil && !bytes.Equal(buf, want[1000:2000]) || err != nil && remote.KindOf(err) != remote.Transient {
			t.Fatalf("Get answered 503: %v (the bytes right: %v); want an error of kind transient (retried), or the right bytes", err, bytes.Equal(buf, want[1000:2000]))
		}
		if err != nil {
			s.oneLine(t, err, keyCut)
		}
		src := s.open(t, s.client(t, context.Background()), keyCut)
		answered = s.f.Holder.Answer(http.StatusServiceUnavailable)
		n, err := src.ReadAt(buf, 2*partSize)
		waitOrFail(t, answered, "the server answering 503")
		if n != len(buf) || err != nil || !bytes.Equal(buf, want[2*partSize:2*partSize+len(buf)]) {
			t.Fatalf("ReadAt through a 503: %d bytes, %v; want %d bytes, the object's", n, err, len(buf))
		}
	})
	t.Run("source", func(t *testing.T) {
		src := s.open(t, s.client(t, context.Background()), keyCut)
		held := s.f.Holder.Cut(1000)
		buf := make([]byte, 3*partSize)
		n, err := src.ReadAt(buf, partSize+5)
		waitOrFail(t, held, "the server cutting the reply")
		if n != len(buf) || err != nil || !bytes.Equal(buf, want[partSize+5:partSize+5+len(buf)]) {
			t.Fatalf("ReadAt through a reply cut after 1000 bytes: %d bytes, %v; want %d bytes, the object's", n, err, len(buf))
		}
	})
}

func (s *suite) errors(t *testing.T) {
	t.Run("missing", func(t *testing.T) {
		_, _, err := s.f.Store.Open(context.Background(), keyMissing, make([]byte, 100))
		if remote.KindOf(err) != remote.NotFound {
			t.Fatalf("Store.Open of a missing object: %v; want an error of kind not found", err)
		}
		s.oneLine(t, err, keyMissing)
		_, err = s.client(t, context.Background()).Open(context.Background(), keyMissing)
		if remote.KindOf(err) != remote.NotFound {
			t.Fatalf("Client.Open of a missing object: %v; want an error of kind not found", err)
		}
		s.oneLine(t, err, keyMissing)
	})
	t.Run("denied", func(t *testing.T) {
		s.lacks(t, "Denied", s.f.Denied == nil)
		st, key := s.f.Denied(t)
		_, _, err := st.Open(context.Background(), key, make([]byte, 100))
		if remote.KindOf(err) != remote.Denied {
			t.Fatalf("Store.Open of an object the store may not read: %v; want an error of kind access denied", err)
		}
		s.oneLine(t, err, key)
		c, err := remote.New(st, remote.Options{Timeout: time.Minute, ReadErrorsReturned: true, Logf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Open(context.Background(), key); remote.KindOf(err) != remote.Denied {
			t.Fatalf("Client.Open of an object the store may not read: %v; want an error of kind access denied", err)
		} else {
			s.oneLine(t, err, key)
		}
	})
}

// oneLine checks that err is one line that names key once and holds
// none of the fixture's secrets.
func (s *suite) oneLine(t *testing.T, err error, key string) {
	t.Helper()
	msg := err.Error()
	t.Logf("error: %s", msg)
	if strings.ContainsAny(msg, "\r\n") {
		t.Errorf("the error is more than one line: %q", msg)
	}
	if n := strings.Count(msg, key); n != 1 {
		t.Errorf("the error names %s %d times, want once: %s", key, n, msg)
	}
	for _, sec := range s.f.Secrets {
		if sec != "" && strings.Contains(msg, sec) {
			t.Errorf("the error holds a secret (%s...): %s", sec[:min(4, len(sec))], msg)
		}
	}
}
