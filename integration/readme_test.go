package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/internal/testenv"
)

// readmeMountSnippet returns the README's "Install and use" commands from
// the mount on, with the binary, SOURCE and mount point replaced and the
// python3 line (it needs NumPy and a tensor named lm_head.weight) left
// out.
func readmeMountSnippet(t *testing.T, bin, source, mnt string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(data), "\n## Install and use\n")
	if !ok {
		t.Fatal("README.md has no section \"Install and use\"")
	}
	_, block, _ := strings.Cut(sec, "```sh\n")
	block, _, _ = strings.Cut(block, "```")
	start := strings.Index(block, "./tensorfs mount ")
	if start < 0 {
		t.Fatalf("README's Install and use block has no mount:\n%s", block)
	}
	var lines []string
	for _, l := range strings.Split(block[start:], "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "python3 ") {
			continue
		}
		lines = append(lines, l)
		if f := strings.Fields(l); len(f) > 0 && f[0] == "fi" {
			// The wait and what it guards end here; the lines after
			// it are other examples (an hf:// mount would wait on the
			// network).
			break
		}
	}
	s := strings.Join(lines, "\n")
	s = strings.ReplaceAll(s, "./tensorfs", bin)
	s = strings.ReplaceAll(s, "/mnt/model", mnt)
	return strings.ReplaceAll(s, "model.safetensors", source)
}

// TestReadmeWaitLoop: the README's mount-and-wait snippet, pasted into a
// shell with a SOURCE that fails, ends the wait and leaves the shell
// running (its "|| exit 1" once closed the user's terminal); with a good
// SOURCE it lists the mount and unmounts it.
func TestReadmeWaitLoop(t *testing.T) {
	bin := tensorfsBinary(t)
	mnt := t.TempDir()
	snippet := readmeMountSnippet(t, bin, filepath.Join(t.TempDir(), "missing.safetensors"), mnt)
	r := runCmd(t, nil, "bash", "-c", snippet+"\necho STILL_HERE")
	if !strings.Contains(r.stdout, "STILL_HERE") {
		t.Fatalf("the README snippet with a bad SOURCE ended the shell (exit %d):\n%s\nstderr:\n%s", r.code, snippet, r.stderr)
	}
	if !strings.Contains(r.stderr, "missing.safetensors") {
		t.Errorf("the server's error is not shown: %q", r.stderr)
	}

	needFUSE(t)
	src, _ := cliFixture(t)
	snippet = readmeMountSnippet(t, bin, src, mnt)
	r = runCmd(t, nil, "bash", "-c", snippet+"\necho STILL_HERE")
	if !strings.Contains(r.stdout, "ids") || !strings.Contains(r.stdout, "STILL_HERE") {
		t.Errorf("the README snippet with a good SOURCE: exit %d\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if mountedAt(mnt) {
		t.Errorf("the README snippet left %s mounted", mnt)
	}
}

// TestDemoKeepUmountLine: the unmount command that demo --keep prints
// works as printed, from a shell whose PATH has no tensorfs (it once
// printed "tensorfs umount", not found after go run or a plain build).
func TestDemoKeepUmountLine(t *testing.T) {
	needFUSE(t)
	r := runTensorfs(t, "demo", "--keep")
	if r.code != 0 {
		t.Fatalf("demo --keep: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	_, rest, ok := strings.Cut(r.stdout, "Unmount it and remove the files with:\n")
	line, _, _ := strings.Cut(rest, "\n")
	mnt := regexp.MustCompile(`The demo stays mounted at (\S+) `).FindStringSubmatch(r.stdout)
	if !ok || mnt == nil {
		t.Fatalf("demo --keep does not say how to unmount:\n%s", r.stdout)
	}
	defer exec.Command("fusermount3", "-u", mnt[1]).Run() // if the line fails
	cmd := exec.Command("bash", "-c", strings.TrimSpace(line))
	cmd.Env = append(os.Environ(), "PATH=/usr/sbin:/usr/bin:/sbin:/bin")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("demo --keep's line %q: %v\n%s", line, err, out)
	}
	if mountedAt(mnt[1]) {
		t.Errorf("%s still mounted after %q", mnt[1], line)
	}
}
