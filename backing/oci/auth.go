package oci

import (
	"context"
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

// auth is the registry token flow (distribution's token spec), anonymous:
// a 401 with "WWW-Authenticate: Bearer realm=…,service=…" is answered by
// a GET of realm?service=…&scope=repository:REPO:pull, with no
// credential, and its token is sent to the registry's host only. A token
// is fetched once per 401 and the request retried once: never a loop.
type auth struct {
	c      *http.Client
	repo   string
	plain  bool // the registry is reached over http (loopback)
	mu     sync.Mutex
	token  string
	realm  *url.URL // from the last challenge
	server string   // its service
}

// get is the current token, "" before any.
func (a *auth) get() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.token
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

// challenge takes the realm and service of a 401's challenge; an error
// when it is not one that can be answered.
func (a *auth) challenge(h string) error {
	p, ok := parseChallenge(h)
	if !ok {
		return fmt.Errorf("the registry asks for credentials (HTTP 401, WWW-Authenticate %q): only anonymous pulls with a Bearer token are supported", trim(h))
	}
	u, err := url.Parse(p["realm"])
	if err != nil || u.Host == "" {
		return fmt.Errorf("the registry's token realm %q is not a URL", trim(p["realm"]))
	}
	if u.Scheme != "https" && !(u.Scheme == "http" && a.plain && loopback(u.Host)) {
		return fmt.Errorf("the registry's token realm %s is not https (http only on loopback), refused", u.Redacted())
	}
	a.mu.Lock()
	a.realm, a.server = u, p["service"]
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
	q.Set("scope", "repository:"+a.repo+":pull")
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
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
		return fmt.Errorf("%s: HTTP %d %s (anonymous pulls refused?)", where, resp.StatusCode, http.StatusText(resp.StatusCode))
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
	a.token = tok
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
