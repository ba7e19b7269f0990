package remote

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
)

// diskCacheVersion is the directory under CacheDir that holds this
// layout: CacheDir/tensorfs-parts-v1/XX/HASH.PART, where HASH is the
// sha256 of the store, the object's identity (key, size, ETag, version,
// modification time) and the part size, and PART the part number. A file
// holds exactly one part's bytes; it is written to a temporary name and
// renamed into place, so a reader never sees half a part.
const diskCacheVersion = "tensorfs-parts-v1"

// diskCache keeps parts on local disk within a budget of bytes, evicting
// the least recently used files (by this process's use, and by
// modification time for files found at start). Several processes may
// share a directory: each keeps its own budget, and a file removed under
// another is a miss there. Errors only cost a fetch: a part that cannot
// be written or read is fetched from the store.
type diskCache struct {
	dir      string
	capacity int64

	mu    sync.Mutex
	used  int64                    // GUARDED_BY(mu)
	files map[string]*list.Element // GUARDED_BY(mu): name -> element of lru (*diskFile)
	lru   list.List                // GUARDED_BY(mu): front = least recently used
}

type diskFile struct {
	name string // relative to dir
	size int64
}

// openDiskCache creates dir's layout and indexes the files already there.
func openDiskCache(root string, capacity int64) (*diskCache, error) {
	dir := filepath.Join(root, diskCacheVersion)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("remote: --cache-dir: %v", err)
	}
	d := &diskCache{dir: dir, capacity: capacity, files: map[string]*list.Element{}}
	type found struct {
		diskFile
		mod int64
	}
	var all []found
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return nil
		}
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if filepath.Ext(rel) == ".tmp" {
			os.Remove(p) // left by a process that died writing it
			return nil
		}
		all = append(all, found{diskFile{rel, info.Size()}, info.ModTime().UnixNano()})
		return nil
	})
	sort.Slice(all, func(i, j int) bool { return all[i].mod < all[j].mod })
	d.mu.Lock()
	for _, f := range all {
		d.files[f.name] = d.lru.PushBack(&diskFile{f.name, f.size})
		d.used += f.size
	}
	d.evict()
	d.mu.Unlock()
	return d, nil
}

// key is the file name stem for one object version read in parts of
// partSize.
func (d *diskCache) key(store, identity string, partSize int64) string {
	h := sha256.Sum256([]byte(store + "\x00" + identity + "\x00" + strconv.FormatInt(partSize, 10)))
	return hex.EncodeToString(h[:])
}

func (d *diskCache) name(key string, part int64) string {
	return filepath.Join(key[:2], key+"."+strconv.FormatInt(part, 10))
}

// get fills buf with the part, and reports whether it was there whole.
func (d *diskCache) get(key string, part int64, buf []byte) bool {
	name := d.name(key, part)
	f, err := os.Open(filepath.Join(d.dir, name))
	if err != nil {
		return false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() != int64(len(buf)) {
		return false
	}
	if n, err := f.ReadAt(buf, 0); n != len(buf) && err != nil {
		return false
	}
	d.mu.Lock()
	if e, ok := d.files[name]; ok {
		d.lru.MoveToBack(e)
	} else {
		d.files[name] = d.lru.PushBack(&diskFile{name, st.Size()})
		d.used += st.Size()
		d.evict()
	}
	d.mu.Unlock()
	return true
}

// put stores a part; failures are ignored (the cache is only a cache).
func (d *diskCache) put(key string, part int64, buf []byte) {
	if int64(len(buf)) > d.capacity {
		return
	}
	name := d.name(key, part)
	path := filepath.Join(d.dir, name)
	d.mu.Lock()
	_, have := d.files[name]
	d.mu.Unlock()
	if have {
		return
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "part-*.tmp")
	if err != nil {
		return
	}
	_, err = tmp.Write(buf)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return
	}
	d.mu.Lock()
	if _, ok := d.files[name]; !ok {
		d.files[name] = d.lru.PushBack(&diskFile{name, int64(len(buf))})
		d.used += int64(len(buf))
	}
	d.evict()
	d.mu.Unlock()
}

// evict removes the least recently used files until the cache fits its
// budget. REQUIRES mu.
func (d *diskCache) evict() {
	for d.used > d.capacity {
		e := d.lru.Front()
		if e == nil {
			return
		}
		f := e.Value.(*diskFile)
		d.lru.Remove(e)
		delete(d.files, f.name)
		d.used -= f.size
		os.Remove(filepath.Join(d.dir, f.name))
	}
}
