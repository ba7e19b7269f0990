package hf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lazyweights/tensorfs/backing/remote"
)

// Options configure Open. Zero fields are read from the environment as
// huggingface_hub reads it.
type Options struct {
	// Endpoint is the Hub's base URL (default $HF_ENDPOINT, else
	// https://huggingface.co).
	Endpoint string
	// Token is sent to the endpoint's host (default HF_TOKEN, the file
	// HF_TOKEN_PATH, $HF_HOME/token). NoToken sends none.
	Token   string
	NoToken bool
	// HubCache is the HF cache (default: of HubCachesFromEnv, $LLAMA_CACHE
	// then $HF_HUB_CACHE or $HF_HOME/hub, the first that holds the
	// repository, else the first).
	HubCache string
	// Offline reads the cache only (default $HF_HUB_OFFLINE).
	Offline bool
	// CacheWrite puts each file read whole from the Hub into HubCache
	// (--hf-cache-write; cachewrite.go). Without it the store never
	// writes there.
	CacheWrite bool
	// Proxy, Logf and Conns are as backing/s3's: the cache tier every
	// request goes through, its failure's log line, the connection pool.
	Proxy *url.URL
	Logf  func(format string, args ...any)
	Conns int
	// ProxyTerminatesTLS sends the https:// byte GETs (the CDN's) to
	// Proxy in absolute form, for a tier that terminates TLS and caches
	// them (remote.TerminatingTierTransport), instead of through CONNECT.
	ProxyTerminatesTLS bool
}

// Store is one repository at one revision.
type Store struct {
	ep       *url.URL // scheme and host of the endpoint (and a path prefix, if any)
	kind     string   // "models" or "datasets"
	id       string   // ORG/NAME
	rev      string   // as given
	token    string
	offline  bool
	cacheDir string // HubCache/models--ORG--NAME
	// api sends the Hub's API requests, resolve's HEADs and every
	// request that carries the token, directly: small, of a revision
	// that may move, or holding the token. data sends the GETs of bytes
	// without a credential (the CDN's; resolve-cache's when there is no
	// token), through the cache tier when there is one: their paths
	// name content.
	api, data *http.Client

	logf func(format string, args ...any)

	mu       sync.Mutex
	sha      string              // GUARDED_BY(mu): "" until resolved
	cacheWhy string              // GUARDED_BY(mu): why the listing is the HF cache's ("" when the Hub's)
	files    map[string]fileInfo // GUARDED_BY(mu): path -> file, once listed
	locs     map[string]location // GUARDED_BY(mu): path -> where its bytes are
	cdnETag  map[string]string   // GUARDED_BY(mu): path -> the CDN's ETag, pinned
	local    map[string]*os.File // GUARDED_BY(mu): path -> its file in the HF cache

	cw *cacheWriter // nil unless Options.CacheWrite
}

// fileInfo is one file of the listing.
type fileInfo struct {
	size   int64
	etag   string // the LFS sha256, else the git oid (as the cache names blobs)
	sha256 string // the LFS sha256, "" for a file in git
}

// location is where a file's bytes are read: the CDN (no token) or the
// endpoint (the token).
type location struct {
	url     string
	hub     bool      // the endpoint's host: send the token
	xet     bool      // the Xet bridge (resolve gave X-Xet-Hash)
	expires time.Time // zero: no expiry known
}

// who names where loc's bytes come from, in a message.
func (loc location) who() string {
	switch {
	case loc.hub:
		return "the Hub"
	case loc.xet:
		return "the Xet bridge"
	}
	return "the CDN"
}

var _ remote.Store = (*Store)(nil)

// Open parses source (hf://[models/|datasets/]ORG/NAME[@REV][/PATH]) and
// returns its store and the key PATH names ("" for the whole
// repository). It makes no request: the revision is resolved by the
// first read or listing.
func Open(ctx context.Context, source string, opts Options) (*Store, string, error) {
	kind, id, rev, key, err := Parse(source)
	if err != nil {
		return nil, "", err
	}
	ep := opts.Endpoint
	if ep == "" {
		ep = EndpointFromEnv()
	}
	u, err := url.Parse(strings.TrimRight(ep, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		return nil, "", fmt.Errorf("%s: HF_ENDPOINT %s is not an http(s) URL", source, remote.RedactURL(ep))
	}
	u.User = nil
	s := &Store{ep: u, kind: kind, id: id, rev: rev, offline: opts.Offline || offlineEnv(), locs: map[string]location{}, cdnETag: map[string]string{}, local: map[string]*os.File{}}
	if !opts.NoToken {
		s.token = opts.Token
		if s.token == "" {
			s.token = TokenFromEnv()
		}
	}
	if opts.HubCache != "" {
		s.cacheDir = filepath.Join(opts.HubCache, RepoFolderName(kind, id))
	} else {
		s.cacheDir = repoCache(HubCachesFromEnv(), kind, id)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	conns := max(opts.Conns, 64)
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = conns, conns
	tr.ResponseHeaderTimeout = 30 * time.Second
	tr.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	tr.DisableCompression = true
	logf := opts.Logf
	if logf == nil {
		logf = log.Printf
	}
	s.logf = logf
	// Redirects are followed by the store itself, which decides where
	// the token may go.
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	s.api = &http.Client{Transport: tr, CheckRedirect: noRedirect}
	data := remote.ProxyTransport(opts.Proxy, tr, noRedirect, logf)
	if opts.Proxy != nil && opts.ProxyTerminatesTLS {
		data = remote.TerminatingTierTransport(opts.Proxy, tr, noRedirect, logf)
	}
	s.data = &http.Client{Transport: data, CheckRedirect: noRedirect}
	if opts.CacheWrite && s.cacheDir != "" && !s.offline {
		s.cw = &cacheWriter{dir: s.cacheDir, logf: logf, parts: map[string]*partial{}, done: map[string]bool{}}
	}
	return s, key, nil
}

// Revision is the commit sha the store reads at, "" until resolved.
func (s *Store) Revision() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sha
}

// URL names key: hf://[datasets/]ORG/NAME@SHA/KEY (the revision as given
// until it is resolved). It never holds the token or a CDN URL.
func (s *Store) URL(key string) string {
	p := "hf://"
	if s.kind == "datasets" {
		p += "datasets/"
	}
	rev := s.Revision()
	if rev == "" {
		rev = s.rev
	}
	p += s.id + "@" + rev
	if key != "" {
		p += "/" + key
	}
	return p
}

// Origin is the endpoint and the repository: the disk cache keys a file
// by it and the file's identity (its sha256 or git oid), which a
// revision cannot change.
func (s *Store) Origin() string { return s.ep.String() + "\x00" + s.kind + "/" + s.id }

// apiURL is the URL of an API path under the endpoint.
func (s *Store) apiURL(p string) string { return s.ep.String() + p }

// resolveURL is the resolve URL of key at the pinned sha (hf_hub_url).
func (s *Store) resolveURL(sha, key string) string {
	p := "/" + s.id
	if s.kind == "datasets" {
		p = "/datasets" + p
	}
	return s.apiURL(p + "/resolve/" + quote(sha, "") + "/" + quote(key, "/"))
}

// isHub reports whether u is on the endpoint's scheme, host and port:
// the only place the token is sent.
func (s *Store) isHub(u *url.URL) bool {
	return sameOrigin(u, s.ep)
}

// request makes a request to u, with the token when u is the endpoint's.
func (s *Store) request(ctx context.Context, method, u string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, &remote.Error{URL: s.URL(""), Kind: remote.Invalid, Msg: "bad request URL"}
	}
	if s.token != "" && s.isHub(req.URL) {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	req.Header.Set("Accept-Encoding", "identity")
	req.Header.Set("User-Agent", "tensorfs")
	return req, nil
}

// do sends req through c; a transport error is a *remote.Error naming
// key's URL (never the request's, whose query may be a signature).
func (s *Store) do(c *http.Client, req *http.Request, key string) (*http.Response, error) {
	resp, err := c.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, &remote.Error{URL: s.URL(key), Kind: remote.ConnKind(err), Msg: err.Error(), Err: err}
	}
	return resp, nil
}

// info returns the listed file at key, or a NotFound error.
func (s *Store) info(key string) (fileInfo, string, error) {
	s.mu.Lock()
	fi, ok := s.files[key]
	sha := s.sha
	s.mu.Unlock()
	if !ok {
		if why := s.cacheOnly(); why != "" {
			return fileInfo{}, sha, &remote.Error{URL: s.URL(key), Kind: remote.NotFound, Msg: fmt.Sprintf("%s and the file is not in the HF cache (%s)", why, s.snapshotPath(sha, key))}
		}
		return fileInfo{}, sha, &remote.Error{URL: s.URL(key), Kind: remote.NotFound, Code: "EntryNotFound", Msg: fmt.Sprintf("not found in the repository at revision %s", sha)}
	}
	return fi, sha, nil
}

// Open reads the start of key: from the HF cache when it is there,
// else through resolve and its redirect.
func (s *Store) Open(ctx context.Context, key string, head []byte) (remote.Object, int, error) {
	if err := s.ensure(ctx); err != nil {
		return remote.Object{}, 0, err
	}
	fi, sha, err := s.info(key)
	if err != nil {
		return remote.Object{}, 0, err
	}
	obj := remote.Object{Key: key, Size: fi.size, ETag: fi.etag}
	s.mu.Lock()
	lf := s.local[key]
	s.mu.Unlock()
	if lf == nil {
		if lf = s.openLocal(key, sha, fi); lf != nil {
			s.mu.Lock()
			if old := s.local[key]; old != nil {
				lf.Close()
				lf = old
			} else {
				s.local[key] = lf
			}
			s.mu.Unlock()
		}
	}
	if lf != nil {
		n, err := lf.ReadAt(head[:min(int64(len(head)), fi.size)], 0)
		if err != nil && err != io.EOF {
			return remote.Object{}, 0, &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Msg: "reading the HF cache: " + err.Error()}
		}
		return obj, n, nil
	}
	if why := s.cacheOnly(); why != "" {
		return remote.Object{}, 0, &remote.Error{URL: s.URL(key), Kind: remote.NotFound, Msg: fmt.Sprintf("%s and the file is not in the HF cache (%s)", why, s.snapshotPath(sha, key))}
	}
	n := min(int64(len(head)), fi.size)
	if n == 0 {
		return obj, 0, nil
	}
	if err := s.Get(ctx, obj, 0, [][]byte{head[:n]}, nil); err != nil {
		return remote.Object{}, 0, err
	}
	return obj, int(n), nil
}

// cacheOnly says why the store reads the HF cache alone
// (HF_HUB_OFFLINE, or a Hub that could not be reached when the listing
// was made); "" when it reads the Hub.
func (s *Store) cacheOnly() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cacheWhy
}

// SHA256 is the sha256 the Hub gives for key (an LFS file's oid), for a
// whole-file check; ok is false for a file in git.
func (s *Store) SHA256(key string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fi, ok := s.files[key]
	return fi.sha256, ok && fi.sha256 != ""
}

// List returns the files directly under prefix, from the listing.
func (s *Store) List(ctx context.Context, prefix string) ([]remote.Entry, bool, error) {
	if err := s.ensure(ctx); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []remote.Entry
	any := false
	for p, fi := range s.files {
		rel, ok := strings.CutPrefix(p, prefix)
		if !ok {
			continue
		}
		any = true
		if !strings.Contains(rel, "/") {
			out = append(out, remote.Entry{Name: rel, Size: fi.size})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, any, nil
}

// Close closes the files opened in the HF cache (after the files read
// whole are put there, with CacheWrite).
func (s *Store) Close() error {
	if s.cw != nil {
		s.cw.close()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, f := range s.local {
		f.Close()
		delete(s.local, k)
	}
	return nil
}
