package remote

import (
	"container/list"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/lazyweights/tensorfs/backing"
)

// diskCacheVersion is the directory under CacheDir that holds this
// layout:
//
//	CacheDir/tensorfs-parts-v2/key        32 random bytes, mode 0600
//	CacheDir/tensorfs-parts-v2/XX/NAME.PART
//
// NAME is the HMAC-SHA256, under key, of the store's origin (where the
// bytes come from: Store.Origin), the object's identity (key, size, ETag,
// version, modification time) and the part size, and PART the part
// number: names cannot be predicted without the key. A file holds one
// part's bytes followed by macLen bytes of HMAC-SHA256, under key, of its
// name and bytes, checked on every read: a part changed in place, torn,
// renamed or planted fails it and is fetched again. A file is written to
// a temporary name and renamed into place.
//
// The cache directory, the version directory and every XX directory must
// be owned by this user (or root) and writable by nobody else
// (backing.OpenPrivateDir), else the cache is refused; everything under
// them is opened relative to the version directory's descriptor, without
// following symbolic links, and only regular files are read, never
// waited on (O_NONBLOCK: a named pipe cannot block open(2)).
const diskCacheVersion = "tensorfs-parts-v2"

// macLen is the length of the HMAC that ends each part file.
const macLen = sha256.Size

// keyName is the file of the cache's HMAC key in the version directory.
const keyName = "key"

// diskCache keeps parts on local disk within a budget of bytes, evicting
// the least recently used files (by this process's use, and by
// modification time for files found at start). Several processes may
// share a directory: each keeps its own budget, and a file removed under
// another is a miss there. Errors only cost a fetch: a part that cannot
// be written, read or verified is fetched from the store.
type diskCache struct {
	dir      *os.File // the version directory, checked private (owns dfd)
	dfd      int      // its descriptor
	path     string   // its path, for messages
	secret   []byte   // the HMAC key
	capacity int64
	logf     func(format string, args ...any)
	bad      atomic.Int64 // parts that failed their check

	mu    sync.Mutex
	used  int64                    // GUARDED_BY(mu)
	files map[string]*list.Element // GUARDED_BY(mu): name -> element of lru (*diskFile)
	lru   list.List                // GUARDED_BY(mu): front = least recently used
}

type diskFile struct {
	name string // relative to dir: XX/NAME.PART
	size int64
}

// openDiskCache checks root and creates its layout, and indexes the
// files already there. A directory that another user could write is an
// error (one line).
func openDiskCache(root string, capacity int64, logf func(string, ...any)) (*diskCache, error) {
	top, err := backing.OpenPrivateDir(root)
	if err != nil {
		return nil, fmt.Errorf("--cache-dir %w", err)
	}
	defer top.Close()
	path := filepath.Join(root, diskCacheVersion)
	vfd, err := backing.OpenPrivateSubdir(int(top.Fd()), diskCacheVersion, path, true)
	if err != nil {
		return nil, fmt.Errorf("--cache-dir %w", err)
	}
	d := &diskCache{dir: os.NewFile(uintptr(vfd), path), dfd: vfd, path: path, capacity: capacity, logf: logf, files: map[string]*list.Element{}}
	if d.secret, err = d.loadKey(); err != nil {
		d.dir.Close()
		return nil, fmt.Errorf("--cache-dir %w", err)
	}
	all, err := d.index()
	if err != nil {
		d.dir.Close()
		return nil, fmt.Errorf("--cache-dir %w", err)
	}
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

// loadKey reads the cache's HMAC key, making it first when there is none
// (written to a temporary file and linked into place: concurrent first
// opens agree on one key).
func (d *diskCache) loadKey() ([]byte, error) {
	dfd := d.dfd
	path := filepath.Join(d.path, keyName)
	key, err := d.readKey()
	if !errors.Is(err, unix.ENOENT) {
		return key, err
	}
	fresh := make([]byte, macLen)
	rand.Read(fresh)
	tmp := "key-" + hex.EncodeToString(fresh[:8]) + ".tmp"
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot create it: %v", path, err)
	}
	_, err = unix.Write(fd, fresh)
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err == nil {
		if err = unix.Linkat(dfd, tmp, dfd, keyName, 0); err == unix.EEXIST {
			err = nil // another process made it first: use theirs
		}
	}
	unix.Unlinkat(dfd, tmp, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot create it: %v", path, err)
	}
	return d.readKey()
}

// readKey reads the key file: a regular file of macLen bytes, readable
// and writable by this user only.
func (d *diskCache) readKey() ([]byte, error) {
	path := filepath.Join(d.path, keyName)
	fd, err := unix.Openat(d.dfd, keyName, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT {
		return nil, err
	}
	if err != nil {
		if err == unix.ELOOP {
			return nil, fmt.Errorf("%s: %w: a symbolic link, not a regular file", path, backing.ErrNotPrivate)
		}
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	defer unix.Close(fd)
	if err := backing.CheckPrivate(fd, path, false); err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if st.Uid != uint32(os.Geteuid()) || st.Mode&0o077 != 0 {
		return nil, fmt.Errorf("%s: %w: the cache's key must be yours and readable by you alone (mode 0600)", path, backing.ErrNotPrivate)
	}
	key := make([]byte, macLen+1)
	n, err := unix.Pread(fd, key, 0)
	if err != nil || n != macLen {
		return nil, fmt.Errorf("%s: not a key of %d bytes; remove it (the cache starts cold)", path, macLen)
	}
	return key[:macLen], nil
}

type foundFile struct {
	diskFile
	mod int64
}

// index lists the part files in the cache, removing temporary files left
// by a process that died writing them. A directory in it that is not
// private is an error.
func (d *diskCache) index() ([]foundFile, error) {
	ents, err := readDirAt(d.dfd, ".")
	if err != nil {
		return nil, fmt.Errorf("%s: %v", d.path, err)
	}
	var all []foundFile
	for _, sub := range ents {
		if !isSubdirName(sub) {
			continue
		}
		sfd, err := backing.OpenPrivateSubdir(d.dfd, sub, filepath.Join(d.path, sub), false)
		if err != nil {
			return nil, err
		}
		names, err := readDirAt(sfd, ".")
		if err != nil {
			unix.Close(sfd)
			return nil, fmt.Errorf("%s: %v", filepath.Join(d.path, sub), err)
		}
		for _, n := range names {
			var st unix.Stat_t
			if unix.Fstatat(sfd, n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
				continue // refused when read
			}
			if strings.HasSuffix(n, ".tmp") {
				unix.Unlinkat(sfd, n, 0) // left by a process that died writing it
				continue
			}
			all = append(all, foundFile{diskFile{sub + "/" + n, st.Size}, st.Mtim.Nano()})
		}
		unix.Close(sfd)
	}
	return all, nil
}

// readDirAt lists the names in directory name under dirfd.
func readDirAt(dirfd int, name string) ([]string, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	return f.Readdirnames(-1)
}

// isSubdirName reports whether name is one of the XX directories.
func isSubdirName(name string) bool {
	if len(name) != 2 {
		return false
	}
	_, err := hex.DecodeString(name)
	return err == nil && strings.ToLower(name) == name
}

// key is the file name stem for one object version of the store at
// origin read in parts of partSize.
func (d *diskCache) key(origin, identity string, partSize int64) string {
	m := hmac.New(sha256.New, d.secret)
	m.Write([]byte("name\x00" + origin + "\x00" + identity + "\x00" + strconv.FormatInt(partSize, 10)))
	return hex.EncodeToString(m.Sum(nil))
}

func (d *diskCache) name(key string, part int64) string {
	return key[:2] + "/" + key + "." + strconv.FormatInt(part, 10)
}

// mac is the HMAC of a part file's name and bytes.
func (d *diskCache) mac(name string, buf []byte) hash.Hash {
	m := hmac.New(sha256.New, d.secret)
	m.Write([]byte("part\x00" + name + "\x00"))
	m.Write(buf)
	return m
}

// subdir opens (creating it with create) the XX directory of name,
// checked private.
func (d *diskCache) subdir(name string, create bool) (int, error) {
	sub := name[:2]
	return backing.OpenPrivateSubdir(d.dfd, sub, filepath.Join(d.path, sub), create)
}

// get fills buf with the part, and reports whether it was there whole
// and passed its check. A file that fails it is removed.
func (d *diskCache) get(key string, part int64, buf []byte) bool {
	name := d.name(key, part)
	sfd, err := d.subdir(name, false)
	if err != nil {
		if !errors.Is(err, unix.ENOENT) {
			d.refuse(err)
		}
		return false
	}
	defer unix.Close(sfd)
	file := name[3:]
	path := filepath.Join(d.path, name)
	// drop removes the file, so that the part fetched instead takes its
	// place.
	drop := func(err error) bool {
		if err != nil {
			d.refuse(err)
		}
		unix.Unlinkat(sfd, file, 0)
		d.forget(name)
		return false
	}
	// As backing.OpenRegular: look before opening (a device is never
	// opened), open without following a link or waiting (a named pipe
	// swapped in between), then check what was opened.
	var lst unix.Stat_t
	if err := unix.Fstatat(sfd, file, &lst, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return false
	}
	if lst.Mode&unix.S_IFMT != unix.S_IFREG {
		return drop(fmt.Errorf("%s: %s, not a regular file", path, describe(lst.Mode)))
	}
	fd, err := unix.Openat(sfd, file, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err == unix.ELOOP {
		return drop(fmt.Errorf("%s: a symbolic link, not a regular file", path))
	}
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	if err := backing.CheckPrivate(fd, path, false); err != nil {
		return drop(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false
	}
	if st.Size != int64(len(buf))+macLen {
		return drop(fmt.Errorf("%s: %d bytes, want %d", path, st.Size, int64(len(buf))+macLen))
	}
	var sum [macLen]byte
	if !preadFull(fd, buf, 0) || !preadFull(fd, sum[:], int64(len(buf))) {
		return false
	}
	if !hmac.Equal(d.mac(name, buf).Sum(nil), sum[:]) {
		return drop(fmt.Errorf("%s: its bytes fail their checksum", path))
	}
	d.mu.Lock()
	if e, ok := d.files[name]; ok {
		d.lru.MoveToBack(e)
	} else {
		d.files[name] = d.lru.PushBack(&diskFile{name, st.Size})
		d.used += st.Size
		d.evict()
	}
	d.mu.Unlock()
	return true
}

// describe names the file type of a stat mode in words.
func describe(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return "a symbolic link"
	case unix.S_IFIFO:
		return "a named pipe (FIFO)"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	case unix.S_IFSOCK:
		return "a socket"
	}
	return "not a regular file"
}

// preadFull fills buf from fd at off.
func preadFull(fd int, buf []byte, off int64) bool {
	for len(buf) > 0 {
		n, err := unix.Pread(fd, buf, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return false
		}
		buf, off = buf[n:], off+int64(n)
	}
	return true
}

// refuse logs a part file that was not served (the first one only: the
// rest are counted), and fetches it again from the store.
func (d *diskCache) refuse(err error) {
	if d.bad.Add(1) == 1 {
		d.logf("tensorfs: disk cache: %v; not served, fetched from the store instead (further such parts are not logged)", err)
	}
}

// forget drops name from the index.
func (d *diskCache) forget(name string) {
	d.mu.Lock()
	if e, ok := d.files[name]; ok {
		d.lru.Remove(e)
		delete(d.files, name)
		d.used -= e.Value.(*diskFile).size
	}
	d.mu.Unlock()
}

// put stores a part; failures are ignored (the cache is only a cache).
func (d *diskCache) put(key string, part int64, buf []byte) {
	size := int64(len(buf)) + macLen
	if size > d.capacity {
		return
	}
	name := d.name(key, part)
	d.mu.Lock()
	_, have := d.files[name]
	d.mu.Unlock()
	if have {
		return
	}
	sfd, err := d.subdir(name, true)
	if err != nil {
		d.refuse(err)
		return
	}
	defer unix.Close(sfd)
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := name[3:] + "-" + hex.EncodeToString(rnd[:]) + ".tmp"
	fd, err := unix.Openat(sfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, err = f.Write(buf)
	if err == nil {
		_, err = f.Write(d.mac(name, buf).Sum(nil))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(sfd, tmp, sfd, name[3:])
	}
	if err != nil {
		unix.Unlinkat(sfd, tmp, 0)
		return
	}
	d.mu.Lock()
	if _, ok := d.files[name]; !ok {
		d.files[name] = d.lru.PushBack(&diskFile{name, size})
		d.used += size
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
		if sfd, err := d.subdir(f.name, false); err == nil {
			unix.Unlinkat(sfd, f.name[3:], 0)
			unix.Close(sfd)
		}
	}
}
