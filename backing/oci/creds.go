package oci

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// maxConfig is the byte budget of a credentials file: a larger one is
// refused in one line, nothing past it read.
const maxConfig = 1 << 20

// credential is a registry's credential from an auth file, or the name
// of the credential helper that file leaves it to.
type credential struct {
	file     string // where it was found
	user     string
	pass     string
	identity string // identitytoken: an OAuth2 refresh token for the realm
	helper   string // docker-credential-NAME, not run
}

// usable reports whether c holds a secret to send.
func (c *credential) usable() bool {
	return c != nil && (c.identity != "" || c.user != "" || c.pass != "")
}

// authFiles are the files searched for credentials, in order, as podman
// and skopeo ($REGISTRY_AUTH_FILE) and docker ($DOCKER_CONFIG, else
// ~/.docker) look them up; a file that is not there is passed over.
func authFiles() []string {
	var out []string
	if f := os.Getenv("REGISTRY_AUTH_FILE"); f != "" {
		out = append(out, f)
	}
	if d := os.Getenv("DOCKER_CONFIG"); d != "" {
		out = append(out, filepath.Join(d, "config.json"))
	} else if h, err := os.UserHomeDir(); err == nil {
		out = append(out, filepath.Join(h, ".docker", "config.json"))
	}
	return out
}

// authEntry is one value of a file's "auths" map.
type authEntry struct {
	Auth          string `json:"auth"`
	Username      string `json:"username"`
	Password      string `json:"password"`
	IdentityToken string `json:"identitytoken"`
}

type authFile struct {
	Auths       map[string]authEntry `json:"auths"`
	CredsStore  string               `json:"credsStore"`
	CredHelpers map[string]string    `json:"credHelpers"`
}

// normalHost is the registry host an auths or credHelpers key names,
// as docker and containers/image compare them: a URL key
// ("https://HOST/v1/") is its host; Docker Hub's names are one.
func normalHost(key string) string {
	s := strings.TrimPrefix(strings.TrimPrefix(key, "http://"), "https://")
	if s != key {
		s, _, _ = strings.Cut(s, "/")
	}
	switch s {
	case "docker.io", "index.docker.io", "registry-1.docker.io":
		return "docker.io"
	}
	return s
}

// lookupCredential finds the credential for repository repo on host
// in the auth files: the first file with an entry (or a helper) for
// it wins. In a file, a key naming the repository or a namespace of it
// ("HOST/NS/REPO", "HOST/NS": containers-auth.json) is preferred to the
// host's. nil when no file names the host; an error naming the file for
// one that cannot be read or parsed.
func lookupCredential(files []string, host, repo string) (*credential, error) {
	for _, f := range files {
		af, err := readAuthFile(f)
		if err != nil {
			return nil, err
		}
		if af == nil {
			continue
		}
		if c, err := af.find(f, host, repo); c != nil || err != nil {
			return c, err
		}
	}
	return nil, nil
}

// readAuthFile reads and parses f within maxConfig bytes; nil, nil when
// it is not there.
func readAuthFile(f string) (*authFile, error) {
	fh, err := os.Open(f)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("registry credentials %s: %v", f, errors.Unwrap(err))
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, maxConfig+1))
	if err != nil {
		return nil, fmt.Errorf("registry credentials %s: %v", f, err)
	}
	if len(b) > maxConfig {
		return nil, fmt.Errorf("registry credentials %s: the file is over the budget of %d bytes", f, maxConfig)
	}
	var af authFile
	if err := json.Unmarshal(b, &af); err != nil {
		// The decoder's own message may quote the file's text (a
		// secret): say only where.
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return nil, fmt.Errorf("registry credentials %s: not JSON (syntax error at byte %d)", f, se.Offset)
		case errors.As(err, &te):
			return nil, fmt.Errorf("registry credentials %s: field %q is a JSON %s, want a %s", f, te.Field, te.Value, te.Type)
		}
		return nil, fmt.Errorf("registry credentials %s: not JSON", f)
	}
	return &af, nil
}

// find is the file's credential for host/repo.
func (af *authFile) find(file, host, repo string) (*credential, error) {
	want := normalHost(host)
	var key string
	var e authEntry
	found := false
	// The most specific key first: HOST/NS/REPO, HOST/NS, …, HOST.
	for name := host + "/" + repo; ; {
		if v, ok := af.Auths[name]; ok {
			key, e, found = name, v, true
			break
		}
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			break
		}
		name = name[:i]
	}
	if !found {
		// Then any key that names the host (a URL, a Docker Hub alias).
		// Sorted, so that two keys for one host give the same answer
		// every run.
		keys := make([]string, 0, len(af.Auths))
		for k := range af.Auths {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if normalHost(k) == want {
				key, e, found = k, af.Auths[k], true
				break
			}
		}
	}
	c := &credential{file: file}
	if found {
		c.identity = e.IdentityToken
		c.user, c.pass = e.Username, e.Password
		if e.Auth != "" {
			dec, err := base64.StdEncoding.DecodeString(e.Auth)
			if err != nil {
				return nil, fmt.Errorf("registry credentials %s: auths[%q].auth is not base64", file, key)
			}
			u, p, ok := strings.Cut(string(dec), ":")
			if !ok {
				return nil, fmt.Errorf("registry credentials %s: auths[%q].auth is not base64 of USER:PASSWORD", file, key)
			}
			c.user, c.pass = u, strings.Trim(p, "\x00")
		}
		if c.usable() {
			return c, nil
		}
	}
	// No secret in the file: a helper holds it (docker writes an empty
	// auths entry beside one).
	for k, h := range af.CredHelpers {
		if normalHost(k) == want && h != "" {
			c.helper = "docker-credential-" + h
			return c, nil
		}
	}
	if af.CredsStore != "" {
		c.helper = "docker-credential-" + af.CredsStore
		return c, nil
	}
	if found {
		return c, nil
	}
	return nil, nil
}

// describe names where the credential is, for messages (never the
// secret).
func (c *credential) describe(host string) string {
	if c.helper != "" {
		return fmt.Sprintf("%s leaves the credential for %s to the credential helper %s, which tensorfs does not run: put it in an auth file ($REGISTRY_AUTH_FILE, e.g. written by podman login or skopeo login --authfile) or use anonymous access", c.file, host, c.helper)
	}
	return fmt.Sprintf("the credential for %s from %s", host, c.file)
}
