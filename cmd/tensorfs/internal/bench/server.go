package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lazyweights/tensorfs/fs"
)

// server is a "tensorfs mount" subprocess.
type server struct {
	cmd    *exec.Cmd
	mnt    string
	log    string
	ready  time.Duration // from starting the process to index.json
	exited chan struct{}
	err    error // Wait's, once exited is closed
}

// startServer mounts b.source at a new mount point with "tensorfs mount"
// and waits until MOUNTPOINT/.tensorfs/index.json exists.
func (b *harness) startServer() (*server, error) {
	return b.start(func(mnt string) []string {
		return append(append([]string{"mount"}, b.mountFlags...), b.source, mnt)
	})
}

// startNull mounts the zero-work server (fs.MountNull) serving files of
// the tensors' paths and sizes, with the request size and readahead of
// b.mountFlags: "tensorfs bench --serve-null MANIFEST MOUNTPOINT FLAGS".
func (b *harness) startNull(ts []tensor) (*server, error) {
	manifest := filepath.Join(b.dir, "null-manifest.tsv")
	var sb strings.Builder
	for _, t := range ts {
		fmt.Fprintf(&sb, "%d\t%s\n", t.size, t.path)
	}
	if err := os.WriteFile(manifest, []byte(sb.String()), 0o644); err != nil {
		return nil, fmt.Errorf("bench: %v", err)
	}
	return b.start(func(mnt string) []string {
		return append([]string{"bench", "--serve-null", manifest, mnt}, b.mountFlags...)
	})
}

// start runs the program with args(mountpoint) and waits for the mount.
func (b *harness) start(argsFor func(mnt string) []string) (*server, error) {
	b.mounts++
	mnt := filepath.Join(b.dir, fmt.Sprintf("mnt%d", b.mounts))
	if err := os.Mkdir(mnt, 0o755); err != nil {
		return nil, fmt.Errorf("bench: %v", err)
	}
	s := &server{mnt: mnt, log: filepath.Join(b.dir, fmt.Sprintf("mount%d.log", b.mounts)), exited: make(chan struct{})}
	logFile, err := os.Create(s.log)
	if err != nil {
		return nil, fmt.Errorf("bench: %v", err)
	}
	defer logFile.Close()
	args := argsFor(mnt)
	s.cmd = exec.Command(b.exe, args...)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: starting %s %s: %v", b.exe, args[0], err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.exited)
	}()
	ready := filepath.Join(mnt, ".tensorfs", "index.json")
	deadline := start.Add(readyTimeout)
	for {
		if _, err := os.Stat(ready); err == nil {
			s.ready = time.Since(start)
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("bench: tensorfs %s exited before the mount was ready (%v): %s", strings.Join(args, " "), s.err, lastLine(s.log))
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) || b.ctx.Err() != nil {
			s.stop()
			if b.ctx.Err() != nil {
				return nil, errors.New("bench: interrupted")
			}
			return nil, fmt.Errorf("bench: the mount was not ready after %v: %s", readyTimeout, lastLine(s.log))
		}
	}
}

// memory returns the server's VmHWM and RssAnon.
func (s *server) memory() (hwm, rssAnon int64) {
	if s == nil || s.cmd.Process == nil {
		return 0, 0
	}
	return readProcStatus(s.cmd.Process.Pid)
}

// cpu returns the CPU time (user + system) the server has used; 0 for nil.
func (s *server) cpu() time.Duration {
	if s == nil {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(string(data[i+1:]))
	// fields[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(fields) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(fields[11], 10, 64)
	st, _ := strconv.ParseInt(fields[12], 10, 64)
	const ticks = 100 // USER_HZ
	return time.Duration(ut+st) * time.Second / ticks
}

// stats reads the server's counters from MOUNTPOINT/.tensorfs/stats.json
// (zero for nil or on error).
func (s *server) stats() fs.Stats {
	var st fs.Stats
	if s == nil {
		return st
	}
	data, err := os.ReadFile(filepath.Join(s.mnt, ".tensorfs", "stats.json"))
	if err == nil {
		json.Unmarshal(data, &st)
	}
	return st
}

// stop unmounts and waits for the server to exit 0.
func (s *server) stop() error {
	if fs.Mounted(s.mnt) {
		if err := fs.Unmount(s.mnt); err != nil {
			s.cmd.Process.Kill()
			<-s.exited
			fs.Unmount(s.mnt)
			return fmt.Errorf("bench: %v", err)
		}
	}
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("bench: the server of %s did not exit after unmounting: %s", s.mnt, lastLine(s.log))
	}
	os.Remove(s.mnt)
	if s.err != nil {
		return fmt.Errorf("bench: the server of %s exited with %v: %s", s.mnt, s.err, lastLine(s.log))
	}
	os.Remove(s.log)
	return nil
}

// readyTimeout bounds the wait for a mount to become ready.
const readyTimeout = 20 * time.Second

// lastLine returns the last line of the server's log.
func lastLine(path string) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if last := lines[len(lines)-1]; last != "" {
		return last
	}
	return "(no output)"
}
