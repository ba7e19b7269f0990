package backing

import (
	"container/list"
	"os"

	"golang.org/x/sys/unix"
)

// The two tiers of an InflateCache: members in memory, bounded by
// MemLimit, and members in unlinked files, bounded by DiskLimit; the
// least recently read beyond a limit are spilled (memory to a file) or
// dropped (a file), and inflated again on their next read.

// newFile makes an unlinked read-write file in the cache's directory.
func (c *InflateCache) newFile() (*os.File, error) {
	fd, err := unix.Open(c.opts.Dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err == nil {
		return os.NewFile(uintptr(fd), c.opts.Dir+"/(inflated member)"), nil
	}
	f, err := os.CreateTemp(c.opts.Dir, ".tensorfs-inflated-*")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// reserveMem counts size bytes of memory, spilling the least recently
// used members to files to stay within the limit.
func (c *InflateCache) reserveMem(size int64) {
	c.mu.Lock()
	c.memUsed += size
	victims := c.evict(&c.mem, &c.memUsed, c.opts.MemLimit)
	c.mu.Unlock()
	for _, v := range victims {
		c.spill(v)
	}
}

// evict takes least recently used members off l until *used <= limit
// (a member read since it was placed goes to the front instead) and
// returns them, their bytes no longer counted. REQUIRES c.mu.
func (c *InflateCache) evict(l *list.List, used *int64, limit int64) []*memberSource {
	var out []*memberSource
	for passes := l.Len(); *used > limit && l.Len() > 0; {
		e := l.Back()
		v := e.Value.(*memberSource)
		if last := v.lastUse.Load(); last != v.stamp && passes > 0 {
			v.stamp = last
			l.MoveToFront(e)
			passes--
			continue
		}
		l.Remove(e)
		v.elem = nil
		*used -= v.m.Size
		out = append(out, v)
	}
	return out
}

// place puts s, just inflated, at the front of its list.
func (c *InflateCache) place(s *memberSource, inMem bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := &c.disk
	if inMem {
		l = &c.mem
	}
	s.stamp = s.lastUse.Load()
	s.elem = l.PushFront(s)
	c.signal()
}

// release uncounts a reservation that was not placed.
func (c *InflateCache) release(inMem bool, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if inMem {
		c.memUsed -= size
	} else {
		c.diskUsed -= size
	}
	c.signal()
}

// spill moves member v, taken off the memory list, to a file; where that
// cannot be done, its bytes are dropped (it is inflated again when read).
func (c *InflateCache) spill(v *memberSource) {
	v.mu.Lock()
	defer v.mu.Unlock()
	data := v.mem
	if data == nil || v.closed {
		return
	}
	v.mem = nil
	// No waiting here (a reservation is under way, and readers of v
	// wait on v.mu): without room now, the bytes are dropped.
	if err := c.reserveDisk(int64(len(data)), false, 0); err != nil {
		return
	}
	f, err := c.newFile()
	if err == nil {
		if _, err = f.WriteAt(data, 0); err != nil {
			f.Close()
		}
	}
	if err != nil {
		c.release(false, int64(len(data)))
		return
	}
	v.cached = f
	c.spills.Add(1)
	c.place(v, false)
}

func (c *InflateCache) dropAll(victims []*memberSource) {
	for _, v := range victims {
		v.mu.Lock()
		if v.cached != nil {
			v.cached.Close()
			v.cached = nil
			c.drops.Add(1)
		}
		v.mu.Unlock()
	}
}
