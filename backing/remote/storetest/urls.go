package storetest

import (
	"bytes"
	"context"
	"testing"

	"github.com/lazyweights/tensorfs/backing/remote"
)

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
