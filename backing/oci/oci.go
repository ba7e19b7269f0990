// Package oci reads a model stored as an OCI artifact in a registry
// (oci://HOST[:PORT]/REPOSITORY[:TAG|@sha256:HEX]) as a remote.Store: the
// manifest is read once, its tag resolved to the manifest's digest, and
// the weight layers of a CNCF ModelPack artifact or of a Docker Model
// Runner one are the store's files, each read with ranged GETs of its
// blob (backing/httpsrc) and named by its layer's path annotation.
//
// Anonymous pulls, or with the credential of an auth file
// ($REGISTRY_AUTH_FILE, $DOCKER_CONFIG/config.json or
// ~/.docker/config.json: creds.go), with Basic auth or the registry
// token flow (auth.go); credential helpers are named, not run; plain
// http off loopback only for a registry named insecure (Options), never
// with a credential.
//
// Tar layers: an uncompressed one is read in place (its headers read
// once, each file a range of the blob); a .tar+gzip or .tar+zstd one is
// decoded once at Open, streamed, into the inflate cache (within its
// budgets), its entries indexed and its digest checked over the
// compressed bytes on the way, and its files served from the decoded
// bytes (tar.go).
package oci

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/backing/httpsrc"
	"github.com/lazyweights/tensorfs/backing/remote"
	"github.com/lazyweights/tensorfs/index"
)

// Prefix starts every oci:// SOURCE.
const Prefix = "oci://"

// Media types read (ModelPack: modelpack/model-spec docs/spec.md;
// Docker Model Runner: docker/model-distribution types/config.go).
const (
	MediaWeightRaw   = "application/vnd.cncf.model.weight.v1.raw"
	MediaConfigRaw   = "application/vnd.cncf.model.weight.config.v1.raw"
	MediaDockerGGUF  = "application/vnd.docker.ai.gguf.v3"
	MediaDockerST    = "application/vnd.docker.ai.safetensors"
	annFilepath      = "org.cncf.model.filepath"
	annFilepathOld   = "org.cnai.model.filepath"
	annTitle         = "org.opencontainers.image.title"
	mediaOCIManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaOCIIndex    = "application/vnd.oci.image.index.v1+json"
	mediaDockerV2    = "application/vnd.docker.distribution.manifest.v2+json"
	mediaDockerList  = "application/vnd.docker.distribution.manifest.list.v2+json"
)

// MaxManifest is the byte budget of a manifest or index: a registry
// answering more is refused, nothing past it read.
const MaxManifest = 4 << 20

// maxLayers bounds the layers of one manifest.
const maxLayers = 100000

// Ref is a parsed oci:// SOURCE.
type Ref struct {
	Host      string // host[:port]
	Repo      string // repository, '/'-separated
	Reference string // tag, or "sha256:HEX"
}

// Digest reports whether the reference is a digest.
func (r Ref) Digest() bool { return strings.HasPrefix(r.Reference, "sha256:") }

// ParseRef parses oci://HOST[:PORT]/REPO[:TAG|@sha256:HEX] (default tag
// latest).
func ParseRef(source string) (Ref, error) {
	if len(source) < len(Prefix) || !strings.EqualFold(source[:len(Prefix)], Prefix) {
		return Ref{}, fmt.Errorf("%s: not an oci:// SOURCE", source)
	}
	rest := source[len(Prefix):]
	host, repo, ok := strings.Cut(rest, "/")
	if !ok || host == "" || repo == "" {
		return Ref{}, fmt.Errorf("%s: want oci://HOST[:PORT]/REPOSITORY[:TAG|@sha256:DIGEST]", source)
	}
	r := Ref{Host: host, Reference: "latest"}
	if name, d, ok := strings.Cut(repo, "@"); ok {
		if !validDigest(d) {
			return Ref{}, fmt.Errorf("%s: digest %q is not sha256: and 64 lower-case hex digits", source, index.Printable(d))
		}
		repo, r.Reference = name, d
	} else if i := strings.LastIndexByte(repo, ':'); i > strings.LastIndexByte(repo, '/') {
		repo, r.Reference = repo[:i], repo[i+1:]
		if !validTag(r.Reference) {
			return Ref{}, fmt.Errorf("%s: tag %q is not a valid tag ([A-Za-z0-9_][A-Za-z0-9._-]{0,127})", source, index.Printable(r.Reference))
		}
	}
	for _, c := range strings.Split(repo, "/") {
		if c == "" || !validComponent(c) {
			return Ref{}, fmt.Errorf("%s: repository %q is not a valid name (lower-case components of [a-z0-9._-])", source, index.Printable(repo))
		}
	}
	r.Repo = repo
	return r, nil
}

func validDigest(d string) bool {
	h, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	for _, c := range h {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func validTag(t string) bool {
	if t == "" || len(t) > 128 || t[0] == '.' || t[0] == '-' {
		return false
	}
	for _, c := range t {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

func validComponent(c string) bool {
	for _, r := range c {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
			return false
		}
	}
	return c[0] != '.' && c[0] != '-' && c != ".." && c != "."
}

// loopback reports whether host (host[:port]) is the loopback interface,
// where plain HTTP is used.
func loopback(host string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(h, "[]"))
	return ip != nil && ip.IsLoopback()
}

// Descriptor is one layer or manifest named by a manifest.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	ArtifactType  string       `json:"artifactType"`
	Config        Descriptor   `json:"config"`
	Layers        []Descriptor `json:"layers"`
	Manifests     []Descriptor `json:"manifests"`
}

// Options configure Open.
type Options struct {
	// Proxy, ProxyTerminatesTLS and Logf are httpsrc.Options's: with
	// ProxyTerminatesTLS, the blob GETs that go through Proxy (those of
	// a registry that serves without a credential, and every registry's
	// redirects to its storage) go to it as absolute-form https:// URLs
	// when they are https://, which it can cache, not through CONNECT.
	Proxy              *url.URL
	ProxyTerminatesTLS bool
	Logf               func(format string, args ...any)
	// Insecure reads a registry off the loopback interface over plain
	// HTTP (docker's insecure-registries); no credential is sent to it
	// in clear.
	Insecure bool
	// Inflate holds the decoded .tar+gzip and .tar+zstd layers, and its
	// limits bound their size (nil: backing.DefaultInflateCache()).
	Inflate *backing.InflateCache
}

// Store is the files of one artifact.
type Store struct {
	ref    Ref
	pinned string // oci://HOST/REPO@sha256:HEX
	blobs  *httpsrc.Store
	auth   *auth
	// members are the files of tar layers (not in files)
	members map[string]member
	inflate *backing.InflateCache
	decoded []backing.Source      // the compressed tar layers, decoded (Close)
	files   map[string]Descriptor // file path -> its layer
	names   []string              // sorted
	// whole are the uncompressed tar layers' blobs and the config blob,
	// each a file of its own under a key no file path can be
	// (WholeBlobs).
	whole map[string]Descriptor
}

var (
	_ remote.Store    = (*Store)(nil)
	_ remote.Digester = (*Store)(nil)
)

// Open reads the manifest of source and returns the store of its
// files; key is the directory that holds them all ("" for the top, else
// a key ending in '/').
func Open(ctx context.Context, source string, opts Options) (*Store, string, error) {
	ref, err := ParseRef(source)
	if err != nil {
		return nil, "", err
	}
	scheme := "https"
	if isLoopback(ref.Host) || opts.Insecure {
		scheme = "http"
	}
	base := &url.URL{Scheme: scheme, Host: ref.Host}
	c := &http.Client{Timeout: 60 * time.Second, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return fmt.Errorf("stopped after %d redirects", len(via))
		}
		if req.URL.Scheme != "https" && !(req.URL.Scheme == "http" && scheme == "http") {
			return fmt.Errorf("a redirect to a %s:// URL, refused", req.URL.Scheme)
		}
		req.Header.Del("Referer")
		return nil
	}}
	name := Prefix + ref.Host + "/" + ref.Repo
	searched := authFiles()
	cred, err := lookupCredential(searched, ref.Host, ref.Repo)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %v", name, err)
	}
	a := &auth{c: c, host: ref.Host, repo: ref.Repo, plain: scheme == "http", cred: cred, files: searched}
	m, digest, err := getManifest(ctx, c, a, base, ref, ref.Reference, name)
	if err != nil {
		return nil, "", err
	}
	pinned := name + "@" + digest
	if len(m.Manifests) > 0 || m.MediaType == mediaOCIIndex || m.MediaType == mediaDockerList {
		child, err := pickChild(pinned, m)
		if err != nil {
			return nil, "", err
		}
		m, digest, err = getManifest(ctx, c, a, base, ref, child, name)
		if err != nil {
			return nil, "", err
		}
		if len(m.Manifests) > 0 {
			return nil, "", fmt.Errorf("%s: index %s names another index (%s): one level is read", name, pinned, digest)
		}
		pinned = name + "@" + digest
	}
	files, tars, err := artifactFiles(pinned, m)
	if err != nil {
		return nil, "", err
	}
	// A registry that gave the manifest without a token serves its
	// blobs through --proxy's tier; one that wanted a token or a
	// password gets it with every blob request, directly, and a
	// redirect away from its host (to its storage: S3, a CDN) goes
	// without it, through the tier (httpsrc.Options.Authorization).
	var authz func() string
	if a.get() != "" {
		authz = a.get
	}
	blobs, _, err := httpsrc.NewWith(&url.URL{Scheme: scheme, Host: ref.Host, Path: "/"}, httpsrc.Options{Proxy: opts.Proxy, ProxyTerminatesTLS: opts.ProxyTerminatesTLS, Logf: opts.Logf, Authorization: authz})
	if err != nil {
		return nil, "", err
	}
	s := &Store{ref: ref, pinned: pinned, blobs: blobs, files: files, auth: a, members: map[string]member{}, inflate: opts.Inflate, whole: map[string]Descriptor{}}
	if s.inflate == nil {
		s.inflate = backing.DefaultInflateCache()
	}
	for i, l := range tars {
		where := fmt.Sprintf("%s: tar layer %d (%s)", pinned, i, l.MediaType)
		var ms map[string]member
		if l.MediaType == MediaWeightTar || l.MediaType == MediaConfigTar {
			ms, err = s.readTar(ctx, where, l)
			s.whole[wholeKey(l)] = l
		} else {
			ms, err = s.readCompressedTar(ctx, where, l)
		}
		if err != nil {
			s.Close()
			return nil, "", err
		}
		for p, m := range ms {
			if _, dup := files[p]; dup {
				s.Close()
				return nil, "", fmt.Errorf("%s: tar entry %q of layer %s is also a layer's file", pinned, index.Printable(p), l.Digest)
			}
			if _, dup := s.members[p]; dup {
				s.Close()
				return nil, "", fmt.Errorf("%s: tar entry %q of layer %s is also in another tar layer", pinned, index.Printable(p), l.Digest)
			}
			s.members[p] = m
		}
	}
	if validDigest(m.Config.Digest) && m.Config.Size >= 0 {
		// The artifact's config blob: no file, but a blob of it.
		s.whole[wholeKey(m.Config)] = m.Config
	}
	for p := range files {
		s.names = append(s.names, p)
	}
	for p := range s.members {
		s.names = append(s.names, p)
	}
	sort.Strings(s.names)
	return s, commonDir(s.names), nil
}

// commonDir is the directory ("d/", or "") that holds every path.
func commonDir(names []string) string {
	if len(names) == 0 {
		return ""
	}
	dir := path.Dir(names[0])
	for _, n := range names[1:] {
		for dir != "." && !strings.HasPrefix(n, dir+"/") {
			dir = path.Dir(dir)
		}
	}
	if dir == "." {
		return ""
	}
	return dir + "/"
}

// Pinned is the artifact's name pinned to its manifest's digest.
func (s *Store) Pinned() string { return s.pinned }

// Files are the artifact's file paths, sorted.
func (s *Store) Files() []string { return s.names }

// pickChild picks the one artifact manifest of an index.
func pickChild(pinned string, m *manifest) (string, error) {
	var ds []string
	nested := 0 // indexes named: not followed
	for _, d := range m.Manifests {
		if d.MediaType == mediaOCIIndex || d.MediaType == mediaDockerList {
			nested++
		}
		if d.MediaType == mediaOCIManifest || d.MediaType == mediaDockerV2 {
			if !validDigest(d.Digest) {
				return "", fmt.Errorf("%s: index names manifest digest %q, not sha256:HEX", pinned, index.Printable(d.Digest))
			}
			ds = append(ds, d.Digest)
		}
	}
	switch len(ds) {
	case 0:
		if nested > 0 {
			return "", fmt.Errorf("%s: the index names no manifest, only other indexes (%d): one level is read", pinned, nested)
		}
		return "", fmt.Errorf("%s: the index names no manifest", pinned)
	case 1:
		return ds[0], nil
	}
	return "", fmt.Errorf("%s: the index names %d manifests (%s...): name one with @DIGEST", pinned, len(ds), ds[0])
}

// manifestRetries is how many times a manifest GET answered 429 or a
// 5xx is asked again before its status is the error.
const manifestRetries = 4

// retryable reports whether an answer of status is worth asking again:
// a registry throttling (429) or unavailable for a while (500, 502, 503,
// 504), not one that refuses (4xx) or does not implement (501).
func retryable(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// busyWait is the wait before asking again after the n-th (from 0)
// busy answer: its Retry-After in seconds when it gives one of at most
// 10 s, else 250 ms doubled each time (at most 2 s; about 4 s for all).
// again is false for a Retry-After of more than 10 s (or a date): the
// registry says it is not worth waiting here.
func busyWait(retryAfter string, n int) (wait time.Duration, again bool) {
	backoff := min(250*time.Millisecond<<n, 2*time.Second)
	if retryAfter = strings.TrimSpace(retryAfter); retryAfter == "" {
		return backoff, true
	}
	sec, err := strconv.Atoi(retryAfter)
	if err != nil || sec < 0 || sec > 10 {
		return 0, false
	}
	return time.Duration(sec) * time.Second, true
}

// getManifest GETs the manifest reference of ref's repository, within
// MaxManifest bytes, and checks its digest: against reference when that
// is a digest, else against the registry's Docker-Content-Digest when it
// gives one.
func getManifest(ctx context.Context, c *http.Client, a *auth, base *url.URL, ref Ref, reference, name string) (*manifest, string, error) {
	u := *base
	u.Path = "/v2/" + ref.Repo + "/manifests/" + reference
	where := name + ":" + reference
	if validDigest(reference) {
		where = name + "@" + reference
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %v", where, err)
	}
	req.Header.Set("Accept", strings.Join([]string{mediaOCIManifest, mediaOCIIndex, mediaDockerV2, mediaDockerList}, ", "))
	var resp *http.Response
	unauthorized, busy := 0, 0
	for {
		if h := a.get(); h != "" {
			req.Header.Set("Authorization", h)
		}
		resp, err = c.Do(req)
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			return nil, "", fmt.Errorf("%s: reading the manifest: %v", where, err)
		}
		wait, again := busyWait(resp.Header.Get("Retry-After"), busy)
		if retryable(resp.StatusCode) && busy < manifestRetries && again {
			// Throttled (429) or unavailable (5xx): asked again after
			// a wait, as the blobs' GETs are (backing/remote's retry).
			resp.Body.Close()
			busy++
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, "", fmt.Errorf("%s: reading the manifest: HTTP %d %s, then %v", where, resp.StatusCode, http.StatusText(resp.StatusCode), ctx.Err())
			case <-t.C:
			}
			continue
		}
		if resp.StatusCode != http.StatusUnauthorized {
			break
		}
		resp.Body.Close()
		if unauthorized++; unauthorized > 1 {
			switch h := a.get(); {
			case strings.HasPrefix(h, "Basic "):
				return nil, "", fmt.Errorf("%s: the registry refused %s (HTTP 401)", where, a.cred.describe(ref.Host))
			case a.cred.usable() && a.cred.helper == "":
				return nil, "", fmt.Errorf("%s: the registry refused the token its realm gave for %s (HTTP 401 again)", where, a.cred.describe(ref.Host))
			}
			return nil, "", fmt.Errorf("%s: the registry refused the token its realm gave (HTTP 401 again): anonymous pulls may not be allowed", where)
		}
		if err := a.challenge(resp.Header.Get("WWW-Authenticate")); err != nil {
			return nil, "", fmt.Errorf("%s: %v", where, err)
		}
		if a.realm == nil {
			continue // Basic: the header is set
		}
		if err := a.fetch(ctx); err != nil {
			return nil, "", fmt.Errorf("%s: %v", where, err)
		}
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, "", fmt.Errorf("%s: no such manifest (HTTP 404)", where)
	case resp.StatusCode != http.StatusOK:
		var why string
		if ra := resp.Header.Get("Retry-After"); ra != "" && retryable(resp.StatusCode) {
			why = fmt.Sprintf(" (Retry-After: %s)", trim(ra))
		}
		if busy > 0 {
			why += fmt.Sprintf(", asked %d times", busy+1)
		}
		return nil, "", fmt.Errorf("%s: reading the manifest: HTTP %d %s%s", where, resp.StatusCode, http.StatusText(resp.StatusCode), why)
	}
	if resp.ContentLength > MaxManifest {
		return nil, "", fmt.Errorf("%s: the manifest is %d bytes, over the budget of %d", where, resp.ContentLength, MaxManifest)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxManifest+1))
	if err != nil {
		return nil, "", fmt.Errorf("%s: reading the manifest: %v", where, err)
	}
	if len(b) > MaxManifest {
		return nil, "", fmt.Errorf("%s: the manifest is over the budget of %d bytes", where, MaxManifest)
	}
	sum := sha256.Sum256(b)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	if validDigest(reference) && digest != reference {
		return nil, "", fmt.Errorf("%s: the registry answered a manifest of digest %s, not the one asked for", where, digest)
	}
	if dcd := resp.Header.Get("Docker-Content-Digest"); dcd != "" && dcd != digest {
		return nil, "", fmt.Errorf("%s: the manifest's bytes have digest %s, the registry says %s (Docker-Content-Digest)", where, digest, index.Printable(dcd))
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, "", fmt.Errorf("%s: the manifest is not JSON: %v", where, err)
	}
	if m.SchemaVersion != 2 {
		return nil, "", fmt.Errorf("%s: manifest schemaVersion %d, want 2", where, m.SchemaVersion)
	}
	if len(m.Layers) > maxLayers || len(m.Manifests) > maxLayers {
		return nil, "", fmt.Errorf("%s: the manifest names over %d layers", where, maxLayers)
	}
	return &m, digest, nil
}

// artifactFiles are the files of a ModelPack or Docker Model Runner
// manifest, by path.
func artifactFiles(pinned string, m *manifest) (map[string]Descriptor, []Descriptor, error) {
	files := map[string]Descriptor{}
	var tars []Descriptor
	weights := 0
	// Docker Model Runner layers of one type and no name: one is
	// model.EXT, several are model-DIGEST12.EXT.
	unnamed := map[string]int{}
	for _, l := range m.Layers {
		if (l.MediaType == MediaDockerGGUF || l.MediaType == MediaDockerST) && l.Annotations[annFilepath] == "" && l.Annotations[annFilepathOld] == "" && l.Annotations[annTitle] == "" {
			unnamed[l.MediaType]++
		}
	}
	for i, l := range m.Layers {
		where := fmt.Sprintf("%s: layer %d (%s)", pinned, i, index.Printable(l.MediaType))
		var def string
		switch mt := l.MediaType; {
		case mt == MediaWeightRaw:
			weights++
		case mt == MediaConfigRaw:
		case mt == MediaDockerGGUF:
			weights++
			def = "model.gguf"
		case mt == MediaDockerST:
			weights++
			def = "model.safetensors"
		case tarMedia[mt]:
			if !validDigest(l.Digest) || l.Size < 0 {
				return nil, nil, fmt.Errorf("%s: digest %q or size %d is not valid", where, index.Printable(l.Digest), l.Size)
			}
			if !strings.Contains(mt, ".config.") {
				weights++
			}
			tars = append(tars, l)
			continue
		case strings.HasPrefix(mt, "application/vnd.cncf.model.weight.") && strings.Contains(mt, ".tar+"):
			return nil, nil, fmt.Errorf("%s: a tar layer compressed otherwise than gzip or zstd is not read (%s, %s and their .tar, .tar+gzip and .tar+zstd layers are)", where, MediaWeightRaw, MediaConfigRaw)
		default:
			continue // docs, code, datasets, licenses, templates: not the model's files
		}
		if !validDigest(l.Digest) {
			return nil, nil, fmt.Errorf("%s: digest %q is not sha256:HEX", where, index.Printable(l.Digest))
		}
		if l.Size < 0 {
			return nil, nil, fmt.Errorf("%s: size %d", where, l.Size)
		}
		p := l.Annotations[annFilepath]
		if p == "" {
			p = l.Annotations[annFilepathOld]
		}
		if p == "" {
			p = l.Annotations[annTitle]
		}
		if p == "" {
			if def == "" {
				return nil, nil, fmt.Errorf("%s: no file path (annotation %s, %s or %s)", where, annFilepath, annFilepathOld, annTitle)
			}
			if unnamed[l.MediaType] > 1 {
				def = fmt.Sprintf("%s-%s%s", strings.TrimSuffix(def, path.Ext(def)), l.Digest[7:19], path.Ext(def))
			}
			p = def
		}
		if err := checkPath(p); err != nil {
			return nil, nil, fmt.Errorf("%s: file path %q %v", where, index.Printable(p), err)
		}
		if d, dup := files[p]; dup && d.Digest != l.Digest {
			return nil, nil, fmt.Errorf("%s: file path %q is also layer %s's", where, index.Printable(p), d.Digest)
		}
		files[p] = l
	}
	if weights == 0 {
		return nil, nil, fmt.Errorf("%s: no weight layer (%s, %s or %s): not a ModelPack or Docker Model Runner model", pinned, MediaWeightRaw, MediaDockerGGUF, MediaDockerST)
	}
	// A file may not be a directory of another.
	for p := range files {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if _, ok := files[d]; ok {
				return nil, nil, fmt.Errorf("%s: file path %q is under file %q", pinned, index.Printable(p), index.Printable(d))
			}
		}
	}
	return files, tars, nil
}

// checkPath refuses a layer path that is not a clean relative path in
// the tree.
func checkPath(p string) error {
	switch {
	case strings.HasPrefix(p, "/"):
		return errors.New("is absolute")
	case strings.ContainsAny(p, "\\\x00"):
		return errors.New("holds a backslash or NUL")
	}
	for _, c := range strings.Split(p, "/") {
		switch c {
		case "..":
			return errors.New("escapes the tree (..)")
		case "", ".":
			return errors.New("is not a clean path")
		}
	}
	return nil
}

// blobKey is the key of a file's blob in the blob store.
func (s *Store) blobKey(d Descriptor) string {
	return "v2/" + s.ref.Repo + "/blobs/" + d.Digest
}

// URL names a file: the pinned artifact and its path (a whole blob:
// PINNED/blobs/sha256:HEX).
func (s *Store) URL(key string) string {
	if strings.HasPrefix(key, "/") {
		return s.pinned + key
	}
	return s.pinned + "/" + key
}

// wholeKey is the key of tar layer l's blob read whole: "/blobs/" and
// its digest, absolute, as no file path is (checkPath).
func wholeKey(l Descriptor) string { return "/blobs/" + l.Digest }

// WholeBlobs are the keys of the artifact's blobs whose bytes no file
// covers whole: the uncompressed tar layers' (their tar headers and the
// padding between files are in no file) and the manifest's config blob,
// sorted. Each opens and reads as a file does, its SHA256 its digest,
// named (URL) PINNED/blobs/sha256:HEX; List lists none of them. check
// --data hashes them, so that every blob of the artifact is checked
// against its digest (a raw layer as its file; a .tar+gzip or .tar+zstd
// layer's digest is checked as Open decodes it).
func (s *Store) WholeBlobs() []string {
	keys := make([]string, 0, len(s.whole))
	for k := range s.whole {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// file is the layer whose blob is key's bytes: a file's, or a whole
// blob's (WholeBlobs).
func (s *Store) file(key string) (Descriptor, bool) {
	if d, ok := s.files[key]; ok {
		return d, true
	}
	d, ok := s.whole[key]
	return d, ok
}

// Origin is the registry and repository (blobs are digest-addressed).
func (s *Store) Origin() string { return s.blobs.Origin() + "/" + s.ref.Repo }

// SHA256 is the file's layer digest.
func (s *Store) SHA256(key string) (string, bool) {
	d, ok := s.file(key)
	if !ok {
		return "", false
	}
	return d.Digest[len("sha256:"):], true
}

// Open opens a file's blob and checks its size against the manifest's.
func (s *Store) Open(ctx context.Context, key string, head []byte) (remote.Object, int, error) {
	if m, ok := s.members[key]; ok {
		return s.openMember(ctx, key, m, head)
	}
	d, ok := s.file(key)
	if !ok {
		return remote.Object{}, 0, &remote.Error{URL: s.URL(key), Kind: remote.NotFound, Msg: "no such file in the artifact"}
	}
	obj, n, err := s.blobs.Open(ctx, s.blobKey(d), head)
	if err != nil && s.auth.retry(ctx, err) {
		obj, n, err = s.blobs.Open(ctx, s.blobKey(d), head)
	}
	if err != nil {
		return remote.Object{}, 0, s.fileError(key, d, err)
	}
	if obj.Size != d.Size {
		return remote.Object{}, 0, &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Msg: fmt.Sprintf("the registry's blob %s is %d bytes, the manifest says %d", d.Digest, obj.Size, d.Size)}
	}
	obj.Key = key
	return obj, n, nil
}

// Get reads a file's blob.
func (s *Store) Get(ctx context.Context, obj remote.Object, off int64, bufs [][]byte, filled func(i int)) error {
	d, ok := s.file(obj.Key)
	if m, isM := s.members[obj.Key]; isM {
		if m.dec != nil {
			return s.getDecoded(obj.Key, m, off, bufs, filled)
		}
		d, ok = m.layer, true
		off += m.off
		obj.Size = m.layer.Size
	}
	if !ok {
		return &remote.Error{URL: s.URL(obj.Key), Kind: remote.NotFound, Msg: "no such file in the artifact"}
	}
	key := obj.Key
	obj.Key = s.blobKey(d)
	err := s.blobs.Get(ctx, obj, off, bufs, filled)
	if err != nil && s.auth.retry(ctx, err) {
		err = s.blobs.Get(ctx, obj, off, bufs, filled)
	}
	return s.fileError(key, d, err)
}

// fileError is the error of a request for the blob of key's layer d,
// named by the file (as the store's every error and its Source are),
// with the blob's digest, rather than by the blob's URL on the
// registry: a read's error names its file once.
func (s *Store) fileError(key string, d Descriptor, err error) error {
	e, ok := err.(*remote.Error)
	if !ok {
		return err
	}
	c := *e
	c.URL = s.URL(key)
	msg := c.Msg
	if msg == "" && c.Err != nil {
		msg = c.Err.Error()
	}
	c.Msg = "blob " + d.Digest + ": " + msg
	return &c
}

// List lists the files directly under prefix.
func (s *Store) List(ctx context.Context, prefix string) ([]remote.Entry, bool, error) {
	var out []remote.Entry
	any := false
	for _, p := range s.names {
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok {
			continue
		}
		any = true
		if !strings.Contains(rest, "/") {
			size := s.files[p].Size
			if m, ok := s.members[p]; ok {
				size = m.size
			}
			out = append(out, remote.Entry{Name: rest, Size: size})
		}
	}
	return out, any, nil
}

// openMember opens a tar layer's file: its blob's identity, with the
// member's size, and its first bytes.
func (s *Store) openMember(ctx context.Context, key string, m member, head []byte) (remote.Object, int, error) {
	if m.dec != nil {
		return s.openDecoded(key, m, head)
	}
	obj, _, err := s.blobs.Open(ctx, s.blobKey(m.layer), nil)
	if err != nil && s.auth.retry(ctx, err) {
		obj, _, err = s.blobs.Open(ctx, s.blobKey(m.layer), nil)
	}
	if err != nil {
		return remote.Object{}, 0, s.fileError(key, m.layer, err)
	}
	if obj.Size != m.layer.Size {
		return remote.Object{}, 0, &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Msg: fmt.Sprintf("the registry's blob %s is %d bytes, the manifest says %d", m.layer.Digest, obj.Size, m.layer.Size)}
	}
	n := int(min(int64(len(head)), m.size))
	if n > 0 {
		if err := s.Get(ctx, remote.Object{Key: key, Size: m.size, ETag: obj.ETag, LastModified: obj.LastModified}, 0, [][]byte{head[:n]}, nil); err != nil {
			return remote.Object{}, 0, err
		}
	}
	obj.Key, obj.Size = key, m.size
	return obj, n, nil
}
