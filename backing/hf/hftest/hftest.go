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
//   - A file stored in Xet (File.Xet) is answered by resolve as the Hub
//     does (huggingface_hub's constants.py, utils/_xet.py,
//     file_download.py): a 302 to the Xet bridge with X-Xet-Hash,
//     X-Linked-Etag (still the LFS sha256), X-Linked-Size and
//     `Link: <ENDPOINT/api/models/ORG/NAME/xet-read-token/SHA>;
//     rel="xet-auth"`; that route answers the CAS's URL and a short-lived
//     token in X-Xet-Cas-Url, X-Xet-Access-Token, X-Xet-Token-Expiration.
//     The bridge (on the CDN's listener, /xet-bridge-us/XETHASH) signs
//     its URLs as S3 does (X-Amz-Date, X-Amz-Expires, X-Amz-Signature;
//     403 past them), refuses an unranged GET of a file over
//     BridgeUnrangedMax bytes with 400 (CloudFront's 50 GB cap), and
//     answers Range with 206 and Content-Range, unless FaultBridge makes
//     its next ranged answers a whole 200 (gzip-encoded or not) or a 206
//     without Content-Range.
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
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
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
	// Xet: stored in Xet (an LFS file too: the tree lists its LFS oid
	// and its xetHash): resolve redirects to the Xet bridge.
	Xet bool
}

// MaxHTTPDownloadSize is the size past which the Hub's CDN (CloudFront)
// refuses an unranged GET: huggingface_hub's MAX_HTTP_DOWNLOAD_SIZE.
const MaxHTTPDownloadSize = 50 * 1000 * 1000 * 1000

// BridgeFault is a way for the Xet bridge to answer a ranged GET
// otherwise than with 206 and Content-Range.
type BridgeFault int

const (
	// BridgeWhole answers with the whole file: 200, Content-Length its
	// size.
	BridgeWhole BridgeFault = iota + 1
	// BridgeGzip answers a request that accepts gzip (Accept-Encoding)
	// with the whole file gzip-encoded, as CloudFront does; one that
	// asks for identity is answered rightly (not counted in Faulted).
	BridgeGzip
	// BridgeGzipAlways is BridgeGzip whatever the request accepts.
	BridgeGzipAlways
	// BridgeNoContentRange answers 206 with the bytes asked for and
	// their Content-Length, without Content-Range.
	BridgeNoContentRange
	// BridgeShortNoContentRange answers 206 without Content-Range with
	// the first half of the bytes asked for.
	BridgeShortNoContentRange
)

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
	// BridgeUnrangedMax is the largest Xet file the bridge sends to an
	// unranged GET (default MaxHTTPDownloadSize; a test scales it down).
	// Set it before the first request.
	BridgeUnrangedMax int64

	secret  []byte
	mu      sync.Mutex
	repos   map[string]*repo    // GUARDED_BY(mu): "models/ORG/NAME"
	grants  map[string][]string // GUARDED_BY(mu): token -> repo keys
	blobs   map[string]blob     // GUARDED_BY(mu): sha256 hex -> bytes
	xet     map[string]string   // GUARDED_BY(mu): Xet hash -> sha256 of its blob
	clock   time.Duration       // GUARDED_BY(mu): added to now (Expire)
	ncommit int                 // GUARDED_BY(mu)
	fault   BridgeFault         // GUARDED_BY(mu): FaultBridge's
	nfault  int                 // GUARDED_BY(mu): ranged GETs left that fault takes

	throttle atomic.Int64
	// Counters.
	HubRequests, CDNRequests      atomic.Int64
	HubBytes, CDNBytes            atomic.Int64 // bodies of file bytes served
	HubAuth, CDNAuth              atomic.Int64 // requests that carried Authorization
	Redirects, Expired, Throttled atomic.Int64
	// The Xet bridge's requests (also in CDNRequests), its unranged
	// GETs, the answers FaultBridge changed, and xet-read-token's.
	BridgeRequests, BridgeUnranged, BridgeFaulted, XetTokens atomic.Int64

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
	xetHash string // XetHash of the bytes, "" unless Xet
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
	s := &Server{PageSize: 3, URLTTL: time.Hour, BridgeUnrangedMax: MaxHTTPDownloadSize, secret: []byte("hftest-cdn-key"), repos: map[string]*repo{}, grants: map[string][]string{}, blobs: map[string]blob{}, xet: map[string]string{}}
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
		f.LFS = f.LFS || f.Xet
		st := &stored{File: f, sha256: SHA256(f.Data), oid: GitOID(f.Data)}
		if f.Xet {
			st.xetHash = XetHash(f.Data)
			s.xet[st.xetHash] = st.sha256
		}
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

// FaultBridge makes the Xet bridge answer its next n ranged GETs with f
// (n < 0: all of them; f zero: none).
func (s *Server) FaultBridge(f BridgeFault, n int) {
	s.mu.Lock()
	s.fault, s.nfault = f, n
	s.mu.Unlock()
}

// takeFault is the fault the next ranged GET of the bridge takes.
func (s *Server) takeFault() BridgeFault {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nfault == 0 {
		return 0
	}
	if s.nfault > 0 {
		s.nfault--
	}
	return s.fault
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

// XetHash stands for the Xet hash of b (a merkle hash of its chunks on
// the Hub; here the hex sha256 of "xet\x00" and b): 64 hex digits, as
// huggingface_hub's is_valid_xet_hash wants, and not the LFS sha256.
func XetHash(b []byte) string {
	return SHA256(append([]byte("xet\x00"), b...))
}

// LFSPointer is the pointer file git holds for an LFS file of bytes b.
func LFSPointer(b []byte) []byte {
	return []byte(fmt.Sprintf("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", SHA256(b), len(b)))
}

// ETag is the ETag a file's bytes get from the Hub: for an LFS file its
// sha256 (X-Linked-Etag), else its git oid; as huggingface_hub names
// the cache's blobs.
func ETag(f File) string {
	if f.LFS || f.Xet {
		return SHA256(f.Data)
	}
	return GitOID(f.Data)
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
