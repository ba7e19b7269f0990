package storetest

import (
	"bytes"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/backing/remote"
)

// flow checks a Prefetch range read in chunks (a loader streaming a
// tensor: one GET whose body is read into the reader's successive
// buffers, which Store.Get takes from its slice only as each is
// reached): the bytes are the object's, each buffer's kept after its
// read returned; so they are through a reply cut mid-body (resumed with
// a ranged GET from the buffer it was filling, its signed URL, where the
// store has them, expired since the flow's GET began); so are the
// ranges of a plan (a loader's worker streaming a run of tensors, with
// padding between some: one GET, the padding read and dropped), whole
// or through a cut reply.
func (s *suite) flow(t *testing.T) {
	stream := func(t *testing.T, key string, plan []backing.Range, chunk int64, cut int64) {
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
		if len(plan) == 1 {
			src.Prefetch(plan[0].Off, plan[0].Len)
		} else {
			src.PrefetchPlan(plan, chunk)
		}
		var bufs, wants [][]byte
		for _, r := range plan {
			for at := r.Off; at < r.Off+r.Len; at += chunk {
				p := make([]byte, chunk)[:min(chunk, r.Off+r.Len-at)]
				if k, err := src.ReadAt(p, at); k != len(p) || err != nil {
					t.Fatalf("ReadAt(%d bytes at %d) in a Prefetch range = %d, %v", len(p), at, k, err)
				}
				bufs = append(bufs, p)
				if cut > 0 && len(bufs) == 1 && s.f.Expire != nil {
					// The GET that resumes the cut one needs a
					// URL obtained again.
					s.f.Expire(t)
				}
			}
			wants = append(wants, want[r.Off:r.Off+r.Len])
		}
		if held != nil {
			waitOrFail(t, held, "the server cutting the reply")
		}
		if !bytes.Equal(bytes.Join(bufs, nil), bytes.Join(wants, nil)) {
			t.Fatal("a Prefetch range read in chunks: the bytes differ from the object's")
		}
		src.Close()
	}
	t.Run("whole", func(t *testing.T) {
		stream(t, keyRanges, []backing.Range{{Off: partSize + 1000, Len: 130_000}}, 3*partSize, 0) // past part 0, which Open keeps
	})
	t.Run("cut", func(t *testing.T) {
		s.lacks(t, "Holder", s.f.Holder == nil)
		stream(t, keyCut, []backing.Range{{Off: partSize + 7, Len: 5*partSize - 7}}, partSize, partSize+100)
	})
	// A plan: ranges end to end, and with 32 and 5000 bytes between.
	plan := func(off int64, lens ...int64) []backing.Range {
		var p []backing.Range
		for i, n := range lens {
			p = append(p, backing.Range{Off: off, Len: n})
			off += n + []int64{0, 32, 5000}[i%3]
		}
		return p
	}
	t.Run("plan", func(t *testing.T) {
		stream(t, keyRanges, plan(partSize+1000, 40_000, 30_000, 20_000, 30_000), 3*partSize, 0)
	})
	t.Run("plan cut", func(t *testing.T) {
		s.lacks(t, "Holder", s.f.Holder == nil)
		stream(t, keyCut, plan(partSize+7, 2*partSize, partSize+50, 2*partSize-100), partSize, 2*partSize+100)
	})
}
