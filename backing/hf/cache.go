package hf

// This file: the local HF cache (HF_HUB_CACHE): the revision and the files at a sha, read without a request.

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/lazyweights/tensorfs/backing/remote"
)

// Why the listing comes from the HF cache alone (Store.cacheWhy).
const (
	whyOffline     = "HF_HUB_OFFLINE is set"
	whyUnreachable = "the Hub cannot be reached"
)

// maxRefSize bounds the bytes read of a refs/REV file: it holds a sha
// (40 bytes, perhaps a newline).
const maxRefSize = 256

// fromCache resolves the revision (or takes sha, when the Hub gave it)
// and lists the tree from the HF cache alone; why says why the Hub is
// not asked (whyOffline, whyUnreachable), for messages. A ref's content
// must be a commit sha and is never said (it could be any file's); the
// listing holds only files whose path, links followed, stays inside
// the repository's folder of the cache.
func (s *Store) fromCache(why, sha string) (string, map[string]fileInfo, error) {
	fail := func(format string, args ...any) error {
		return &remote.Error{URL: s.URL(""), Kind: remote.NotFound, Msg: why + " and " + fmt.Sprintf(format, args...)}
	}
	if s.cacheDir == "" {
		return "", nil, fail("there is no HF cache (LLAMA_CACHE, HF_HUB_CACHE, HF_HOME)")
	}
	if sha == "" {
		sha = s.rev
	}
	if !isSHA(sha) {
		refs := filepath.Join(s.cacheDir, "refs")
		ref := filepath.Join(refs, filepath.FromSlash(s.rev))
		if !within(refs, ref) {
			// Parse refuses such a revision; kept for a Store made
			// otherwise.
			return "", nil, fail("the revision %s is not a name under refs/", strconv.Quote(s.rev))
		}
		b, n, err := readSmall(ref, maxRefSize)
		if os.IsNotExist(err) {
			return "", nil, fail("the HF cache has no revision %s (%s)", strconv.Quote(s.rev), ref)
		}
		if err != nil {
			return "", nil, fail("%s cannot be read: %v", ref, pathless(err))
		}
		if sha = strings.TrimSpace(string(b)); !isSHA(sha) {
			return "", nil, fail("%s does not hold a commit sha (40 hex digits; it holds %s bytes)", ref, n)
		}
	}
	root := filepath.Join(s.cacheDir, "snapshots", sha)
	if _, err := os.Lstat(root); err != nil {
		return "", nil, fail("the HF cache has no snapshot %s (%s)", sha, root)
	}
	top, err := filepath.EvalSymlinks(s.cacheDir)
	if err != nil {
		return "", nil, fail("%s cannot be read: %v", s.cacheDir, pathless(err))
	}
	files := map[string]fileInfo{}
	seen := 0
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if seen++; seen > maxTreeEntries {
			return fmt.Errorf("more than %d entries", maxTreeEntries)
		}
		if d.IsDir() {
			return nil // a link to a folder is not one: not walked
		}
		real, ok := inside(top, p)
		if !ok {
			return nil // a dangling link, or one out of the cache: not there
		}
		st, err := os.Stat(real)
		if err != nil || !st.Mode().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		etag := ""
		if t, err := os.Readlink(p); err == nil {
			etag = filepath.Base(t)
		}
		fi := fileInfo{size: st.Size(), etag: etag}
		if len(etag) == 64 {
			fi.sha256 = etag
		}
		files[filepath.ToSlash(rel)] = fi
		return nil
	})
	if err != nil {
		return "", nil, fail("the snapshot %s cannot be listed: %v", root, pathless(err))
	}
	return sha, files, nil
}

// readSmall reads the regular file p when it holds at most limit bytes;
// n says its size for a message ("more than LIMIT" when larger).
func readSmall(p string, limit int64) (b []byte, n string, err error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, "", err
	}
	if !st.Mode().IsRegular() {
		return nil, "not a file's", nil
	}
	b, err = io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, "", err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Sprintf("more than %d", limit), nil
	}
	return b, strconv.Itoa(len(b)), nil
}

// pathless is err without the path an *os.PathError repeats.
func pathless(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// within reports whether p is root or under it (both cleaned, links not
// followed).
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// inside is p with its links followed, when that stays under top (the
// repository's folder in the cache, its own links followed): a snapshot
// links into blobs/, never out of the cache.
func inside(top, p string) (string, bool) {
	real, err := filepath.EvalSymlinks(p)
	if err != nil || !within(top, real) {
		return "", false
	}
	return real, true
}

// snapshotPath is key's path in the cache at sha, for messages.
func (s *Store) snapshotPath(sha, key string) string {
	return filepath.Join(s.cacheDir, "snapshots", sha, filepath.FromSlash(key))
}

// openLocal opens key's file in the HF cache at sha, when it is there
// with the listed size, inside the cache (nil otherwise).
func (s *Store) openLocal(key, sha string, fi fileInfo) *os.File {
	if s.cacheDir == "" || !safeKey(key) || !isSHA(sha) {
		return nil
	}
	top, err := filepath.EvalSymlinks(s.cacheDir)
	if err != nil {
		return nil
	}
	real, ok := inside(top, s.snapshotPath(sha, key))
	if !ok {
		return nil
	}
	f, err := os.Open(real)
	if err != nil {
		return nil
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() != fi.size {
		f.Close()
		return nil
	}
	return f
}
