package hf

// This file: the local HF cache (HF_HUB_CACHE): the revision and the files at a sha, read without a request.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/lazyweights/tensorfs/backing/remote"
)

// fromCache resolves the revision and lists the tree from the HF cache
// alone (offline).
func (s *Store) fromCache() (string, map[string]fileInfo, error) {
	if s.cacheDir == "" {
		return "", nil, &remote.Error{URL: s.URL(""), Kind: remote.NotFound, Msg: "HF_HUB_OFFLINE is set and there is no HF cache (HF_HUB_CACHE, HF_HOME)"}
	}
	sha := s.rev
	if !isSHA(sha) {
		b, err := os.ReadFile(filepath.Join(s.cacheDir, "refs", filepath.FromSlash(s.rev)))
		if err != nil {
			return "", nil, &remote.Error{URL: s.URL(""), Kind: remote.NotFound, Msg: fmt.Sprintf("HF_HUB_OFFLINE is set and the HF cache has no revision %s (%s)", strconv.Quote(s.rev), filepath.Join(s.cacheDir, "refs", s.rev))}
		}
		sha = strings.TrimSpace(string(b))
	}
	root := filepath.Join(s.cacheDir, "snapshots", sha)
	files := map[string]fileInfo{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		st, err := os.Stat(p) // through the link
		if err != nil || !st.Mode().IsRegular() {
			return nil // a dangling link: not there
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
		return "", nil, &remote.Error{URL: s.URL(""), Kind: remote.NotFound, Msg: fmt.Sprintf("HF_HUB_OFFLINE is set and the HF cache has no snapshot %s (%s)", sha, root)}
	}
	return sha, files, nil
}

// openLocal opens key's file in the HF cache at sha, when it is there
// with the listed size (nil otherwise).
func (s *Store) openLocal(key, sha string, fi fileInfo) *os.File {
	if s.cacheDir == "" {
		return nil
	}
	p := filepath.Join(s.cacheDir, "snapshots", sha, filepath.FromSlash(key))
	f, err := os.Open(p)
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
