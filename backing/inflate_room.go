package backing

import (
	"fmt"
	"time"
)

// Room on disk for inflated members: a reservation waits for it.
//
// DiskLimit holds the files of placed members and the reservations of
// members being inflated. A member that needs room takes it from placed
// members that are idle: no read in progress (pins) and none started or
// finished within inflateIdle, least recently read first. A file being
// read is never dropped under its reader, so a reader going through a
// member chunk by chunk keeps it while another member waits, instead of
// the two evicting each other at every chunk. When the idle members do not
// make room (the rest is being inflated or read), the reservation waits:
// it looks again whenever room may have come (a reservation released, a
// member placed or closed) and every inflateIdle (a member falls idle), at
// most InflateOptions.Wait, after which it fails (that read is EIO through
// a mount; the next read tries again). Reservations in flight always end
// (an inflation is bounded work), and so do reads, so the wait ends when
// the members that hold the room are done with.

// inflateIdle is how long a member on disk must go unread before a
// reservation may drop it. Reads of a member follow each other far
// faster (a chunk copy, a hash, a GPU copy); this only sets how soon a
// waiting member sees the room a finished reader left.
const inflateIdle = 200 * time.Millisecond

// monoEpoch and monoNow give a monotonic clock in nanoseconds.
var monoEpoch = time.Now()

func monoNow() int64 { return int64(time.Since(monoEpoch)) }

// signal wakes the reservations waiting for room. REQUIRES c.mu.
func (c *InflateCache) signal() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// unpin ends a read of s; the last one may leave room for a waiting
// reservation (once s falls idle).
func (s *memberSource) unpin() {
	s.lastUse.Store(monoNow())
	s.pins.Add(-1)
}

// reserveDisk counts size bytes of disk for a member about to be
// inflated (or spilled), dropping idle members' files to make room
// (evictIdle). With wait, it waits for room while the limit is taken by
// members being inflated or read, at most c.opts.Wait; without, it fails
// at once. held is the disk the caller itself keeps meanwhile (the outer
// member it reads, pinned): what cannot fit beside it fails at once.
func (c *InflateCache) reserveDisk(size int64, wait bool, held int64) error {
	if size+held > c.opts.DiskLimit {
		with := ""
		if held > 0 {
			with = fmt.Sprintf(" with the %d bytes of the member it is read from", held)
		}
		return fmt.Errorf("%d bytes%s, more than the %d bytes of disk the cache of inflated members may use (tensorfs --inflate-disk)", size, with, c.opts.DiskLimit)
	}
	var deadline time.Time
	c.mu.Lock()
	for {
		victims := c.evictIdle(size)
		if c.diskUsed+size <= c.opts.DiskLimit {
			c.diskUsed += size
			c.mu.Unlock()
			c.dropAll(victims)
			return nil
		}
		changed := c.changed
		c.mu.Unlock()
		c.dropAll(victims)
		if !wait {
			return fmt.Errorf("the %d bytes of disk for inflated members (tensorfs --inflate-disk) are taken by members being inflated or read now", c.opts.DiskLimit)
		}
		now := time.Now()
		if deadline.IsZero() {
			deadline = now.Add(c.opts.Wait)
		}
		left := deadline.Sub(now)
		if left <= 0 {
			return fmt.Errorf("waited %v for room: the %d bytes of disk for inflated members (tensorfs --inflate-disk) stayed taken by members being inflated or read", c.opts.Wait, c.opts.DiskLimit)
		}
		t := time.NewTimer(min(left, inflateIdle))
		select {
		case <-changed:
		case <-t.C:
		}
		t.Stop()
		c.mu.Lock()
	}
}

// evictIdle takes idle members off the disk list, least recently read
// first, until size more bytes fit the limit or none is idle, and returns
// them, their bytes no longer counted. A member read within inflateIdle,
// or being read, goes to the front instead. REQUIRES c.mu.
func (c *InflateCache) evictIdle(size int64) []*memberSource {
	var out []*memberSource
	now := monoNow()
	for passes := c.disk.Len(); c.diskUsed+size > c.opts.DiskLimit && passes > 0; passes-- {
		e := c.disk.Back()
		v := e.Value.(*memberSource)
		if v.pins.Load() > 0 || now-v.lastUse.Load() < int64(inflateIdle) {
			c.disk.MoveToFront(e)
			continue
		}
		c.disk.Remove(e)
		v.elem = nil
		c.diskUsed -= v.m.Size
		out = append(out, v)
	}
	return out
}
