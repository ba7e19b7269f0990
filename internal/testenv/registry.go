package testenv

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Registry is Debian's docker-registry (distribution), started on a
// loopback port for a test.
type Registry struct {
	Host  string // 127.0.0.1:PORT
	Store string // its storage directory
}

// StartRegistry starts docker-registry with a temporary store on a
// loopback port, stopped at the test's end; skipped (failed under
// CI=true) where it is not installed.
func StartRegistry(t testing.TB) *Registry {
	t.Helper()
	return StartRegistryWith(t, "", "")
}

// StartRegistryWith is StartRegistry serving the storage directory
// store ("" for a new one; a second registry may serve another's) with
// extra appended to its configuration (an "auth:" section: then /v2/
// answers 401 once it is up).
func StartRegistryWith(t testing.TB, store, extra string) *Registry {
	t.Helper()
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		SkipOrFail(t, "docker-registry is not installed (apt-get install docker-registry)")
	}
	dir := t.TempDir()
	if store == "" {
		store = filepath.Join(dir, "store")
	}
	var lastErr error
	for try := 0; try < 5; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		host := l.Addr().String()
		l.Close()
		cfg := filepath.Join(dir, fmt.Sprintf("config%d.yml", try))
		conf := fmt.Sprintf("version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s\n%s", store, host, extra)
		if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		cmd := exec.Command(bin, "serve", cfg)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		// Ready when /v2/ answers; the wait is bounded by the process
		// exiting (a port taken) or a minute.
		for end := time.Now().Add(time.Minute); time.Now().Before(end); {
			select {
			case err := <-done:
				lastErr = fmt.Errorf("docker-registry exited: %v: %s", err, out.String())
			default:
				resp, err := http.Get("http://" + host + "/v2/")
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK || extra != "" && resp.StatusCode == http.StatusUnauthorized {
						t.Cleanup(func() { cmd.Process.Kill(); <-done })
						return &Registry{Host: host, Store: store}
					}
				}
				time.Sleep(20 * time.Millisecond)
				continue
			}
			break
		}
		if lastErr == nil {
			cmd.Process.Kill()
			<-done
			lastErr = fmt.Errorf("docker-registry did not answer on %s: %s", host, out.String())
		}
	}
	t.Fatal(lastErr)
	return nil
}

// OCIDescriptor is a descriptor of an OCI manifest.
type OCIDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Digest is data's sha256 digest, "sha256:HEX".
func Digest(data []byte) string {
	s := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(s[:])
}

// PushBlob pushes data to repo on the registry at host (the OCI
// distribution spec's monolithic upload: POST, then PUT with the
// digest) and returns its descriptor.
func PushBlob(t testing.TB, host, repo, mediaType string, data []byte, ann map[string]string) OCIDescriptor {
	t.Helper()
	resp, err := http.Post("http://"+host+"/v2/"+repo+"/blobs/uploads/", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST blob upload: HTTP %d", resp.StatusCode)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	loc = resp.Request.URL.ResolveReference(loc)
	q := loc.Query()
	d := Digest(data)
	q.Set("digest", d)
	loc.RawQuery = q.Encode()
	req, _ := http.NewRequest(http.MethodPut, loc.String(), bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT blob %s: HTTP %d", d, resp.StatusCode)
	}
	return OCIDescriptor{MediaType: mediaType, Digest: d, Size: int64(len(data)), Annotations: ann}
}

// PushManifest pushes an OCI image manifest of config and layers as
// repo:tag and returns its bytes' digest.
func PushManifest(t testing.TB, host, repo, tag, artifactType string, config OCIDescriptor, layers []OCIDescriptor) string {
	t.Helper()
	m := map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        config,
		"layers":        layers,
	}
	if artifactType != "" {
		m["artifactType"] = artifactType
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPut, "http://"+host+"/v2/"+repo+"/manifests/"+tag, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		var body bytes.Buffer
		body.ReadFrom(resp.Body)
		t.Fatalf("PUT manifest %s:%s: HTTP %d: %s", repo, tag, resp.StatusCode, body.String())
	}
	return Digest(b)
}

// HtpasswdAuth writes an htpasswd file in dir holding user's bcrypt
// line (made with golang.org/x/crypto/bcrypt) and returns the auth
// section (StartRegistryWith's extra) that makes docker-registry ask
// for it with Basic auth.
func HtpasswdAuth(t testing.TB, dir, user, pass string) string {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(p, []byte(user+":"+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("auth:\n  htpasswd:\n    realm: tensorfs-test\n    path: %s\n", p)
}
