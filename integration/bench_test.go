package integration

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestBenchCommand runs `tensorfs bench` on a small generated checkpoint
// so that the benchmark cannot rot: it must mount, read every way it
// measures, print each row with its ratio, and take its mounts down. It
// checks no speed: the figures are for docs/BENCHMARKS.md.
func TestBenchCommand(t *testing.T) {
	needFUSE(t)
	r := runTensorfs(t, "bench", "--size", "32MiB", "--dir", t.TempDir())
	if r.code != 0 {
		t.Fatalf("tensorfs bench: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, label := range []string{
		"first read, fresh mount",
		"repeat read, same mount",
		".f32 of BF16, output bytes",
		"random 4K-1M reads, fresh mount",
		"mmap and copy, fresh mount",
		"mmap, random 4K-1M, fresh mount",
	} {
		re := regexp.MustCompile(regexp.QuoteMeta(label) + `\s+\S.*?\s(\d+\.\d+)\s+(\d+\.\d+)\s+(\d+\.\d+)\s`)
		m := re.FindStringSubmatch(r.stdout)
		if m == nil {
			t.Errorf("no %q row with GB/s and a ratio in:\n%s", label, r.stdout)
			continue
		}
		// The text rounds to two decimals: on a loaded machine a slow
		// row can print 0.00, so only a negative or unreadable figure is
		// wrong here; --json below checks the unrounded figures.
		for _, v := range m[1:] {
			if f, err := strconv.ParseFloat(v, 64); err != nil || f < 0 {
				t.Errorf("%q row: figure %q is not a figure:\n%s", label, v, r.stdout)
			}
		}
	}

	// Every figure beside the zero-work FUSE server, and the page cache.
	for _, want := range []string{"zero-work FUSE", "page cache growth, fresh mount", "read(2) of every tensor", "mmap of every .npy/ file"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("no %q in:\n%s", want, r.stdout)
		}
	}

	// --json with a mount flag passed through, and a chosen subset: the
	// first and repeat reads, each beside a direct read and the
	// zero-work server.
	r = runTensorfs(t, "bench", "--size", "16MiB", "--phases", "read", "--mount", "--readahead-kb 128", "--json")
	if r.code != 0 {
		t.Fatalf("tensorfs bench --json: exit %d\n%s", r.code, r.stderr)
	}
	var rep struct {
		MountFlags []string `json:"mount_flags"`
		Runs       []struct {
			Rows []struct {
				Name  string  `json:"name"`
				Ratio float64 `json:"ratio"`
				Bytes int64   `json:"bytes"`
			} `json:"rows"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, r.stdout)
	}
	if strings.Join(rep.MountFlags, " ") != "--readahead-kb 128" || len(rep.Runs) != 1 || len(rep.Runs[0].Rows) != 4 {
		t.Fatalf("bench --json: %+v", rep)
	}
	for _, row := range rep.Runs[0].Rows {
		if row.Ratio <= 0 || row.Bytes != 16<<20 {
			t.Errorf("bench --json row %+v", row)
		}
	}

	// The tree measurement, small.
	r = runTensorfs(t, "bench", "--tree", "--tree-tensors", "300", "--tree-size", "1GiB")
	if r.code != 0 {
		t.Fatalf("tensorfs bench --tree: exit %d\n%s", r.code, r.stderr)
	}
	if !regexp.MustCompile(`(?m)^\s+1\s+\d+ ms \|\s+\d+\s+\d+ ms .*\|\s+\d+\s+\d+ ms`).MatchString(r.stdout) {
		t.Errorf("bench --tree output:\n%s", r.stdout)
	}

	// A usage error is exit 2.
	if r := runTensorfs(t, "bench", "--phases", "nonsense"); r.code != 2 {
		t.Errorf("bench --phases nonsense: exit %d, want 2", r.code)
	}
}
