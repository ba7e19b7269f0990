package hf

// This file: the Hub's API: its errors (X-Error-Code), the revision resolved to a sha, the tree listed across pages.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/lazyweights/tensorfs/backing/remote"
)

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
	var sha, why string
	var files map[string]fileInfo
	var err error
	if s.offline {
		why = whyOffline
		sha, files, err = s.fromCache(why, "")
	} else {
		if sha, err = s.resolveRevision(ctx); err == nil {
			files, err = s.listTree(ctx, sha)
		}
		if err != nil && unreachable(ctx, err) {
			// As huggingface_hub does: the snapshot in the HF cache,
			// when there is one, rather than no model.
			csha, cfiles, cerr := s.fromCache(whyUnreachable, sha)
			if cerr != nil {
				return withHint(err)
			}
			why, sha, files, err = whyUnreachable+" ("+errMsg(err)+")", csha, cfiles, nil
		}
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	first := s.files == nil
	if first {
		s.sha, s.files, s.cacheWhy = sha, files, why
	}
	s.mu.Unlock()
	if first && why != "" && !s.offline {
		s.logf("tensorfs: %s: %s; reading its snapshot %s from the HF cache (%s), as HF_HUB_OFFLINE=1 would", s.URL(""), why, sha, filepath.Join(s.cacheDir, "snapshots", sha))
	}
	return nil
}

// unreachable reports whether err says that the Hub could not be
// reached at all (no network, DNS, a refused or reset connection), not
// that it answered, nor that ctx ended.
func unreachable(ctx context.Context, err error) bool {
	var re *remote.Error
	return ctx.Err() == nil && errors.As(err, &re) && re.Status == 0 && re.Err != nil && remote.NetworkError(re.Err)
}

// errMsg is the message of err's *remote.Error, without its URL.
func errMsg(err error) string {
	var re *remote.Error
	if errors.As(err, &re) && re.Msg != "" {
		return re.Msg
	}
	return err.Error()
}

// withHint adds to the error of a Hub that cannot be reached what to do
// about it.
func withHint(err error) error {
	var re *remote.Error
	if !errors.As(err, &re) {
		return err
	}
	e := *re
	e.Msg += "; the Hub cannot be reached: with no network, HF_HUB_OFFLINE=1 reads the HF cache only (and --remote-timeout bounds the wait)"
	return &e
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
	// A listing whose pages never end is one line at once, not a
	// request storm until the deadline: a page asked for twice, or a
	// page with a next one that gives no entry an earlier page did not
	// (so there are never more pages than entries).
	seen := map[string]int{} // page URL -> its number
	paths := map[string]bool{}
	for n := 1; next != ""; n++ {
		if m, ok := seen[next]; ok {
			return nil, &remote.Error{URL: s.URL(""), Kind: remote.Invalid, Msg: fmt.Sprintf("the Hub's tree listing loops: page %d's next page (Link: rel=\"next\") is page %d again (%s)", n-1, m, remote.RedactURL(next))}
		}
		seen[next] = n
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
		fresh := 0
		for _, e := range page {
			if k := e.Type + "\x00" + e.Path; !paths[k] {
				paths[k] = true
				fresh++
			}
			if e.Type != "file" {
				continue
			}
			fi := fileInfo{size: e.Size, etag: e.OID}
			if e.LFS != nil {
				fi = fileInfo{size: e.LFS.Size, etag: e.LFS.OID, sha256: e.LFS.OID}
			}
			files[e.Path] = fi
		}
		if len(paths) > maxTreeEntries {
			return nil, &remote.Error{URL: s.URL(""), Kind: remote.Invalid, Msg: fmt.Sprintf("the Hub's tree holds more than %d entries", maxTreeEntries)}
		}
		next = nextLink(resp.Header.Values("Link"))
		if next != "" && fresh == 0 {
			return nil, &remote.Error{URL: s.URL(""), Kind: remote.Invalid, Msg: fmt.Sprintf("the Hub's tree listing does not end: page %d gives no entry that earlier pages did not (%d entries in all) and names a next page (Link: rel=\"next\")", n, len(paths))}
		}
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
