package storetest

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"
	"time"

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
	t.Run("flow", s.flow)
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
