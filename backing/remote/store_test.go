package remote

import (
	"context"
	"net"
	"testing"
	"time"
)

// TestNoSuchHostNotRetried: a host name that does not exist (DNS said
// so) is not retried until the deadline (hf:// with no network waited
// 10 s for it), while a resolver that timed out or failed for now is;
// both stay network errors (the HF cache fallback depends on that).
func TestNoSuchHostNotRetried(t *testing.T) {
	for _, c := range []struct {
		err   error
		tries int // at least
		kind  Kind
	}{
		{&net.DNSError{Err: "no such host", Name: "huggingface.co", IsNotFound: true}, 1, Invalid},
		{&net.DNSError{Err: "server misbehaving", Name: "huggingface.co", IsTemporary: true}, 2, Transient},
		{&net.DNSError{Err: "i/o timeout", Name: "huggingface.co", IsTimeout: true}, 2, Transient},
	} {
		if !NetworkError(c.err) {
			t.Errorf("%v: not a network error", c.err)
		}
		if k := KindOf(c.err); k != c.kind {
			t.Errorf("%v: kind %v, want %v", c.err, k, c.kind)
		}
		tries := 0
		ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
		err := retry(ctx, func(context.Context) error { tries++; return &Error{Kind: ConnKind(c.err), Err: c.err} })
		cancel()
		if err == nil || (c.tries == 1 && tries != 1) || tries < c.tries {
			t.Errorf("%v: %d tries, error %v; want %s", c.err, tries, err, map[bool]string{true: "exactly 1", false: "retries"}[c.tries == 1])
		}
	}
}
