package hf

// This file: the hf:// URI grammar and the environment huggingface_hub reads (endpoint, token, cache, offline).

import (
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

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
		if why := badRevision(rev); why != "" {
			// Not rev itself: it may hold a control character.
			return "", "", "", "", bad("the revision " + why + ": a revision is a branch, a tag or a commit sha, never a path")
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

// maxRevision bounds a revision's length (git's refs are path
// components; the Hub's are short).
const maxRevision = 255

// badRevision says why rev cannot be a branch, a tag or a sha, as git's
// check-ref-format rules a ref name: no "..", no component that is
// empty or starts with '.', none ending in ".lock", no control
// character, space or one of ~^:?*[\, not "@" nor holding "@{", not
// ending in '.' or '/'. "" when it can: a name that cannot leave refs/
// of the HF cache, nor be anything but one path in the Hub's API.
func badRevision(rev string) string {
	if len(rev) > maxRevision {
		return fmt.Sprintf("is longer than %d bytes", maxRevision)
	}
	for i := 0; i < len(rev); i++ {
		c := rev[i]
		if c < 0x20 || c == 0x7f || strings.IndexByte(" ~^:?*[\\", c) >= 0 {
			return fmt.Sprintf("holds the byte %#02x", c)
		}
	}
	if rev == "@" || strings.Contains(rev, "@{") {
		return "holds @{ or is @"
	}
	if strings.Contains(rev, "..") {
		return "holds .."
	}
	if strings.HasSuffix(rev, ".") {
		return "ends in ."
	}
	for _, c := range strings.Split(rev, "/") {
		switch {
		case c == "":
			return "has an empty path component (a / at an end, or //)"
		case c[0] == '.':
			return "has a component that starts with ."
		case strings.HasSuffix(c, ".lock"):
			return "has a component that ends in .lock"
		}
	}
	return ""
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

// DefaultEndpoint is the Hub's URL when HF_ENDPOINT is not set.
const DefaultEndpoint = "https://huggingface.co"

// EndpointFromEnv is the Hub's base URL as huggingface_hub reads it:
// HF_ENDPOINT, else DefaultEndpoint.
func EndpointFromEnv() string {
	if ep := os.Getenv("HF_ENDPOINT"); ep != "" {
		return ep
	}
	return DefaultEndpoint
}

// sameOrigin reports whether a and b have the same scheme, host and
// port (the scheme's default port when none is given).
func sameOrigin(a, b *url.URL) bool {
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		return map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(strings.TrimSuffix(a.Hostname(), "."), strings.TrimSuffix(b.Hostname(), ".")) && port(a) == port(b)
}

// OnEndpoint reports whether u is on the Hub: the scheme, host and port
// of EndpointFromEnv. It is the one place the Hub's token goes, whatever
// the URL came from (an hf:// source, an https:// URL): never to another
// host (a subdomain, the CDN), another port, nor over http:// when the
// endpoint is https://.
func OnEndpoint(u *url.URL) bool {
	ep, err := url.Parse(strings.TrimRight(EndpointFromEnv(), "/"))
	return err == nil && ep.Host != "" && sameOrigin(u, ep)
}

// TokenFor is the token for a request to u: TokenFromEnv when u is on
// the Hub (OnEndpoint), else "".
func TokenFor(u *url.URL) string {
	if !OnEndpoint(u) {
		return ""
	}
	return TokenFromEnv()
}

// maxTokenFile bounds the bytes read of a token file.
const maxTokenFile = 64 << 10

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
	b, _, err := readSmall(p, maxTokenFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// HubCacheFromEnv is the HF cache, looked up in llama.cpp's order
// (llama.cpp keeps its -hf downloads there, in huggingface_hub's layout):
// LLAMA_CACHE (llama.cpp's own cache, the one it uses for everything
// when set), else huggingface_hub's: HF_HUB_CACHE (or the older
// HUGGINGFACE_HUB_CACHE), else $HF_HOME/hub.
func HubCacheFromEnv() string {
	if c := HubCachesFromEnv(); len(c) > 0 {
		return c[0]
	}
	return ""
}

// HubCachesFromEnv are the HF caches a repository is looked for in, in
// llama.cpp's order: LLAMA_CACHE when set, then huggingface_hub's (HF_HUB_CACHE,
// HUGGINGFACE_HUB_CACHE, $HF_HOME/hub), so that a model downloaded by
// either tool is found.
func HubCachesFromEnv() []string {
	var out []string
	if c := os.Getenv("LLAMA_CACHE"); c != "" {
		out = append(out, c)
	}
	for _, v := range []string{"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"} {
		if c := os.Getenv(v); c != "" {
			return append(out, c)
		}
	}
	if h := hfHome(); h != "" {
		return append(out, filepath.Join(h, "hub"))
	}
	return out
}

// repoCache is the folder of repository id (kind "models" or
// "datasets") in the first of caches that holds it, else in the first.
func repoCache(caches []string, kind, id string) string {
	for _, c := range caches {
		d := filepath.Join(c, RepoFolderName(kind, id))
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			return d
		}
	}
	if len(caches) == 0 {
		return ""
	}
	return filepath.Join(caches[0], RepoFolderName(kind, id))
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
