package remote

import (
	"context"
	"fmt"
	"io"
	"sync"
)

// parseBlock is the unit a parse view fetches for a small read that no
// cached part holds: parsers read headers scattered through a file (a
// zip's local header before every member, the central directory at the
// end), and fetching a whole part for each would read most of a large
// checkpoint before serving any of it.
const parseBlock = 256 << 10

// parseBlocks bounds the blocks a parse view keeps (16 MiB).
const parseBlocks = 64

// ForParsing returns a view of s to validate it through: small reads
// that no cached part holds fetch parseBlock-sized ranges (kept while
// the view lives) instead of whole parts; larger reads go to s. Close on
// the view closes s; Unwrap gives s back for serving.
func (s *Source) ForParsing() *parseView {
	return &parseView{Source: s, blocks: map[int64][]byte{}}
}

// parseView is a Source read with small fetches for small reads.
type parseView struct {
	*Source
	mu     sync.Mutex
	blocks map[int64][]byte // GUARDED_BY(mu): block number -> bytes
}

// Unwrap returns the Source a parse view reads.
func (v *parseView) Unwrap() *Source { return v.Source }

// Unwrap returns the *Source behind a ForParsing view, or s itself.
func Unwrap(s any) (*Source, bool) {
	switch s := s.(type) {
	case *parseView:
		return s.Source, true
	case *Source:
		return s, true
	}
	return nil, false
}

// ReadAt serves small reads from cached parts or blocks.
func (v *parseView) ReadAt(p []byte, off int64) (int, error) {
	s := v.Source
	if len(p) > parseBlock || off < 0 || off >= s.obj.Size || s.closed.Load() {
		return s.ReadAt(p, off)
	}
	want := int64(len(p))
	eof := false
	if want > s.obj.Size-off {
		want, eof = s.obj.Size-off, true
	}
	done := int64(0)
	for done < want {
		at := off + done
		if pt := s.c.mem.peek(partKey{s.id, at / s.c.opts.PartSize}); pt != nil {
			done += int64(copy(p[done:want], pt.buf[at-pt.key.idx*s.c.opts.PartSize:]))
			s.c.mem.release(pt)
			continue
		}
		b, err := v.block(at / parseBlock)
		if err != nil {
			return int(done), s.fault(off, want, err)
		}
		done += int64(copy(p[done:want], b[at%parseBlock:]))
	}
	if eof {
		return int(want), io.EOF
	}
	return int(want), nil
}

// block returns block i, fetching it.
func (v *parseView) block(i int64) ([]byte, error) {
	v.mu.Lock()
	b, ok := v.blocks[i]
	v.mu.Unlock()
	if ok {
		return b, nil
	}
	s := v.Source
	if err := s.changedErr(); err != nil {
		return nil, err
	}
	b = make([]byte, min(parseBlock, s.obj.Size-i*parseBlock))
	ctx, cancel := context.WithTimeout(s.c.opts.Context, s.c.opts.OpenTimeout)
	defer cancel()
	if err := s.get(ctx, i*parseBlock, [][]byte{b}, nil); err != nil {
		return nil, err
	}
	v.mu.Lock()
	if len(v.blocks) >= parseBlocks {
		clear(v.blocks)
	}
	v.blocks[i] = b
	v.mu.Unlock()
	return b, nil
}

// Close closes the source.
func (v *parseView) Close() error {
	v.mu.Lock()
	clear(v.blocks)
	v.mu.Unlock()
	return v.Source.Close()
}

// String names the view in messages.
func (v *parseView) String() string { return fmt.Sprintf("%s (parsing)", v.url) }
