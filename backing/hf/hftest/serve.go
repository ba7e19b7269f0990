package hftest

// The Hub's and the CDN's handlers: access, resolve, the API routes
// and the signed blob URLs.

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

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
		// xet-read-token gives access to the bytes: a gated
		// repository's need a grant, as resolve's do.
		rp := s.access(w, r, k, segs[4] == "xet-read-token")
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
		case "xet-read-token":
			s.xetToken(w, r)
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
		if f.Xet {
			w.Header().Set("ETag", `"`+f.oid+`"`)
			w.Header().Set("X-Linked-Etag", `"`+f.sha256+`"`)
			w.Header().Set("X-Linked-Size", strconv.Itoa(len(f.Data)))
			w.Header().Set("X-Xet-Hash", f.xetHash)
			typ, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
			if typ != "datasets" {
				rest, typ = strings.TrimPrefix(r.URL.EscapedPath(), "/"), "models"
			}
			parts := strings.SplitN(rest, "/", 3) // ORG NAME resolve/...
			w.Header().Set("Link", "<"+s.Hub.URL+"/api/"+typ+"/"+parts[0]+"/"+parts[1]+"/xet-read-token/"+sha+`>; rel="xet-auth"`)
			w.Header().Set("Location", s.bridgeURL(f.xetHash))
			w.WriteHeader(http.StatusFound)
			return
		}
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

// bridgeURL is a presigned URL of the Xet bridge for the file of Xet
// hash h, signed as S3 signs (X-Amz-Date, X-Amz-Expires).
func (s *Server) bridgeURL(h string) string {
	date := s.now().UTC().Format("20060102T150405Z")
	exp := strconv.Itoa(int(s.URLTTL / time.Second))
	p := bridgePrefix + h
	return s.CDN.URL + p + "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=HFTEST&X-Amz-Date=" + date + "&X-Amz-Expires=" + exp + "&X-Amz-SignedHeaders=host&X-Amz-Signature=" + s.sign(p, date+"/"+exp)
}

// bridgePrefix is the path of the Xet bridge's files on the CDN's
// listener (cas-bridge.xethub.hf.co's /xet-bridge-us/...).
const bridgePrefix = "/xet-bridge-us/"

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
	if h, ok := strings.CutPrefix(r.URL.Path, bridgePrefix); ok {
		s.bridge(w, r, h, xml)
		return
	}
	q := r.URL.Query()
	exp := q.Get("Expires")
	e, _ := strconv.ParseInt(exp, 10, 64)
	b, ok := s.signedBlob(w, r, xml, q.Get("Signature"), exp, s.now().Unix() > e, strings.TrimPrefix(r.URL.Path, "/blobs/"))
	if !ok {
		return
	}
	cw := &countWriter{ResponseWriter: w, n: &s.CDNBytes}
	http.ServeContent(cw, r, "", time.Time{}, bytes.NewReader(b.data))
}

// signedBlob checks a signed URL of the CDN or the bridge: sig must sign
// its path and signed (what else the URL's signature covers), and it
// must not be expired; then it finds the blob of sha256 sum and sets
// its ETag. Otherwise it answers (403, 404) and ok is false.
func (s *Server) signedBlob(w http.ResponseWriter, r *http.Request, xml func(status int, code, msg string), sig, signed string, expired bool, sum string) (b blob, ok bool) {
	if !hmac.Equal([]byte(sig), []byte(s.sign(r.URL.Path, signed))) {
		xml(403, "AccessDenied", "Invalid signature")
		return blob{}, false
	}
	if expired {
		s.Expired.Add(1)
		xml(403, "AccessDenied", "Request has expired")
		return blob{}, false
	}
	s.mu.Lock()
	b, ok = s.blobs[sum]
	s.mu.Unlock()
	if !ok {
		xml(404, "NoSuchKey", "The specified key does not exist.")
		return blob{}, false
	}
	w.Header().Set("ETag", b.etag)
	return b, true
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
