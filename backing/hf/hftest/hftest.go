// Package hftest is a loopback Hugging Face Hub for tests: the parts of
// the Hub's HTTP API that huggingface_hub's hf_api.py and
// file_download.py use to read a repository, written from them.
//
//   - GET /api/{models,datasets}/ORG/NAME/revision/REV: the repository's
//     info at a revision (id, sha, private, gated, siblings).
//   - GET /api/{models,datasets}/ORG/NAME/tree/REV[/PATH][?recursive=true]:
//     the tree, PageSize entries a page, the next page in a
//     `Link: <URL>; rel="next"` header (utils/_pagination.py).
//   - POST /api/{models,datasets}/ORG/NAME/paths-info/REV: a form of
//     paths=...; the entries of those paths.
//   - GET, HEAD /[datasets/]ORG/NAME/resolve/REV/PATH: a file in Git LFS
//     (File.LFS) is a 302 to the CDN listener, with X-Repo-Commit,
//     X-Linked-Etag (the LFS sha256), X-Linked-Size and the pointer's
//     git oid as ETag; a file in git is a relative 307 to
//     /api/resolve-cache/{models,datasets}/ORG/NAME/SHA/PATH, which
//     serves it (ETag: its git oid) with Range.
//   - The CDN (a separate listener, as cdn-lfs.huggingface.co is)
//     serves /blobs/SHA256?Expires=..&Signature=..: it checks the
//     signature and the expiry (403 AccessDenied "Request has expired"
//     past it), refuses any request carrying an Authorization header
//     (400, as S3 does for a presigned URL), and answers Range with 206
//     and Content-Range, ETag the blob's MD5.
//
// Every request either listener receives is recorded with all its
// headers (Requests), for tests of where a credential goes.
//
// Errors carry X-Error-Code as the Hub's do: a missing or private
// repository without access is 401 RepoNotFound without a token and 404
// RepoNotFound with one; a gated one has public info and tree, but
// resolve answers 401 GatedRepo without a token and 403 GatedRepo with
// one not granted; RevisionNotFound, EntryNotFound. Throttle makes the
// next N Hub requests 429. Commit moves a branch, so that a test can
// push while a reader holds the old sha.
package hftest

import (
	"bytes"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// TreeFault is a way for the tree API's pages to never end.
type TreeFault int

const (
	// TreeSelf gives every page a Link rel="next" to itself.
	TreeSelf TreeFault = iota + 1
	// TreeEndless gives every page a next one, past the last entry too:
	// those pages repeat the last page's entries, at a cursor that
	// grows.
	TreeEndless
)

// File is one file of a commit.
type File struct {
	Path string
	Data []byte
	LFS  bool // stored in Git LFS: resolve redirects to the CDN
}

// Server is a Hub and its CDN on loopback.
type Server struct {
	Hub, CDN *httptest.Server
	// PageSize is the tree API's page length (default 3).
	PageSize int
	// URLTTL is how long a CDN URL is valid (default 1 h).
	URLTTL time.Duration
	// TreeFault makes the tree API's pages lie (TreeSelf, TreeEndless);
	// zero lists as the Hub does. Set it before the first request.
	TreeFault TreeFault

	secret  []byte
	mu      sync.Mutex
	repos   map[string]*repo    // GUARDED_BY(mu): "models/ORG/NAME"
	grants  map[string][]string // GUARDED_BY(mu): token -> repo keys
	blobs   map[string]blob     // GUARDED_BY(mu): sha256 hex -> bytes
	clock   time.Duration       // GUARDED_BY(mu): added to now (Expire)
	ncommit int                 // GUARDED_BY(mu)

	throttle atomic.Int64
	// Counters.
	HubRequests, CDNRequests      atomic.Int64
	HubBytes, CDNBytes            atomic.Int64 // bodies of file bytes served
	HubAuth, CDNAuth              atomic.Int64 // requests that carried Authorization
	Redirects, Expired, Throttled atomic.Int64

	seenMu sync.Mutex
	seen   []Request // GUARDED_BY(seenMu): every request, in order

	wrapMu  sync.Mutex
	cdnWrap http.Handler // GUARDED_BY(wrapMu): WrapCDN's handler, nil when none
	hubWrap http.Handler // GUARDED_BY(wrapMu): WrapHub's handler, nil when none
}

// Request is one request a listener received, as it came: its request
// line's target and every header (a test looks for a credential where it
// does not belong).
type Request struct {
	Listener string // "hub" or "cdn"
	Method   string
	Target   string // the request line's target (path and query)
	Header   http.Header
}

// Requests returns every request the Hub and the CDN have received so
// far, in order.
func (s *Server) Requests() []Request {
	s.seenMu.Lock()
	defer s.seenMu.Unlock()
	return append([]Request(nil), s.seen...)
}

func (s *Server) record(listener string, r *http.Request) {
	s.seenMu.Lock()
	s.seen = append(s.seen, Request{Listener: listener, Method: r.Method, Target: r.RequestURI, Header: r.Header.Clone()})
	s.seenMu.Unlock()
}

type repo struct {
	private, gated bool
	branches       map[string]string             // name -> sha
	commits        map[string]map[string]*stored // sha -> path -> file
}

// stored is a committed file with its sums, computed once.
type stored struct {
	File
	sha256  string // of the bytes (the LFS oid)
	oid     string // git oid of what git holds: the bytes, or the LFS pointer
	ptrSize int64  // the LFS pointer's size
}

// blob is an LFS object on the CDN.
type blob struct {
	data []byte
	etag string // its MD5, as S3 gives a single-part object
}

func newBlob(b []byte) blob {
	sum := md5.Sum(b)
	return blob{data: b, etag: `"` + hex.EncodeToString(sum[:]) + `"`}
}

// New starts a Hub and its CDN.
func New() *Server { return start(false) }

// NewTLSCDN is New with a CDN that speaks https:// (a self-signed
// certificate, CDN.Certificate()), as the Hub's does.
func NewTLSCDN() *Server { return start(true) }

func start(tlsCDN bool) *Server {
	s := &Server{PageSize: 3, URLTTL: time.Hour, secret: []byte("hftest-cdn-key"), repos: map[string]*repo{}, grants: map[string][]string{}, blobs: map[string]blob{}}
	s.Hub = httptest.NewServer(http.HandlerFunc(s.serveHub))
	if tlsCDN {
		s.CDN = httptest.NewTLSServer(http.HandlerFunc(s.serveCDN))
	} else {
		s.CDN = httptest.NewServer(http.HandlerFunc(s.serveCDN))
	}
	return s
}

// Close stops both listeners.
func (s *Server) Close() {
	s.Hub.Close()
	s.CDN.Close()
}

// Repo creates a repository ("models/ORG/NAME" or "datasets/ORG/NAME";
// "ORG/NAME" is a model), private or gated.
func (s *Server) Repo(id string, private, gated bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[repoKey(id)] = &repo{private: private, gated: gated, branches: map[string]string{}, commits: map[string]map[string]*stored{}}
}

// Grant gives token access to the repository id.
func (s *Server) Grant(token, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.grants[token] = append(s.grants[token], repoKey(id))
}

// Commit makes a commit of files on branch of repository id (created
// public when new) and moves the branch to it; it returns its sha.
func (s *Server) Commit(id, branch string, files ...File) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := repoKey(id)
	r := s.repos[k]
	if r == nil {
		r = &repo{branches: map[string]string{}, commits: map[string]map[string]*stored{}}
		s.repos[k] = r
	}
	s.ncommit++
	h := sha1.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d", k, branch, s.ncommit)
	tree := map[string]*stored{}
	for _, f := range files {
		st := &stored{File: f, sha256: SHA256(f.Data), oid: GitOID(f.Data)}
		fmt.Fprintf(h, "\x00%s\x00%s", f.Path, st.sha256)
		if f.LFS {
			ptr := LFSPointer(f.Data)
			st.oid, st.ptrSize = GitOID(ptr), int64(len(ptr))
			s.blobs[st.sha256] = newBlob(f.Data)
		}
		tree[f.Path] = st
	}
	sha := hex.EncodeToString(h.Sum(nil))
	r.commits[sha] = tree
	r.branches[branch] = sha
	return sha
}

// Expire makes every CDN URL given so far expired (the clock moves on by
// URLTTL).
func (s *Server) Expire() {
	s.mu.Lock()
	s.clock += s.URLTTL + time.Second
	s.mu.Unlock()
}

// ReplaceBlob makes the CDN serve b for the LFS object sum (a CDN that
// changed under its URL: its ETag changes too).
func (s *Server) ReplaceBlob(sum string, b []byte) {
	s.mu.Lock()
	s.blobs[sum] = newBlob(b)
	s.mu.Unlock()
}

// CorruptLFS makes the CDN serve other bytes of the same size for the
// LFS file path of repository id at commit sha, under the headers it had
// (its ETag, and the Hub's X-Linked-Etag and X-Linked-Size unchanged):
// bytes gone bad at rest, which only a hash of the whole file finds.
// change alters a copy of the bytes in place. It returns the file's
// sha256 (the Hub's) and that of the bytes now served.
func (s *Server) CorruptLFS(id, sha, path string, change func(b []byte)) (hubSum, served string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.repos[repoKey(id)].commits[sha][path]
	if st == nil || !st.LFS {
		panic("hftest: CorruptLFS: no LFS file " + path + " in " + id + "@" + sha)
	}
	old := s.blobs[st.sha256]
	b := append([]byte(nil), old.data...)
	change(b)
	if len(b) != len(old.data) {
		panic("hftest: CorruptLFS: change altered the size")
	}
	s.blobs[st.sha256] = blob{data: b, etag: old.etag}
	return st.sha256, SHA256(b)
}

// Throttle makes the next n Hub requests answer 429.
func (s *Server) Throttle(n int) { s.throttle.Store(int64(n)) }

func (s *Server) now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Now().Add(s.clock)
}

func repoKey(id string) string {
	if strings.HasPrefix(id, "models/") || strings.HasPrefix(id, "datasets/") {
		return id
	}
	return "models/" + id
}

// GitOID is a blob's git object id: sha1 of "blob N\0" and its bytes.
func GitOID(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// SHA256 is the hex sha256 of b: an LFS file's oid.
func SHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// LFSPointer is the pointer file git holds for an LFS file of bytes b.
func LFSPointer(b []byte) []byte {
	return []byte(fmt.Sprintf("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", SHA256(b), len(b)))
}

// ETag is the ETag a file's bytes get from the Hub: for an LFS file its
// sha256 (X-Linked-Etag), else its git oid; as huggingface_hub names
// the cache's blobs.
func ETag(f File) string {
	if f.LFS {
		return SHA256(f.Data)
	}
	return GitOID(f.Data)
}

func hubError(w http.ResponseWriter, status int, code, msg string) {
	if code != "" {
		w.Header().Set("X-Error-Code", code)
	}
	w.Header().Set("X-Error-Message", msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// access finds repository k for a request: nil and an answer sent when it
// may not be seen. resolve says that file bytes are asked for (a gated
// repository's are refused without a grant).
func (s *Server) access(w http.ResponseWriter, r *http.Request, k string, resolve bool) *repo {
	token, hasToken := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	rp := s.repos[k]
	granted := false
	for _, g := range s.grants[token] {
		granted = granted || (hasToken && g == k)
	}
	s.mu.Unlock()
	if rp == nil || (rp.private && !granted) {
		if !hasToken {
			hubError(w, 401, "RepoNotFound", "Invalid username or password.")
		} else {
			hubError(w, 404, "RepoNotFound", "Repository not found")
		}
		return nil
	}
	if resolve && rp.gated && !granted {
		if !hasToken {
			hubError(w, 401, "GatedRepo", "Access to model "+strings.TrimPrefix(k, "models/")+" is restricted. You must have access to it and be authenticated to access it. Please log in.")
		} else {
			hubError(w, 403, "GatedRepo", "Access to model "+strings.TrimPrefix(k, "models/")+" is restricted and you are not in the authorized list.")
		}
		return nil
	}
	return rp
}

// commit resolves rev of rp: its sha and tree, or an answer sent.
func (s *Server) commit(w http.ResponseWriter, rp *repo, rev string) (string, map[string]*stored) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sha := rev
	if b, ok := rp.branches[rev]; ok {
		sha = b
	}
	tree, ok := rp.commits[sha]
	if !ok {
		hubError(w, 404, "RevisionNotFound", "Invalid rev id: "+rev)
		return "", nil
	}
	return sha, tree
}

// WrapHub makes the Hub answer through wrap(its own handler) from the
// next request on, as WrapCDN does the CDN.
func (s *Server) WrapHub(wrap func(http.Handler) http.Handler) {
	s.setWrap(&s.hubWrap, wrap(http.HandlerFunc(s.hub)))
}

func (s *Server) serveHub(w http.ResponseWriter, r *http.Request) {
	s.through(&s.hubWrap, s.hub, w, r)
}

func (s *Server) hub(w http.ResponseWriter, r *http.Request) {
	w = &countWriter{ResponseWriter: w, n: &s.HubBytes}
	s.record("hub", r)
	s.HubRequests.Add(1)
	if r.Header.Get("Authorization") != "" {
		s.HubAuth.Add(1)
	}
	if s.throttle.Load() > 0 && s.throttle.Add(-1) >= 0 {
		s.Throttled.Add(1)
		w.Header().Set("Retry-After", "0")
		hubError(w, 429, "", "Too Many Requests")
		return
	}
	segs := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	un := func(s string) string {
		v, err := url.PathUnescape(s)
		if err != nil {
			return "\x00bad"
		}
		return v
	}
	if len(segs) >= 6 && segs[0] == "api" && segs[1] == "resolve-cache" {
		// /api/resolve-cache/TYPE/ORG/NAME/SHA/PATH...
		if len(segs) < 7 {
			http.NotFound(w, r)
			return
		}
		k := segs[2] + "/" + un(segs[3]) + "/" + un(segs[4])
		rp := s.access(w, r, k, true)
		if rp == nil {
			return
		}
		s.serveFile(w, r, rp, un(segs[5]), un(strings.Join(segs[6:], "/")), false)
		return
	}
	if len(segs) >= 6 && segs[0] == "api" && (segs[1] == "models" || segs[1] == "datasets") {
		k := segs[1] + "/" + un(segs[2]) + "/" + un(segs[3])
		rp := s.access(w, r, k, false)
		if rp == nil {
			return
		}
		sha, tree := s.commit(w, rp, un(segs[5]))
		if tree == nil {
			return
		}
		switch segs[4] {
		case "revision":
			s.info(w, k, sha, rp, tree)
		case "tree":
			s.tree(w, r, sha, tree, un(strings.Join(segs[6:], "/")))
		case "paths-info":
			if r.Method != http.MethodPost {
				http.Error(w, "POST", 405)
				return
			}
			r.ParseForm()
			s.pathsInfo(w, tree, r.PostForm["paths"])
		default:
			http.NotFound(w, r)
		}
		return
	}
	// /[datasets/]ORG/NAME/resolve/REV/PATH...
	typ := "models"
	if len(segs) > 0 && segs[0] == "datasets" {
		typ, segs = "datasets", segs[1:]
	}
	if len(segs) < 5 || segs[2] != "resolve" {
		http.NotFound(w, r)
		return
	}
	k := typ + "/" + un(segs[0]) + "/" + un(segs[1])
	rp := s.access(w, r, k, true)
	if rp == nil {
		return
	}
	sha, tree := s.commit(w, rp, un(segs[3]))
	if tree == nil {
		return
	}
	s.serveFile(w, r, rp, sha, un(strings.Join(segs[4:], "/")), true)
	_ = tree
}

// serveFile answers resolve (redirects) or resolve-cache (bytes).
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request, rp *repo, sha, p string, resolve bool) {
	s.mu.Lock()
	tree := rp.commits[sha]
	f, ok := tree[p]
	s.mu.Unlock()
	if tree == nil {
		hubError(w, 404, "RevisionNotFound", "Invalid rev id: "+sha)
		return
	}
	if !ok {
		hubError(w, 404, "EntryNotFound", p+" does not exist on \""+sha+"\"")
		return
	}
	w.Header().Set("X-Repo-Commit", sha)
	if resolve {
		s.Redirects.Add(1)
		if f.LFS {
			w.Header().Set("ETag", `"`+f.oid+`"`)
			w.Header().Set("X-Linked-Etag", `"`+f.sha256+`"`)
			w.Header().Set("X-Linked-Size", strconv.Itoa(len(f.Data)))
			w.Header().Set("Location", s.cdnURL(f.sha256))
			w.WriteHeader(http.StatusFound)
			return
		}
		typ, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
		if typ != "datasets" {
			rest, typ = strings.TrimPrefix(r.URL.EscapedPath(), "/"), "models"
		}
		parts := strings.SplitN(rest, "/", 5) // ORG NAME resolve REV PATH
		w.Header().Set("ETag", `"`+f.oid+`"`)
		w.Header().Set("Location", "/api/resolve-cache/"+typ+"/"+parts[0]+"/"+parts[1]+"/"+sha+"/"+parts[4])
		w.WriteHeader(http.StatusTemporaryRedirect)
		return
	}
	if f.LFS {
		hubError(w, 404, "EntryNotFound", p+" is in LFS")
		return
	}
	w.Header().Set("ETag", `"`+f.oid+`"`)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.Data))
}

// cdnURL is a presigned URL of blob sum: a path by content, an expiry and
// a signature of both.
func (s *Server) cdnURL(sum string) string {
	exp := strconv.FormatInt(s.now().Add(s.URLTTL).Unix(), 10)
	return s.CDN.URL + "/blobs/" + sum + "?Expires=" + exp + "&Signature=" + s.sign("/blobs/"+sum, exp) + "&Key-Pair-Id=HFTEST"
}

func (s *Server) sign(p, exp string) string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte(p + "\x00" + exp))
	return hex.EncodeToString(m.Sum(nil))
}

// WrapCDN makes the CDN answer through wrap(its own handler) from the
// next request on: a test's fault injected in its replies (a reply held
// mid-body).
func (s *Server) WrapCDN(wrap func(http.Handler) http.Handler) {
	s.setWrap(&s.cdnWrap, wrap(http.HandlerFunc(s.cdn)))
}

func (s *Server) serveCDN(w http.ResponseWriter, r *http.Request) {
	s.through(&s.cdnWrap, s.cdn, w, r)
}

// setWrap makes h a listener's handler (*slot: hubWrap or cdnWrap).
func (s *Server) setWrap(slot *http.Handler, h http.Handler) {
	s.wrapMu.Lock()
	*slot = h
	s.wrapMu.Unlock()
}

// through serves r with a listener's wrapped handler (*slot) when it has
// one, else with its own.
func (s *Server) through(slot *http.Handler, own http.HandlerFunc, w http.ResponseWriter, r *http.Request) {
	s.wrapMu.Lock()
	h := *slot
	s.wrapMu.Unlock()
	if h == nil {
		h = own
	}
	h.ServeHTTP(w, r)
}

func (s *Server) cdn(w http.ResponseWriter, r *http.Request) {
	s.record("cdn", r)
	s.CDNRequests.Add(1)
	xml := func(status int, code, msg string) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		fmt.Fprintf(w, "<Error><Code>%s</Code><Message>%s</Message></Error>", code, msg)
	}
	if r.Header.Get("Authorization") != "" {
		s.CDNAuth.Add(1)
		xml(400, "InvalidArgument", "Only one auth mechanism allowed")
		return
	}
	q := r.URL.Query()
	exp := q.Get("Expires")
	if !hmac.Equal([]byte(q.Get("Signature")), []byte(s.sign(r.URL.Path, exp))) {
		xml(403, "AccessDenied", "Invalid signature")
		return
	}
	e, _ := strconv.ParseInt(exp, 10, 64)
	if s.now().Unix() > e {
		s.Expired.Add(1)
		xml(403, "AccessDenied", "Request has expired")
		return
	}
	s.mu.Lock()
	b, ok := s.blobs[strings.TrimPrefix(r.URL.Path, "/blobs/")]
	s.mu.Unlock()
	if !ok {
		xml(404, "NoSuchKey", "The specified key does not exist.")
		return
	}
	w.Header().Set("ETag", b.etag)
	cw := &countWriter{ResponseWriter: w, n: &s.CDNBytes}
	http.ServeContent(cw, r, "", time.Time{}, bytes.NewReader(b.data))
}

type countWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

// Write counts p before writing it, and takes back what was not written:
// counted after, the last bytes of a response could reach the client,
// and a test that reads the count once its clients are done could miss
// them (the fleet tests bound the bytes from below at the model's size).
func (c *countWriter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	n, err := c.ResponseWriter.Write(p)
	if n < len(p) {
		c.n.Add(int64(n - len(p)))
	}
	return n, err
}

// entry is one item of the tree and paths-info APIs (hf_api.py's
// RepoFile, RepoFolder).
type entry struct {
	Type string    `json:"type"`
	OID  string    `json:"oid"`
	Size int64     `json:"size"`
	Path string    `json:"path"`
	LFS  *lfsEntry `json:"lfs,omitempty"`
}

type lfsEntry struct {
	OID         string `json:"oid"`
	Size        int64  `json:"size"`
	PointerSize int64  `json:"pointerSize"`
}

func fileEntry(f *stored) entry {
	if f.LFS {
		return entry{Type: "file", OID: f.oid, Size: int64(len(f.Data)), Path: f.Path, LFS: &lfsEntry{OID: f.sha256, Size: int64(len(f.Data)), PointerSize: f.ptrSize}}
	}
	return entry{Type: "file", OID: f.oid, Size: int64(len(f.Data)), Path: f.Path}
}

func (s *Server) info(w http.ResponseWriter, k, sha string, rp *repo, tree map[string]*stored) {
	type sibling struct {
		RFilename string `json:"rfilename"`
	}
	var sib []sibling
	for _, p := range sortedPaths(tree) {
		sib = append(sib, sibling{p})
	}
	_, id, _ := strings.Cut(k, "/")
	var gated any = false
	if rp.gated {
		gated = "auto"
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"id": id, "sha": sha, "private": rp.private, "gated": gated, "siblings": sib})
}

func sortedPaths(tree map[string]*stored) []string {
	var ps []string
	for p := range tree {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return ps
}

// tree lists dir (recursively with ?recursive=true), a page at a time:
// ?cursor=N starts at entry N.
func (s *Server) tree(w http.ResponseWriter, r *http.Request, sha string, tree map[string]*stored, dir string) {
	dir = strings.Trim(dir, "/")
	recursive := r.URL.Query().Get("recursive") == "true" || r.URL.Query().Get("recursive") == "True"
	var all []entry
	dirs := map[string]bool{}
	found := dir == ""
	for _, p := range sortedPaths(tree) {
		rel := p
		if dir != "" {
			var ok bool
			if rel, ok = strings.CutPrefix(p, dir+"/"); !ok {
				continue
			}
		}
		found = true
		if i := strings.IndexByte(rel, '/'); i >= 0 {
			// The folders on the way, once each.
			for j := i; j >= 0; {
				d := rel[:j]
				if !dirs[d] {
					dirs[d] = true
					full := d
					if dir != "" {
						full = dir + "/" + d
					}
					all = append(all, entry{Type: "directory", OID: GitOID([]byte(full)), Path: full})
				}
				if !recursive {
					break
				}
				k := strings.IndexByte(rel[j+1:], '/')
				if k < 0 {
					break
				}
				j = j + 1 + k
			}
			if !recursive {
				continue
			}
		}
		all = append(all, fileEntry(tree[p]))
	}
	if !found {
		hubError(w, 404, "EntryNotFound", dir+" does not exist on \""+sha+"\"")
		return
	}
	cursor, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
	start := max(0, min(cursor, len(all)))
	end := min(len(all), start+max(1, s.PageSize))
	if s.TreeFault == TreeEndless && start == len(all) {
		start = max(0, len(all)-max(1, s.PageSize))
	}
	next := ""
	switch {
	case s.TreeFault == TreeSelf:
		next = s.Hub.URL + r.URL.RequestURI()
	case end < len(all) || s.TreeFault == TreeEndless:
		q := r.URL.Query()
		q.Set("cursor", strconv.Itoa(max(end, cursor+1)))
		next = s.Hub.URL + r.URL.EscapedPath() + "?" + q.Encode()
	}
	if next != "" {
		w.Header().Set("Link", "<"+next+`>; rel="next"`)
	}
	w.Header().Set("Content-Type", "application/json")
	page := all[start:end]
	if page == nil {
		page = []entry{}
	}
	json.NewEncoder(w).Encode(page)
}

func (s *Server) pathsInfo(w http.ResponseWriter, tree map[string]*stored, paths []string) {
	out := []entry{}
	for _, p := range paths {
		if f, ok := tree[p]; ok {
			out = append(out, fileEntry(f))
			continue
		}
		for q := range tree {
			if strings.HasPrefix(q, p+"/") {
				out = append(out, entry{Type: "directory", OID: GitOID([]byte(p)), Path: p})
				break
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

// Unreachable returns an http:// URL on loopback that refuses every
// connection (a Hub that cannot be reached) and a func that frees it.
// Its port is bound by a socket that never listens, so that no other
// server can take it while it is held: a closed server's port could be.
func Unreachable() (string, func(), error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		return "", nil, err
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(fd)
		return "", nil, err
	}
	sa, err := syscall.Getsockname(fd)
	in4, ok := sa.(*syscall.SockaddrInet4)
	if err != nil || !ok {
		syscall.Close(fd)
		return "", nil, fmt.Errorf("hftest: getsockname: %v", err)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", in4.Port), func() { syscall.Close(fd) }, nil
}
