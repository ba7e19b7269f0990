package integration

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// stallServer serves one safetensors file, model.safetensors (a header
// and one 4 MiB tensor "w"), whose ranges from byte 64 KiB on never come:
// the request waits until the client gives up or the test ends. It
// returns the file's URL and a channel that receives a value as each
// stalled request arrives.
func stallServer(t *testing.T) (string, <-chan struct{}) {
	t.Helper()
	hdr := []byte(`{"w":{"dtype":"F32","shape":[1048576],"data_offsets":[0,4194304]}}`)
	for len(hdr)%8 != 0 {
		hdr = append(hdr, ' ')
	}
	data := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	data = append(append(data, hdr...), make([]byte, 4<<20)...)
	stalled := make(chan struct{}, 64)
	quit := make(chan struct{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		var a, b int64
		if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &a, &b); err != nil {
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
			w.Write(data)
			return
		}
		if a >= 64<<10 {
			select {
			case stalled <- struct{}{}:
			default:
			}
			select {
			case <-r.Context().Done():
			case <-quit:
			}
			return
		}
		b = min(b, int64(len(data))-1)
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", a, b, len(data)))
		w.Header().Set("Content-Length", strconv.FormatInt(b-a+1, 10))
		w.WriteHeader(http.StatusPartialContent)
		w.Write(data[a : b+1])
	})}
	go srv.Serve(l)
	t.Cleanup(func() {
		close(quit)
		srv.Close()
	})
	return "http://" + l.Addr().String() + "/model.safetensors", stalled
}

// interruptWithin is how long an interrupted command may take to end:
// generous (it ends in well under a second, but a loaded CI machine can
// stall a process for seconds), and far below the read's deadline
// (--remote-timeout 5m), which it waited for before.
const interruptWithin = time.Minute

// TestRemoteInterruptStalledRead: SIGINT or SIGTERM to convert, load and
// mount while a read waits on a stalled server ends the command at once
// (not at --remote-timeout), says it was interrupted, and leaves nothing
// behind.
func TestRemoteInterruptStalledRead(t *testing.T) {
	src, stalled := stallServer(t)
	flags := []string{"--part-size", "4KiB", "--remote-readahead", "0", "--remote-timeout", "5m"}
	for _, tc := range []struct {
		name string
		args func(dir string) []string
		want string
	}{
		{"convert", func(dir string) []string {
			return append(append([]string{"convert", "--quiet"}, flags...), src, filepath.Join(dir, "out.safetensors"))
		}, "interrupted"},
		{"load", func(string) []string {
			return append(append([]string{"load", "--quiet"}, flags...), src)
		}, "interrupted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(tensorfsBinary(t), tc.args(dir)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-stalled:
			case err := <-done:
				t.Fatalf("exited before reading the tensor: %v %s", err, stderr.String())
			case <-time.After(cmdTimeout):
				cmd.Process.Kill()
				t.Fatal("never read the tensor")
			}
			cmd.Process.Signal(os.Interrupt)
			select {
			case err := <-done:
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), tc.want) {
					t.Fatalf("after SIGINT: %v, stderr %q", err, stderr.String())
				}
			case <-time.After(interruptWithin):
				cmd.Process.Kill()
				<-done
				t.Fatalf("still running %v after SIGINT", interruptWithin)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Fatalf("left behind: %v", ents)
			}
		})
	}

	t.Run("mount", func(t *testing.T) {
		m := mountEnv(t, nil, src, flags...)
		reader := exec.Command("cat", m.Path("w"))
		if err := reader.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			reader.Process.Kill()
			reader.Wait()
		}()
		select {
		case <-stalled:
		case <-time.After(cmdTimeout):
			t.Fatal("the reader never reached the stalled range")
		}
		m.Signal(syscall.SIGTERM)
		if _, err := m.wait(interruptWithin); err != nil {
			t.Fatalf("SIGTERM with a reader waiting on the store: %v", err)
		}
	})
}

// lyingRangeServer serves one safetensors file (a header and one 64 KiB
// tensor "w") whose replies for ranges from byte 4 KiB on carry a
// Content-Range for other bytes than those asked for (and those other
// bytes). It returns the file's URL.
func lyingRangeServer(t *testing.T) string {
	t.Helper()
	hdr := []byte(`{"w":{"dtype":"F32","shape":[16384],"data_offsets":[0,65536]}}`)
	for len(hdr)%8 != 0 {
		hdr = append(hdr, ' ')
	}
	data := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	data = append(append(data, hdr...), pattern(64<<10, 7)...)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		var a, b int64
		if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &a, &b); err != nil {
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
			w.Write(data)
			return
		}
		b = min(b, int64(len(data))-1)
		if a >= 4<<10 {
			a, b = a-1, b-1 // one byte early: the lie
		}
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", a, b, len(data)))
		w.Header().Set("Content-Length", strconv.FormatInt(b-a+1, 10))
		w.WriteHeader(http.StatusPartialContent)
		w.Write(data[a : b+1])
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String() + "/model.safetensors"
}

// TestRemoteLyingContentRange: a read that fails on a Content-Range for
// other bytes than asked is one line, exit 1, naming the URL once, from
// cat, load and convert.
func TestRemoteLyingContentRange(t *testing.T) {
	src := lyingRangeServer(t)
	flags := []string{"--part-size", "4KiB", "--remote-readahead", "0"}
	for _, tc := range []struct {
		name string
		args func(dir string) []string
	}{
		{"cat", func(string) []string { return append(append([]string{"cat"}, flags...), src, "w") }},
		{"load", func(string) []string { return append(append([]string{"load", "--quiet"}, flags...), src) }},
		{"convert", func(dir string) []string {
			return append(append([]string{"convert", "--quiet"}, flags...), src, filepath.Join(dir, "out.safetensors"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runTensorfs(t, tc.args(t.TempDir())...)
			t.Log(r.stderr)
			if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || strings.Count(r.stderr, src) != 1 || !strings.Contains(r.stderr, "Content-Range") {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit 1 and one line naming the URL once and the Content-Range", r.code, r.stderr)
			}
		})
	}
}
