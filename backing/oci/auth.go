package oci

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/lazyweights/tensorfs/backing/remote"
)

// maxTokenReply is the byte budget of a token endpoint's answer, and
// maxToken of the token itself.
const (
	maxTokenReply = 64 << 10
	maxToken      = 16 << 10
)

// auth answers a registry's 401 as docker and podman do, with the
// credential of the auth files (creds.go) or none:
//
//   - "WWW-Authenticate: Basic": the credential, to the registry's host
//     only, and only over https or on loopback;
//   - "Bearer realm=…,service=…": a token from the realm (distribution's
//     token spec), fetched with the credential (GET with Basic auth, or
//     a POST of the identity token as an OAuth2 refresh token) only when
//     the realm is https or on loopback, else anonymously; the token is
//     sent to the registry's host only.
//
// A token is fetched once per 401 and the request retried once: never
// a loop. No secret is in any message.
type auth struct {
	c      *http.Client
	host   string // the registry's host[:port]
	repo   string
	plain  bool        // the registry is reached over http
	cred   *credential // nil when no auth file names the host
	files  []string    // the auth files searched, for messages
	mu     sync.Mutex
	header string   // the Authorization sent to the registry, "" before any
	realm  *url.URL // from the last Bearer challenge
	server string   // its service
}

// isLoopback is loopback, replaced by tests that need a server on
// loopback to count as another machine.
var isLoopback = loopback

// get is the current Authorization header, "" before any.
func (a *auth) get() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.header
}

// noCredential is the error for a registry that wants a credential
// this process does not have.
func (a *auth) noCredential(what string) error {
	if a.cred != nil && a.cred.helper != "" {
		return fmt.Errorf("the registry asks for credentials (%s): %s", what, a.cred.describe(a.host))
	}
	files := "no auth file"
	if len(a.files) > 0 {
		files = strings.Join(a.files, ", ")
	}
	return fmt.Errorf("the registry asks for credentials (%s) and none for %s is in %s", what, a.host, files)
}

// parseChallenge parses `Bearer realm="…",service="…",…`.
func parseChallenge(h string) (map[string]string, bool) {
	scheme, rest, _ := strings.Cut(strings.TrimSpace(h), " ")
	if !strings.EqualFold(scheme, "bearer") {
		return nil, false
	}
	out := map[string]string{}
	for rest = strings.TrimSpace(rest); rest != ""; {
		k, v, ok := strings.Cut(rest, "=")
		if !ok {
			return nil, false
		}
		k = strings.ToLower(strings.TrimSpace(k))
		v = strings.TrimSpace(v)
		if strings.HasPrefix(v, `"`) {
			end := strings.IndexByte(v[1:], '"')
			if end < 0 {
				return nil, false
			}
			out[k], rest = v[1:1+end], v[2+end:]
		} else {
			val, r, _ := strings.Cut(v, ",")
			out[k], rest = strings.TrimSpace(val), ","+r
		}
		rest = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), ","))
	}
	return out, out["realm"] != ""
}

// challenge answers a 401's challenge: a Basic one sets the header, a
// Bearer one takes the realm and service for fetch. An error when it
// cannot be answered.
func (a *auth) challenge(h string) error {
	if scheme, _, _ := strings.Cut(strings.TrimSpace(h), " "); strings.EqualFold(scheme, "basic") {
		return a.basic()
	}
	p, ok := parseChallenge(h)
	if !ok {
		return fmt.Errorf("the registry asks for credentials (HTTP 401, WWW-Authenticate %q): only Basic and Bearer token challenges are answered", trim(h))
	}
	u, err := url.Parse(p["realm"])
	if err != nil || u.Host == "" {
		return fmt.Errorf("the registry's token realm %q is not a URL", trim(p["realm"]))
	}
	if u.Scheme != "https" && !(u.Scheme == "http" && a.plain && isLoopback(u.Host)) {
		return fmt.Errorf("the registry's token realm %s is not https (http only on loopback), refused: no credential or token is sent to it", u.Redacted())
	}
	a.mu.Lock()
	a.realm, a.server = u, p["service"]
	a.mu.Unlock()
	return nil
}

// basic answers a Basic challenge with the credential's user and
// password.
func (a *auth) basic() error {
	if a.cred == nil || a.cred.user == "" && a.cred.pass == "" {
		return a.noCredential("HTTP 401, Basic")
	}
	if a.plain && !isLoopback(a.host) {
		return fmt.Errorf("the registry asks for a password (HTTP 401, Basic) over plain http to %s, off loopback: %s is not sent in clear, refused", a.host, a.cred.describe(a.host))
	}
	a.mu.Lock()
	a.header = "Basic " + base64.StdEncoding.EncodeToString([]byte(a.cred.user+":"+a.cred.pass))
	a.realm = nil
	a.mu.Unlock()
	return nil
}

func trim(s string) string {
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

// fetch gets a token from the realm of the last challenge.
func (a *auth) fetch(ctx context.Context) error {
	a.mu.Lock()
	realm, service := a.realm, a.server
	a.mu.Unlock()
	if realm == nil {
		return errors.New("no token realm")
	}
	u := *realm
	q := u.Query()
	if service != "" {
		q.Set("service", service)
	}
	scope := "repository:" + a.repo + ":pull"
	// The credential goes to the realm, which challenge allowed only
	// where it cannot be read on the way (https, or http on loopback).
	cred := a.cred
	if !cred.usable() {
		cred = nil
	}
	var req *http.Request
	var err error
	if cred != nil && cred.identity != "" {
		// docker's OAuth2 flow: the identity token is a refresh token.
		form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {cred.identity}, "client_id": {"tensorfs"}, "scope": {scope}}
		if service != "" {
			form.Set("service", service)
		}
		u.RawQuery = q.Encode()
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, u.String(), strings.NewReader(form.Encode()))
		if err == nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	} else {
		q.Set("scope", scope)
		u.RawQuery = q.Encode()
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err == nil && cred != nil {
			req.SetBasicAuth(cred.user, cred.pass)
		}
	}
	if err != nil {
		return err
	}
	where := "the token realm " + realm.Redacted()
	resp, err := a.c.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("%s: %v", where, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		why := "anonymous pulls refused?"
		switch {
		case cred != nil:
			why = a.cred.describe(a.host) + " was refused"
		case a.cred != nil && a.cred.helper != "":
			why = a.cred.describe(a.host)
		}
		return fmt.Errorf("%s: HTTP %d %s (%s)", where, resp.StatusCode, http.StatusText(resp.StatusCode), why)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenReply+1))
	if err != nil {
		return fmt.Errorf("%s: %v", where, err)
	}
	if len(b) > maxTokenReply {
		return fmt.Errorf("%s: the answer is over the budget of %d bytes", where, maxTokenReply)
	}
	var t struct {
		Token       string `json:"token"`
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return fmt.Errorf("%s: the answer is not JSON: %v", where, err)
	}
	tok := t.Token
	if tok == "" {
		tok = t.AccessToken
	}
	if tok == "" || len(tok) > maxToken || strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
		return fmt.Errorf("%s: no usable token in the answer (empty, over %d bytes, or not printable ASCII)", where, maxToken)
	}
	a.mu.Lock()
	a.header = "Bearer " + tok
	a.mu.Unlock()
	return nil
}

// retry refreshes the token after a blob request was refused with 401,
// when the registry gave a realm: true when the request is worth one
// more try.
func (a *auth) retry(ctx context.Context, err error) bool {
	var re *remote.Error
	if !errors.As(err, &re) || re.Status != http.StatusUnauthorized {
		return false
	}
	a.mu.Lock()
	has := a.realm != nil
	a.mu.Unlock()
	return has && a.fetch(ctx) == nil
}
