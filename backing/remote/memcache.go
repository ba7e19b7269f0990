package remote

import (
	"container/list"
	"sync"
)

// partKey names one part of one open source.
type partKey struct {
	src uint64 // Source.id
	idx int64  // part number
}

// part is one part's bytes, being fetched or ready.
type part struct {
	key  partKey
	buf  []byte        // the part's bytes (its length); capacity PartSize
	done chan struct{} // closed when buf (or err) is ready
	err  error         // set before done is closed

	// GUARDED_BY(memCache.mu)
	pins   int           // readers and the fetch holding it
	read   bool          // a reader has copied from it (prefetches may evict it)
	elem   *list.Element // position in the LRU list when ready and unpinned
	cached bool          // counted in memCache.used (not an overflow buffer)
}

// memCache holds parts in memory, all sources of a Client together,
// within a budget of bytes. A part that a reader or fetch holds is
// pinned and never evicted; ready parts nobody holds are evicted least
// recently used first and their buffers reused. When every byte of the
// budget is pinned, readers get overflow buffers that are dropped after
// use (memory then grows with the number of concurrent readers, never
// with the object's size); prefetches are skipped.
type memCache struct {
	partSize int64
	capacity int64

	mu    sync.Mutex
	used  int64             // GUARDED_BY(mu): bytes of cached parts' buffers
	parts map[partKey]*part // GUARDED_BY(mu)
	lru   list.List         // GUARDED_BY(mu): of *part, front = least recently used
	spare [][]byte          // GUARDED_BY(mu): overflow buffers to reuse (at most maxSpare)
	hits  int64             // GUARDED_BY(mu)
	miss  int64             // GUARDED_BY(mu)
}

func newMemCache(capacity, partSize int64) *memCache {
	return &memCache{partSize: partSize, capacity: capacity, parts: map[partKey]*part{}}
}

// acquire returns key's part pinned. fresh means the caller must fill it
// (and call finish). With prefetch, an existing part gives nil, and so
// does a full cache.
func (m *memCache) acquire(key partKey, length int64, prefetch bool) (p *part, fresh bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.parts[key]; p != nil {
		if prefetch {
			return nil, false
		}
		m.hits++
		p.read = true
		if p.elem != nil {
			m.lru.Remove(p.elem)
			p.elem = nil
		}
		p.pins++
		return p, false
	}
	buf, cached := m.buffer(prefetch)
	if buf == nil {
		return nil, false
	}
	if !prefetch {
		m.miss++
	}
	p = &part{key: key, buf: buf[:length], done: make(chan struct{}), pins: 1, cached: cached, read: !prefetch}
	m.parts[key] = p
	return p, true
}

// buffer finds a buffer of PartSize bytes within the budget, evicting
// unpinned parts, or an overflow buffer (cached false; nil for a
// prefetch). REQUIRES mu.
func (m *memCache) buffer(prefetch bool) (buf []byte, cached bool) {
	if m.used+m.partSize <= m.capacity {
		m.used += m.partSize
		return make([]byte, m.partSize), true
	}
	// Parts already read go first. A prefetch never evicts another
	// prefetch's parts that nobody has used yet (that would thrash); a
	// reader does only when nothing else is left.
	victim := (*list.Element)(nil)
	for e := m.lru.Front(); e != nil; e = e.Next() {
		if e.Value.(*part).read {
			victim = e
			break
		}
	}
	if victim == nil && !prefetch {
		victim = m.lru.Front()
	}
	if victim != nil {
		old := victim.Value.(*part)
		m.lru.Remove(victim)
		old.elem = nil
		delete(m.parts, old.key)
		return old.buf[:cap(old.buf)], true
	}
	if prefetch {
		return nil, false
	}
	if n := len(m.spare); n > 0 {
		buf := m.spare[n-1]
		m.spare = m.spare[:n-1]
		return buf, false
	}
	return make([]byte, m.partSize), false
}

// maxSpare bounds the overflow buffers kept for reuse, so that a burst of
// readers does not leave the garbage collector a heap of part buffers.
const maxSpare = 4

// peek returns key's part pinned when it is ready, without fetching.
func (m *memCache) peek(key partKey) *part {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.parts[key]
	if p == nil {
		return nil
	}
	select {
	case <-p.done:
	default:
		return nil
	}
	if p.err != nil {
		return nil
	}
	if p.elem != nil {
		m.lru.Remove(p.elem)
		p.elem = nil
	}
	p.pins++
	return p
}

// missing counts the parts first..last of source src that are neither
// cached nor being fetched, and says whether part first is one of them.
func (m *memCache) missing(src uint64, first, last int64) (n int64, firstMissing bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := first; i <= last; i++ {
		if m.parts[partKey{src, i}] == nil {
			n++
			if i == first {
				firstMissing = true
			}
		}
	}
	return n, firstMissing
}

// absent says whether none of the parts first..last of source src is
// cached or being fetched.
func (m *memCache) absent(src uint64, first, last int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := first; i <= last; i++ {
		if m.parts[partKey{src, i}] != nil {
			return false
		}
	}
	return true
}

// missed counts n parts read without the cache (straight into a
// reader's buffer) as misses.
func (m *memCache) missed(n int64) {
	m.mu.Lock()
	m.miss += n
	m.mu.Unlock()
}

// finish publishes a fresh part's bytes or error. A failed part is
// forgotten, so that the next read fetches it again.
func (m *memCache) finish(p *part, err error) {
	p.err = err
	close(p.done)
}

// release unpins p; the last release of a ready part makes it evictable.
func (m *memCache) release(p *part) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p.pins--
	if p.pins > 0 {
		return
	}
	if p.err != nil || !p.cached {
		overflow := !p.cached
		m.forget(p)
		if overflow && len(m.spare) < maxSpare {
			m.spare = append(m.spare, p.buf[:cap(p.buf)])
		}
		return
	}
	p.elem = m.lru.PushBack(p)
}

// forget removes an unpinned p from the cache. REQUIRES mu.
func (m *memCache) forget(p *part) {
	if m.parts[p.key] == p {
		delete(m.parts, p.key)
	}
	if p.elem != nil {
		m.lru.Remove(p.elem)
		p.elem = nil
	}
	if p.cached {
		p.cached = false
		m.used -= m.partSize
	}
}

// drop forgets every part of source src: unpinned ones now, pinned ones
// at their last release.
func (m *memCache) drop(src uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, p := range m.parts {
		if k.src != src {
			continue
		}
		delete(m.parts, k)
		if p.pins == 0 {
			m.forget(p)
		} else if p.cached {
			p.cached = false
			m.used -= m.partSize
		}
	}
}

// stats returns hits and misses of reads (not prefetches).
func (m *memCache) stats() (hits, misses int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.hits, m.miss
}
