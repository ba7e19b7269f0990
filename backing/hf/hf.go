package hf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
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
	// HubCache is the HF cache (default $HF_HUB_CACHE, $HF_HOME/hub).
	HubCache string
	// Offline reads the cache only (default $HF_HUB_OFFLINE).
	Offline bool
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
	// api sends the Hub's API requests and resolve's HEADs, directly:
	// small, of a revision that may move, and holding the token. data
	// sends the GETs of bytes (the CDN's, resolve-cache's), through
	// the cache tier when there is one: their paths name content.
	api, data *http.Client

	mu      sync.Mutex
	sha     string              // GUARDED_BY(mu): "" until resolved
	files   map[string]fileInfo // GUARDED_BY(mu): path -> file, once listed
	locs    map[string]location // GUARDED_BY(mu): path -> where its bytes are
	cdnETag map[string]string   // GUARDED_BY(mu): path -> the CDN's ETag, pinned
	local   map[string]*os.File // GUARDED_BY(mu): path -> its file in the HF cache
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
	expires time.Time // zero: no expiry known
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
		ep = os.Getenv("HF_ENDPOINT")
	}
	if ep == "" {
		ep = "https://huggingface.co"
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
	cache := opts.HubCache
	if cache == "" {
		cache = HubCacheFromEnv()
	}
	if cache != "" {
		s.cacheDir = filepath.Join(cache, RepoFolderName(kind, id))
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
	// Redirects are followed by the store itself, which decides where
	// the token may go.
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	s.api = &http.Client{Transport: tr, CheckRedirect: noRedirect}
	data := remote.ProxyTransport(opts.Proxy, tr, noRedirect, logf)
	if opts.Proxy != nil && opts.ProxyTerminatesTLS {
		data = remote.TerminatingTierTransport(opts.Proxy, tr, noRedirect, logf)
	}
	s.data = &http.Client{Transport: data, CheckRedirect: noRedirect}
	return s, key, nil
}

// Parse splits an hf:// SOURCE: kind "models" or "datasets", the
// repository id ORG/NAME, the revision ("main" when none is given) and
// the path in the repository. REV may be a branch, a tag, a sha,
// refs/pr/N or refs/convert/NAME, and may be percent-encoded
// (@refs%2Fpr%2F1).
func Parse(source string) (kind, id, rev, key string, err error) {
	bad := func(why string) error {
		return fmt.Errorf("%s: %s (want hf://[models/|datasets/]ORG/NAME[@REV][/PATH])", source, why)
	}
	rest, ok := cutPrefixFold(source, "hf://")
	if !ok {
		return "", "", "", "", bad("not an hf:// URL")
	}
	kind = "models"
	if r, ok := strings.CutPrefix(rest, "models/"); ok {
		rest = r
	} else if r, ok := strings.CutPrefix(rest, "datasets/"); ok {
		kind, rest = "datasets", r
	} else if strings.HasPrefix(rest, "spaces/") {
		return "", "", "", "", bad("Spaces are not read")
	}
	org, rest, _ := strings.Cut(rest, "/")
	i := strings.IndexAny(rest, "@/")
	name := rest
	if i >= 0 {
		name, rest = rest[:i], rest[i:]
	} else {
		rest = ""
	}
	if org == "" || name == "" {
		return "", "", "", "", bad("no ORG/NAME")
	}
	for _, c := range []string{org, name} {
		if c == "." || c == ".." || strings.ContainsAny(c, "%?#\\ ") {
			return "", "", "", "", bad(strconv.Quote(c) + " is not a repository name")
		}
	}
	rev = "main"
	if r, ok := strings.CutPrefix(rest, "@"); ok {
		// refs/pr/N and refs/convert/X hold '/': take them whole.
		n := 1
		if strings.HasPrefix(r, "refs/pr/") || strings.HasPrefix(r, "refs/convert/") {
			n = 3
		}
		parts := strings.SplitN(r, "/", n+1)
		if len(parts) < n || parts[n-1] == "" {
			return "", "", "", "", bad("revision " + strconv.Quote(r) + " is cut short")
		}
		rev = strings.Join(parts[:n], "/")
		rest = strings.TrimPrefix(r, rev)
		if rev, err = url.PathUnescape(rev); err != nil || rev == "" {
			return "", "", "", "", bad("an empty or malformed revision")
		}
	}
	if rest != "" && rest[0] != '/' {
		return "", "", "", "", bad("malformed")
	}
	key = strings.TrimPrefix(rest, "/")
	if key != "" {
		trail := strings.HasSuffix(key, "/")
		key = strings.Trim(path.Clean("/"+key), "/")
		if trail && key != "" {
			key += "/"
		}
	}
	return kind, org + "/" + name, rev, key, nil
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}

// hfHome is $HF_HOME, else $XDG_CACHE_HOME/huggingface, else
// ~/.cache/huggingface.
func hfHome() string {
	if h := os.Getenv("HF_HOME"); h != "" {
		return h
	}
	if x := os.Getenv("XDG_CACHE_HOME"); x != "" {
		return filepath.Join(x, "huggingface")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".cache", "huggingface")
	}
	return ""
}

// TokenFromEnv is the token huggingface_hub would use: HF_TOKEN (or the
// older HUGGING_FACE_HUB_TOKEN), else the file HF_TOKEN_PATH, else
// $HF_HOME/token; "" when none.
func TokenFromEnv() string {
	for _, v := range []string{"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"} {
		if t := strings.TrimSpace(os.Getenv(v)); t != "" {
			return t
		}
	}
	p := os.Getenv("HF_TOKEN_PATH")
	if p == "" {
		if h := hfHome(); h != "" {
			p = filepath.Join(h, "token")
		}
	}
	if p == "" {
		return ""
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// HubCacheFromEnv is the HF cache: HF_HUB_CACHE (or the older
// HUGGINGFACE_HUB_CACHE), else $HF_HOME/hub.
func HubCacheFromEnv() string {
	for _, v := range []string{"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"} {
		if c := os.Getenv(v); c != "" {
			return c
		}
	}
	if h := hfHome(); h != "" {
		return filepath.Join(h, "hub")
	}
	return ""
}

func offlineEnv() bool {
	switch strings.ToUpper(strings.TrimSpace(os.Getenv("HF_HUB_OFFLINE"))) {
	case "1", "ON", "YES", "TRUE":
		return true
	}
	return false
}

// RepoFolderName is the repository's folder in the HF cache:
// models--ORG--NAME, datasets--ORG--NAME.
func RepoFolderName(kind, id string) string {
	return kind + "--" + strings.ReplaceAll(id, "/", "--")
}

// quote escapes s as Python's urllib.parse.quote does, keeping the
// bytes of safe: hf_hub_url quotes a path with safe "/" and a revision
// with safe "".
func quote(s, safe string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("_.-~", c) >= 0 || strings.IndexByte(safe, c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
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
	return strings.EqualFold(u.Scheme, s.ep.Scheme) && strings.EqualFold(u.Host, s.ep.Host)
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
		kind := remote.Invalid
		if remote.NetworkError(err) {
			kind = remote.Transient
		}
		return nil, &remote.Error{URL: s.URL(key), Kind: kind, Msg: err.Error(), Err: err}
	}
	return resp, nil
}

// hubError is the one-line error of a failed Hub reply, from its
// X-Error-Code as hf_raise_for_status reads it.
func (s *Store) hubError(key string, resp *http.Response) error {
	code := resp.Header.Get("X-Error-Code")
	st := resp.StatusCode
	e := &remote.Error{URL: s.URL(key), Kind: remote.StatusKind(st), Status: st, Code: code}
	repo := s.kind + " repository " + s.id
	if s.kind == "models" {
		repo = "repository " + s.id
	}
	switch {
	case code == "GatedRepo":
		e.Kind = remote.Denied
		if s.token == "" {
			e.Msg = repo + " is gated: set HF_TOKEN to a token of an account that has been granted access (ask for it on the repository's page)"
		} else {
			e.Msg = repo + " is gated and HF_TOKEN's account has not been granted access (ask for it on the repository's page)"
		}
	case code == "RepoNotFound" || (st == 401 && code == ""):
		e.Kind = remote.NotFound
		if s.token == "" {
			e.Msg = repo + " not found, or private: set HF_TOKEN to a token that can read it"
		} else {
			e.Msg = repo + " not found, or HF_TOKEN cannot read it"
		}
	case code == "RevisionNotFound":
		e.Kind = remote.NotFound
		e.Msg = fmt.Sprintf("revision %s not found in %s", strconv.Quote(s.rev), repo)
	case code == "EntryNotFound":
		e.Kind = remote.NotFound
		e.Msg = fmt.Sprintf("%s not found at revision %s", strconv.Quote(key), s.Revision())
	case st == 403:
		e.Msg = "access denied: HF_TOKEN lacks the permission"
		if s.token == "" {
			e.Msg = "access denied: set HF_TOKEN"
		}
	case st == 429:
		e.Msg = "rate limited by the Hub (429 Too Many Requests)"
	default:
		e.Msg = http.StatusText(st)
	}
	return e
}

// ensure resolves the revision to a sha and lists the tree at it, once.
func (s *Store) ensure(ctx context.Context) error {
	s.mu.Lock()
	done := s.files != nil
	s.mu.Unlock()
	if done {
		return nil
	}
	var sha string
	var files map[string]fileInfo
	var err error
	if s.offline {
		sha, files, err = s.fromCache()
	} else {
		if sha, err = s.resolveRevision(ctx); err == nil {
			files, err = s.listTree(ctx, sha)
		}
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.files == nil {
		s.sha, s.files = sha, files
	}
	s.mu.Unlock()
	return nil
}

func isSHA(rev string) bool {
	if len(rev) != 40 {
		return false
	}
	for _, c := range rev {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// resolveRevision asks the Hub for the commit sha of the revision.
func (s *Store) resolveRevision(ctx context.Context) (string, error) {
	req, err := s.request(ctx, http.MethodGet, s.apiURL("/api/"+s.kind+"/"+s.id+"/revision/"+quote(s.rev, "")), nil)
	if err != nil {
		return "", err
	}
	resp, err := s.do(s.api, req, "")
	if err != nil {
		return "", err
	}
	defer drain(resp)
	if resp.StatusCode != http.StatusOK {
		return "", s.hubError("", resp)
	}
	var info struct {
		SHA string `json:"sha"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&info); err != nil {
		return "", &remote.Error{URL: s.URL(""), Kind: remote.Transient, Msg: "reading the repository's info: " + err.Error()}
	}
	if !isSHA(info.SHA) {
		return "", &remote.Error{URL: s.URL(""), Kind: remote.Invalid, Msg: fmt.Sprintf("the Hub gave %s as the revision's commit sha", strconv.Quote(info.SHA))}
	}
	return info.SHA, nil
}

// maxTreeEntries bounds a listing.
const maxTreeEntries = 1 << 20

// listTree lists the whole tree at sha (recursive, every page).
func (s *Store) listTree(ctx context.Context, sha string) (map[string]fileInfo, error) {
	files := map[string]fileInfo{}
	next := s.apiURL("/api/" + s.kind + "/" + s.id + "/tree/" + quote(sha, "") + "?recursive=true")
	for n := 0; next != ""; n++ {
		req, err := s.request(ctx, http.MethodGet, next, nil)
		if err != nil {
			return nil, err
		}
		resp, err := s.do(s.api, req, "")
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			err := s.hubError("", resp)
			drain(resp)
			return nil, err
		}
		var page []struct {
			Type string `json:"type"`
			OID  string `json:"oid"`
			Size int64  `json:"size"`
			Path string `json:"path"`
			LFS  *struct {
				OID  string `json:"oid"`
				Size int64  `json:"size"`
			} `json:"lfs"`
		}
		err = json.NewDecoder(io.LimitReader(resp.Body, 256<<20)).Decode(&page)
		drain(resp)
		if err != nil {
			return nil, &remote.Error{URL: s.URL(""), Kind: remote.Transient, Msg: "reading the tree: " + err.Error()}
		}
		for _, e := range page {
			if e.Type != "file" {
				continue
			}
			fi := fileInfo{size: e.Size, etag: e.OID}
			if e.LFS != nil {
				fi = fileInfo{size: e.LFS.Size, etag: e.LFS.OID, sha256: e.LFS.OID}
			}
			files[e.Path] = fi
		}
		if len(files) > maxTreeEntries {
			return nil, &remote.Error{URL: s.URL(""), Kind: remote.Invalid, Msg: fmt.Sprintf("more than %d files", maxTreeEntries)}
		}
		next = nextLink(resp.Header.Values("Link"))
		if next != "" {
			u, err := url.Parse(next)
			if err != nil || !s.isHub(u) {
				return nil, &remote.Error{URL: s.URL(""), Kind: remote.Invalid, Msg: "the tree's next page is not on the endpoint"}
			}
		}
	}
	return files, nil
}

// nextLink is the URL of rel="next" in Link headers (RFC 8288), as
// requests' Response.links reads them.
func nextLink(links []string) string {
	for _, h := range links {
		for _, l := range strings.Split(h, ",") {
			l = strings.TrimSpace(l)
			u, params, ok := strings.Cut(l, ";")
			if !ok || !strings.HasPrefix(u, "<") || !strings.HasSuffix(strings.TrimSpace(u), ">") {
				continue
			}
			for _, p := range strings.Split(params, ";") {
				k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
				if strings.EqualFold(k, "rel") && strings.Trim(v, `"`) == "next" {
					return strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(u), "<"), ">")
				}
			}
		}
	}
	return ""
}

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

// info returns the listed file at key, or a NotFound error.
func (s *Store) info(key string) (fileInfo, string, error) {
	s.mu.Lock()
	fi, ok := s.files[key]
	sha := s.sha
	s.mu.Unlock()
	if !ok {
		return fileInfo{}, sha, &remote.Error{URL: s.URL(key), Kind: remote.NotFound, Code: "EntryNotFound", Msg: fmt.Sprintf("not found in the repository at revision %s", sha)}
	}
	return fi, sha, nil
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
	if s.offline {
		return remote.Object{}, 0, &remote.Error{URL: s.URL(key), Kind: remote.NotFound, Msg: fmt.Sprintf("HF_HUB_OFFLINE is set and the file is not in the HF cache (%s)", filepath.Join(s.cacheDir, "snapshots", sha, key))}
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

// SHA256 is the sha256 the Hub gives for key (an LFS file's oid), for a
// whole-file check; ok is false for a file in git.
func (s *Store) SHA256(key string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fi, ok := s.files[key]
	return fi.sha256, ok && fi.sha256 != ""
}

// locate asks resolve where key's bytes are (without following its
// redirect), checking that the Hub names the file pinned: the sha, its
// identity and size.
func (s *Store) locate(ctx context.Context, obj remote.Object) (location, error) {
	key := obj.Key
	sha := s.Revision()
	req, err := s.request(ctx, http.MethodHead, s.resolveURL(sha, key), nil)
	if err != nil {
		return location{}, err
	}
	resp, err := s.do(s.api, req, key)
	if err != nil {
		return location{}, err
	}
	defer drain(resp)
	changed := func(format string, args ...any) error {
		return &remote.Error{URL: s.URL(key), Kind: remote.Changed, Msg: fmt.Sprintf(format, args...)}
	}
	if c := resp.Header.Get("X-Repo-Commit"); c != "" && c != sha {
		return location{}, changed("the Hub answered for commit %s, not %s", c, sha)
	}
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
	case http.StatusOK:
		// The bytes are at resolve itself.
		return location{url: s.resolveURL(sha, key), hub: true}, nil
	default:
		return location{}, s.hubError(key, resp)
	}
	etag := normalizeETag(resp.Header.Get("X-Linked-Etag"))
	if etag == "" {
		etag = normalizeETag(resp.Header.Get("ETag"))
	}
	if etag != "" && obj.ETag != "" && etag != obj.ETag {
		return location{}, changed("the Hub gives ETag %s, was %s", etag, obj.ETag)
	}
	if ls := resp.Header.Get("X-Linked-Size"); ls != "" {
		if n, err := strconv.ParseInt(ls, 10, 64); err == nil && n != obj.Size {
			return location{}, changed("the Hub gives %d bytes, was %d", n, obj.Size)
		}
	}
	u, err := req.URL.Parse(resp.Header.Get("Location"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return location{}, &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Status: resp.StatusCode, Msg: "the Hub redirected to a malformed URL"}
	}
	return location{url: u.String(), hub: s.isHub(u), expires: expiry(u)}, nil
}

// normalizeETag strips W/ and quotes (file_download.py's _normalize_etag).
func normalizeETag(e string) string {
	return strings.Trim(strings.TrimPrefix(e, "W/"), `"`)
}

// expiry is when a presigned URL stops working: CloudFront's Expires, or
// S3's X-Amz-Date plus X-Amz-Expires; zero when neither.
func expiry(u *url.URL) time.Time {
	q := u.Query()
	if e, err := strconv.ParseInt(q.Get("Expires"), 10, 64); err == nil {
		return time.Unix(e, 0)
	}
	if d, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date")); err == nil {
		if n, err := strconv.ParseInt(q.Get("X-Amz-Expires"), 10, 64); err == nil {
			return d.Add(time.Duration(n) * time.Second)
		}
	}
	return time.Time{}
}

// expirySlack is how long before its expiry a CDN URL is re-obtained.
const expirySlack = 30 * time.Second

// where returns key's location, re-obtained when there is none, it is
// about to expire, or stale says the last one was refused.
func (s *Store) where(ctx context.Context, obj remote.Object, stale string) (location, error) {
	s.mu.Lock()
	loc, ok := s.locs[obj.Key]
	s.mu.Unlock()
	if ok && loc.url != stale && (loc.expires.IsZero() || time.Until(loc.expires) > expirySlack) {
		return loc, nil
	}
	loc, err := s.locate(ctx, obj)
	if err != nil {
		return location{}, err
	}
	s.mu.Lock()
	s.locs[obj.Key] = loc
	s.mu.Unlock()
	return loc, nil
}

// Get fills bufs with obj's bytes from off on: from the HF cache, or
// with one ranged GET of its location (re-obtained once when the CDN
// refuses it: an expired signature).
func (s *Store) Get(ctx context.Context, obj remote.Object, off int64, bufs [][]byte, filled func(i int)) error {
	want := remote.BufsLen(bufs)
	if want == 0 {
		return nil
	}
	s.mu.Lock()
	lf := s.local[obj.Key]
	s.mu.Unlock()
	if lf != nil {
		if err := remote.ReadBufs(io.NewSectionReader(lf, off, want), bufs, filled); err != nil {
			return &remote.Error{URL: s.URL(obj.Key), Kind: remote.Invalid, Msg: "reading the HF cache: " + err.Error()}
		}
		return nil
	}
	stale := ""
	for try := 0; ; try++ {
		loc, err := s.where(ctx, obj, stale)
		if err != nil {
			return err
		}
		err = s.getAt(ctx, loc, obj, off, bufs, filled)
		var re *remote.Error
		if try == 0 && !loc.hub && errors.As(err, &re) && re.Status == http.StatusForbidden {
			stale = loc.url // expired, or revoked: ask resolve again
			continue
		}
		return err
	}
}

// getAt is one ranged GET of loc.
func (s *Store) getAt(ctx context.Context, loc location, obj remote.Object, off int64, bufs [][]byte, filled func(i int)) error {
	want := remote.BufsLen(bufs)
	key := obj.Key
	req, err := s.request(ctx, http.MethodGet, loc.url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+want-1))
	resp, err := s.do(s.data, req, key)
	if err != nil {
		return err
	}
	defer drain(resp)
	changed := func(format string, args ...any) error {
		return &remote.Error{URL: s.URL(key), Kind: remote.Changed, Msg: fmt.Sprintf(format, args...)}
	}
	switch resp.StatusCode {
	case http.StatusPartialContent:
	case http.StatusOK:
		if off == 0 && want == obj.Size && resp.ContentLength == want {
			break // the whole file
		}
		return &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Status: 200, Msg: "the server ignored the Range request"}
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Status: resp.StatusCode, Msg: "redirected again"}
	default:
		if loc.hub {
			return s.hubError(key, resp)
		}
		st := resp.StatusCode
		msg := "the CDN answered " + http.StatusText(st)
		return &remote.Error{URL: s.URL(key), Kind: remote.StatusKind(st), Status: st, Msg: msg}
	}
	if c := resp.Header.Get("X-Repo-Commit"); loc.hub && c != "" && c != s.Revision() {
		return changed("the Hub answered for commit %s, not %s", c, s.Revision())
	}
	e := resp.Header.Get("ETag")
	if loc.hub {
		if e != "" && normalizeETag(e) != obj.ETag {
			return changed("ETag %s, was %s", normalizeETag(e), obj.ETag)
		}
	} else {
		s.mu.Lock()
		pinned, ok := s.cdnETag[key]
		if !ok {
			s.cdnETag[key] = e
		}
		s.mu.Unlock()
		if ok && e != pinned {
			return changed("the CDN gives ETag %s, was %s", e, pinned)
		}
	}
	if resp.StatusCode == http.StatusPartialContent {
		if err := remote.CheckContentRange(s.URL(key), resp.Header.Get("Content-Range"), off, want, obj.Size); err != nil {
			return err
		}
	}
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Msg: fmt.Sprintf("the server sent the bytes encoded (Content-Encoding %s)", strconv.Quote(ce))}
	}
	if resp.ContentLength >= 0 && resp.ContentLength != want {
		return &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Msg: fmt.Sprintf("asked for %d bytes at %d, the server sent %d", want, off, resp.ContentLength)}
	}
	if err := remote.ReadBufs(resp.Body, bufs, filled); err != nil {
		return &remote.Error{URL: s.URL(key), Kind: remote.Transient, Msg: "reading the response: " + err.Error(), Err: err}
	}
	return nil
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

// Close closes the files opened in the HF cache.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, f := range s.local {
		f.Close()
		delete(s.local, k)
	}
	return nil
}

func drain(resp *http.Response) {
	io.CopyN(io.Discard, resp.Body, 64<<10)
	resp.Body.Close()
}
