package s3test

import (
	"bytes"
	"context"
	"fmt"
	"go/build"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Credentials of the server's root user.
const (
	AccessKey = "AKTENSORFSTEST"
	SecretKey = "tensorfs-test-secret-do-not-log"
)

// Server is a running versitygw.
type Server struct {
	Endpoint string // http://127.0.0.1:PORT
	Addr     string // 127.0.0.1:PORT
	Dir      string // the posix backend: DIR/BUCKET/KEY
	bin      string
	cmd      *exec.Cmd
	exited   chan struct{} // closed when cmd has been reaped
	log      syncBuffer
}

// Binary finds versitygw: on PATH, or in GOBIN or GOPATH/bin.
func Binary() (string, bool) {
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, true
	}
	for _, dir := range []string{os.Getenv("GOBIN"), filepath.Join(build.Default.GOPATH, "bin")} {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, "versitygw")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, true
		}
	}
	return "", false
}

// Start starts a server with an empty directory, stopped at the end of
// the test.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, ok := Binary()
	if !ok {
		if os.Getenv("CI") != "" {
			t.Fatal("versitygw not found (CI is set): go install github.com/versity/versitygw/cmd/versitygw@v1.8.0")
		}
		t.Skip("versitygw not found: go install github.com/versity/versitygw/cmd/versitygw@v1.8.0")
	}
	dir := t.TempDir()
	// versitygw is given a port that was free a moment ago; another
	// process (a test package running beside this one) can bind it in
	// between, and versitygw then exits saying so: it is started again on
	// another port.
	for try := 1; ; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		s := &Server{Addr: addr, Endpoint: "http://" + addr, Dir: dir, bin: bin}
		err = s.start()
		if err == nil {
			t.Cleanup(s.Stop)
			return s
		}
		if try == 5 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
	}
}

// start runs the server and waits until it accepts connections.
func (s *Server) start() error {
	s.cmd = exec.Command(s.bin, "--port", s.Addr, "posix", s.Dir)
	s.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+AccessKey, "ROOT_SECRET_KEY="+SecretKey)
	s.cmd.Stdout, s.cmd.Stderr = &s.log, &s.log
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("starting versitygw: %v", err)
	}
	exited := make(chan struct{})
	s.exited = exited
	go func(cmd *exec.Cmd) { cmd.Wait(); close(exited) }(s.cmd)
	// Generous: it listens in well under a second, but a loaded CI
	// machine can keep a process off the CPU for seconds.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		c, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("versitygw exited: %s", s.log.String())
		default:
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("versitygw did not listen on %s in 2 minutes: %s", s.Addr, s.log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Stop kills the server and waits for it to exit.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// Restart starts the server again on the same port and directory.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
}

// Env is the AWS configuration that reaches the server, for a
// subprocess: credentials, region, endpoint, and no instance metadata
// lookups (which would leave the machine).
func (s *Server) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + SecretKey,
		"AWS_REGION=us-east-1",
		"AWS_ENDPOINT_URL=" + s.Endpoint,
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null",
	}
}

// Setenv sets Env in this process for the test.
func (s *Server) Setenv(t testing.TB) {
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// Bucket creates a bucket.
func (s *Server) Bucket(t testing.TB, name string) {
	t.Helper()
	if _, err := s.client().CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: &name}); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
}

// Put uploads data as bucket/key (a real PutObject: the object gets its
// ETag).
func (s *Server) Put(t testing.TB, bucket, key string, data []byte) {
	t.Helper()
	_, err := s.client().PutObject(context.Background(), &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data)))})
	if err != nil {
		t.Fatalf("put s3://%s/%s: %v", bucket, key, err)
	}
}

// PutFile uploads a local file.
func (s *Server) PutFile(t testing.TB, bucket, key, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s.Put(t, bucket, key, data)
}

func (s *Server) client() *s3.Client {
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
	})
}

// Port is the server's port.
func (s *Server) Port() int {
	_, p, _ := net.SplitHostPort(s.Addr)
	n, _ := strconv.Atoi(p)
	return n
}

// syncBuffer is the server's log, written by its process and read by
// the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
