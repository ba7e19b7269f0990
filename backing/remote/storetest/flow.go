package storetest

import (
	"bytes"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/backing/remote"
)

// flow checks a Prefetch range read in chunks (a loader streaming a
// tensor: one GET whose body is read into the reader's successive
// buffers, which Store.Get takes from its slice only as each is
// reached): the bytes are the object's, each buffer's kept after its
// read returned; so they are through a reply cut mid-body (resumed with
// a ranged GET from the buffer it was filling, its signed URL, where the
// store has them, expired since the flow's GET began).
func (s *suite) flow(t *testing.T) {
	stream := func(t *testing.T, key string, off, n, chunk int64, cut int64) {
		want := s.objects[key]
		c, err := remote.New(s.f.Store, remote.Options{
			PartSize: partSize, MemCache: 64 * partSize, Readahead: 4 * partSize, Parallel: 4,
			Timeout: time.Minute, OpenTimeout: time.Minute, ReadErrorsReturned: true, Logf: t.Logf,
		})
		if err != nil {
			t.Fatal(err)
		}
		src := s.open(t, c, key)
		var held <-chan struct{}
		if cut > 0 {
			held = s.f.Holder.Cut(cut)
		}
		src.Prefetch(off, n)
		var bufs [][]byte
		for at := off; at < off+n; at += chunk {
			p := make([]byte, min(chunk, off+n-at))
			if k, err := src.ReadAt(p, at); k != len(p) || err != nil {
				t.Fatalf("ReadAt(%d bytes at %d) in a Prefetch range = %d, %v", len(p), at, k, err)
			}
			bufs = append(bufs, p)
			if cut > 0 && len(bufs) == 1 && s.f.Expire != nil {
				// The GET that resumes the cut one needs a URL
				// obtained again.
				s.f.Expire(t)
			}
		}
		if held != nil {
			waitOrFail(t, held, "the server cutting the reply")
		}
		if !bytes.Equal(bytes.Join(bufs, nil), want[off:off+n]) {
			t.Fatal("a Prefetch range read in chunks: the bytes differ from the object's")
		}
		src.Close()
	}
	t.Run("whole", func(t *testing.T) {
		stream(t, keyRanges, partSize+1000, 130_000, 3*partSize, 0) // past part 0, which Open keeps
	})
	t.Run("cut", func(t *testing.T) {
		s.lacks(t, "Holder", s.f.Holder == nil)
		stream(t, keyCut, partSize+7, 5*partSize-7, partSize, partSize+100)
	})
}
