package storetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/backing/remote"
)

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
