package hf

// This file: --hf-cache-write: files read whole from the Hub are put into the local HF cache, as huggingface_hub lays it out.

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// A cacheWriter puts the files a Store reads from the Hub into the HF
// cache (Options.CacheWrite). Each GET's bytes are written at their
// offset into a private file beside the blobs
// (blobs/ETAG.tensorfs-*.part: never huggingface_hub's .incomplete,
// which it resumes as a prefix); when every byte of a file has been
// read, the file is checked against its identity (an LFS file's sha256,
// a git file's blob sha1), renamed to blobs/ETAG, linked from
// snapshots/SHA/PATH (../ as deep as PATH, as huggingface_hub links),
// and refs/REV is written for a branch or tag. A file read in part is
// never put there: its .part file is removed when the store is closed.
// Failures cost only the cache: one log line, and the read is served.
type cacheWriter struct {
	dir  string // HubCache/models--ORG--NAME
	logf func(format string, args ...any)

	mu    sync.Mutex
	parts map[string]*partial // GUARDED_BY(mu): key -> its file being written
	done  map[string]bool     // GUARDED_BY(mu): keys put into the cache, or given up
	refs  bool                // GUARDED_BY(mu): refs/REV written
	wg    sync.WaitGroup      // the checks of completed files
}

// partial is one file being put into the cache.
type partial struct {
	f      *os.File
	size   int64
	etag   string
	sha256 string // "" for a file in git: its etag is the blob sha1
	have   []span // GUARDED_BY(cacheWriter.mu): written, sorted, merged
	failed bool   // GUARDED_BY(cacheWriter.mu)
}

type span struct{ from, to int64 }

// add merges [from, to) into spans and returns the bytes covered.
func addSpan(spans []span, from, to int64) ([]span, int64) {
	i, _ := slices.BinarySearchFunc(spans, from, func(s span, x int64) int {
		if s.to < x {
			return -1
		}
		return 1
	})
	j := i
	for j < len(spans) && spans[j].from <= to {
		from, to = min(from, spans[j].from), max(to, spans[j].to)
		j++
	}
	spans = slices.Replace(spans, i, j, span{from, to})
	var n int64
	for _, s := range spans {
		n += s.to - s.from
	}
	return spans, n
}

// safeKey reports whether key can name a file under snapshots/SHA/: a
// relative slash path of plain names.
func safeKey(key string) bool {
	if key == "" || strings.HasPrefix(key, "/") || strings.ContainsAny(key, "\\\x00") {
		return false
	}
	for _, e := range strings.Split(key, "/") {
		if e == "" || e == "." || e == ".." {
			return false
		}
	}
	return true
}

// safeETag reports whether etag can name a blob: a git sha1 or an LFS
// sha256, in hex.
func safeETag(etag string) bool {
	if len(etag) != 40 && len(etag) != 64 {
		return false
	}
	_, err := hex.DecodeString(etag)
	return err == nil && strings.ToLower(etag) == etag
}

// wrote records that bytes [off, off+len(b)) of key's file (fi) were
// read from the Hub at sha, rev as given.
func (w *cacheWriter) wrote(s *Store, key string, fi fileInfo, off int64, bufs [][]byte) {
	w.mu.Lock()
	if w.done[key] {
		w.mu.Unlock()
		return
	}
	p := w.parts[key]
	if p == nil {
		if !safeKey(key) || !safeETag(fi.etag) {
			w.done[key] = true
			w.mu.Unlock()
			w.logf("tensorfs: %s: not put into the HF cache: its path or ETag %s cannot name a file there", s.URL(key), strconv.Quote(fi.etag))
			return
		}
		blobs := filepath.Join(w.dir, "blobs")
		if _, err := os.Stat(filepath.Join(blobs, fi.etag)); err == nil {
			// The blob is there (another file, another process): link it.
			w.done[key] = true
			w.mu.Unlock()
			w.publish(s, key, fi.etag)
			return
		}
		var f *os.File
		err := os.MkdirAll(blobs, 0o755)
		if err == nil {
			f, err = os.CreateTemp(blobs, fi.etag+".tensorfs-*.part")
		}
		if err != nil {
			w.done[key] = true
			w.mu.Unlock()
			w.logf("tensorfs: %s: not put into the HF cache: %v", s.URL(key), err)
			return
		}
		p = &partial{f: f, size: fi.size, etag: fi.etag, sha256: fi.sha256}
		w.parts[key] = p
	}
	w.mu.Unlock()

	at := off
	var werr error
	for _, b := range bufs {
		if _, err := p.f.WriteAt(b, at); err != nil && werr == nil {
			werr = err
		}
		at += int64(len(b))
	}

	w.mu.Lock()
	if p.failed || w.parts[key] != p {
		w.mu.Unlock()
		return
	}
	if werr != nil {
		p.failed = true
		w.done[key] = true
		delete(w.parts, key)
		w.mu.Unlock()
		w.logf("tensorfs: %s: not put into the HF cache: writing %s: %v", s.URL(key), p.f.Name(), werr)
		p.f.Close()
		os.Remove(p.f.Name())
		return
	}
	var n int64
	p.have, n = addSpan(p.have, off, at)
	complete := n >= p.size
	if complete {
		delete(w.parts, key)
		w.done[key] = true
	}
	w.mu.Unlock()
	if complete {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.finish(s, key, p)
		}()
	}
}

// finish checks a file read whole and puts it into the cache.
func (w *cacheWriter) finish(s *Store, key string, p *partial) {
	name := p.f.Name()
	fail := func(format string, args ...any) {
		p.f.Close()
		os.Remove(name)
		w.logf("tensorfs: %s: not put into the HF cache: "+format, append([]any{s.URL(key)}, args...)...)
	}
	var h hash.Hash
	want := p.sha256
	if want != "" {
		h = sha256.New()
	} else {
		// A file in git: its ETag is the git blob's sha1.
		h = sha1.New()
		fmt.Fprintf(h, "blob %d\x00", p.size)
		want = p.etag
	}
	if _, err := io.Copy(h, io.NewSectionReader(p.f, 0, p.size)); err != nil {
		fail("reading %s back: %v", name, err)
		return
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		fail("the bytes read hash to %s, the Hub says %s", got, want)
		return
	}
	if err := p.f.Sync(); err != nil {
		fail("%v", err)
		return
	}
	p.f.Close()
	if err := os.Chmod(name, 0o644); err != nil {
		fail("%v", err)
		return
	}
	if err := os.Rename(name, filepath.Join(w.dir, "blobs", p.etag)); err != nil {
		fail("%v", err)
		return
	}
	w.publish(s, key, p.etag)
}

// publish links snapshots/SHA/KEY to blobs/ETAG and writes refs/REV.
func (w *cacheWriter) publish(s *Store, key, etag string) {
	sha := s.Revision()
	snap := filepath.Join(w.dir, "snapshots", sha, filepath.FromSlash(key))
	target := strings.Repeat("../", strings.Count(key, "/")+2) + "blobs/" + etag
	if err := os.MkdirAll(filepath.Dir(snap), 0o755); err != nil {
		w.logf("tensorfs: %s: not linked in the HF cache: %v", s.URL(key), err)
		return
	}
	if cur, rerr := os.Readlink(snap); rerr != nil || cur != target {
		tmp := snap + ".tensorfs-link"
		os.Remove(tmp)
		err := os.Symlink(target, tmp)
		if err == nil {
			err = os.Rename(tmp, snap)
		}
		if err != nil {
			os.Remove(tmp)
			w.logf("tensorfs: %s: not linked in the HF cache: %v", s.URL(key), err)
			return
		}
	}
	w.mu.Lock()
	refs := !w.refs && !isSHA(s.rev)
	w.refs = true
	w.mu.Unlock()
	if refs {
		ref := filepath.Join(w.dir, "refs", filepath.FromSlash(path.Clean(s.rev)))
		if !safeKey(s.rev) {
			return
		}
		if err := os.MkdirAll(filepath.Dir(ref), 0o755); err == nil {
			tmp := ref + ".tensorfs-ref"
			if err = os.WriteFile(tmp, []byte(sha), 0o644); err == nil {
				err = os.Rename(tmp, ref)
			}
			if err != nil {
				os.Remove(tmp)
				w.logf("tensorfs: %s: refs/%s not written in the HF cache: %v", s.URL(""), s.rev, err)
			}
		}
	}
}

// close waits for the checks under way and removes the files read in
// part.
func (w *cacheWriter) close() {
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, p := range w.parts {
		p.f.Close()
		os.Remove(p.f.Name())
		delete(w.parts, k)
	}
}
