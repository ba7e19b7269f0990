package storetest

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/backing/remote"
)

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
