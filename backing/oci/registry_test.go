package oci

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/internal/testenv"
)

// pushedRegistry starts docker-registry (no auth), pushes a ModelPack
// artifact of one weight layer as m:t, and returns the store directory
// and the weights.
func pushedRegistry(t *testing.T) (store string, w []byte) {
	t.Helper()
	reg := testenv.StartRegistry(t)
	w = []byte("weights of a private model")
	cfg := testenv.PushBlob(t, reg.Host, "m", "application/vnd.cncf.model.config.v1+json", []byte("{}"), nil)
	l := testenv.PushBlob(t, reg.Host, "m", MediaWeightRaw, w, map[string]string{annFilepath: "model.safetensors"})
	testenv.PushManifest(t, reg.Host, "m", "t", "", cfg, []testenv.OCIDescriptor{l})
	return reg.Store, w
}

func readAll(t *testing.T, s *Store, n int) string {
	t.Helper()
	head := make([]byte, n)
	if _, _, err := s.Open(context.Background(), "model.safetensors", head); err != nil {
		t.Fatalf("Open model.safetensors: %v", err)
	}
	return string(head)
}

// TestRealRegistryBasic: Debian's docker-registry with htpasswd auth
// (testenv.HtpasswdAuth: a bcrypt line from golang.org/x/crypto/bcrypt) serves the
// artifact to the auth file's user, and refuses a wrong password in one
// line that does not hold it.
func TestRealRegistryBasic(t *testing.T) {
	store, w := pushedRegistry(t)
	dir := noAuthFiles(t)
	reg := testenv.StartRegistryWith(t, store, testenv.HtpasswdAuth(t, dir, "alice", "s3cret"))
	src := "oci://" + reg.Host + "/m:t"
	if _, _, err := Open(context.Background(), src, Options{}); err == nil || !strings.Contains(err.Error(), "the registry asks for credentials (HTTP 401, Basic) and none for "+reg.Host) {
		t.Errorf("without a credential: %v", err)
	}
	authFile := writeJSON(t, dir, "auth.json", map[string]any{"auths": map[string]any{reg.Host: map[string]string{"auth": b64("alice:s3cret")}}})
	t.Setenv("REGISTRY_AUTH_FILE", authFile)
	s, _, err := Open(context.Background(), src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s, len(w)); got != string(w) {
		t.Errorf("read %q", got)
	}
	writeJSON(t, dir, "auth.json", map[string]any{"auths": map[string]any{reg.Host: map[string]string{"auth": b64("alice:wrong-pw")}}})
	_, _, err = Open(context.Background(), src, Options{})
	if err == nil || !strings.Contains(err.Error(), "the registry refused the credential for "+reg.Host+" from "+authFile+" (HTTP 401)") || strings.Contains(err.Error(), "wrong-pw") {
		t.Errorf("wrong password: %v", err)
	}
}

// tokenServer is a token endpoint as distribution's token spec
// (docs/spec/auth/token.md) has it: GET ?service=&scope= with Basic
// auth answers a JWT (ES256, its certificate in the x5c header) that
// grants the scope's actions, for alice:s3cret only.
type tokenServer struct {
	key     *ecdsa.PrivateKey
	certDER []byte
	issuer  string
	service string
	mu      sync.Mutex
	asked   []string // each request's Authorization
}

func newTokenServer(t *testing.T, dir string) (*tokenServer, string, *httptest.Server) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "tensorfs test token issuer"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(dir, "root.pem")
	if err := os.WriteFile(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	ts := &tokenServer{key: key, certDER: der, issuer: "tensorfs-test-issuer", service: "tensorfs-test"}
	srv := httptest.NewServer(ts)
	t.Cleanup(srv.Close)
	return ts, bundle, srv
}

func (ts *tokenServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ts.mu.Lock()
	ts.asked = append(ts.asked, r.Header.Get("Authorization"))
	ts.mu.Unlock()
	u, p, ok := r.BasicAuth()
	if !ok || u != "alice" || p != "s3cret" || r.URL.Query().Get("service") != ts.service {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var access []map[string]any
	if typ, rest, ok := strings.Cut(r.URL.Query().Get("scope"), ":"); ok && typ == "repository" {
		if i := strings.LastIndexByte(rest, ':'); i > 0 {
			access = append(access, map[string]any{"type": typ, "name": rest[:i], "actions": strings.Split(rest[i+1:], ",")})
		}
	}
	now := time.Now()
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	header := enc(map[string]any{"typ": "JWT", "alg": "ES256", "x5c": []string{base64.StdEncoding.EncodeToString(ts.certDER)}})
	claims := enc(map[string]any{
		"iss": ts.issuer, "sub": u, "aud": ts.service,
		"exp": now.Add(5 * time.Minute).Unix(), "nbf": now.Add(-time.Minute).Unix(), "iat": now.Unix(),
		"jti": fmt.Sprint(now.UnixNano()), "access": access,
	})
	sum := sha256.Sum256([]byte(header + "." + claims))
	rr, ss, err := ecdsa.Sign(rand.Reader, ts.key, sum[:])
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	sig := make([]byte, 64)
	rr.FillBytes(sig[:32])
	ss.FillBytes(sig[32:])
	json.NewEncoder(w).Encode(map[string]any{"token": header + "." + claims + "." + base64.RawURLEncoding.EncodeToString(sig), "expires_in": 300})
}

// TestRealRegistryToken: Debian's docker-registry with token auth
// (auth: token: with a realm on a loopback token server written from
// distribution's token spec, and its certificate as rootcertbundle)
// serves the artifact with the token the realm gave for the auth
// file's credential; the registry never sees the password.
func TestRealRegistryToken(t *testing.T) {
	store, w := pushedRegistry(t)
	dir := noAuthFiles(t)
	ts, bundle, srv := newTokenServer(t, dir)
	reg := testenv.StartRegistryWith(t, store, fmt.Sprintf("auth:\n  token:\n    realm: %s/token\n    service: %s\n    issuer: %s\n    rootcertbundle: %s\n", srv.URL, ts.service, ts.issuer, bundle))
	src := "oci://" + reg.Host + "/m:t"
	// Anonymous: the realm refuses.
	if _, _, err := Open(context.Background(), src, Options{}); err == nil || !strings.Contains(err.Error(), "HTTP 401 Unauthorized (anonymous pulls refused?)") {
		t.Errorf("anonymous: %v", err)
	}
	writeJSON(t, dir, "config.json", map[string]any{"auths": map[string]any{"http://" + reg.Host + "/v1/": map[string]string{"username": "alice", "password": "s3cret"}}})
	s, _, err := Open(context.Background(), src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s, len(w)); got != string(w) {
		t.Errorf("read %q", got)
	}
	if h := s.auth.get(); !strings.HasPrefix(h, "Bearer ey") {
		t.Errorf("the registry was sent %.12q…, want a token", h)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if len(ts.asked) != 2 || ts.asked[0] != "" || ts.asked[1] != "Basic "+b64("alice:s3cret") {
		t.Errorf("the realm was asked with %q", ts.asked)
	}
}
