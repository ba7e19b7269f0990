package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/internal/testenv"
)

// copyDir copies the regular files of dir (one level) into a new
// temporary directory, except those named in skip, and returns it.
func copyDir(t *testing.T, dir string, skip ...string) string {
	t.Helper()
	out := t.TempDir()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
next:
	for _, e := range ents {
		for _, s := range skip {
			if e.Name() == s {
				continue next
			}
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// lines are the non-empty lines of out.
func lines(out string) []string {
	var ls []string
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) != "" {
			ls = append(ls, l)
		}
	}
	return ls
}

// TestCheckOneLinePerProblem: a block-FP8 checkpoint missing its second
// shard has 3 problems (the shard; a weight whose codes were in it; a
// weight whose scale was), and check says each once, with --json too
// (it said the two weights twice: the loader's note, then check's line).
func TestCheckOneLinePerProblem(t *testing.T) {
	dir := copyDir(t, testenv.Path(t, "quant/fp8_block"), "model-00002-of-00002.safetensors")
	for _, json := range []bool{false, true} {
		args := []string{"check", dir}
		if json {
			args = []string{"check", "--json", dir}
		}
		out, status := captureRun(t, args...)
		var probs []string
		for _, l := range lines(out) {
			if strings.HasPrefix(l, "tensorfs: ") {
				probs = append(probs, l)
			}
		}
		if status != 1 || len(probs) != 3 {
			t.Errorf("%s: exit %d, %d lines, want 3:\n%s", strings.Join(args, " "), status, len(probs), strings.Join(probs, "\n"))
		}
	}
}

// TestCheckDataBytes: check --data of a block-FP8 checkpoint says the
// bytes it read are the tensors' bytes, and the dequantized weights'
// values apart (it said 717872 bytes read of 154192 bytes of tensors).
func TestCheckDataBytes(t *testing.T) {
	dir := testenv.Path(t, "quant/fp8_block")
	out, status := captureRun(t, "check", "--data", dir)
	if status != 0 || !strings.Contains(out, "154192 bytes of tensors; every byte read (154192 bytes)") || !strings.Contains(out, "3 quantized weights dequantized too, to 563680 bytes of float32 values") {
		t.Errorf("check --data: exit %d:\n%s", status, out)
	}
	// An .npz's stored members are read whole for their CRC-32s: more
	// than the tensors hold, and the line says so.
	npz := testenv.Path(t, "generated/npz_plain.npz")
	if out, status := captureRun(t, "check", "--data", npz); status != 0 || !strings.Contains(out, "every byte read (672 bytes, 4 CRC-32s checked; 512 bytes more than the tensors hold: zip members read whole, headers too, for their CRC-32)") {
		t.Errorf("check --data %s: exit %d:\n%s", npz, status, out)
	}
	out, status = captureRun(t, "check", "--data", "--json", dir)
	var rep struct {
		Bytes int64 `json:"bytes"`
		Data  struct {
			BytesRead        int64 `json:"bytes_read"`
			Dequantized      int   `json:"dequantized_weights"`
			DequantizedBytes int64 `json:"dequantized_bytes"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &rep); status != 0 || err != nil || rep.Data.BytesRead != rep.Bytes || rep.Data.Dequantized != 3 || rep.Data.DequantizedBytes != 563680 {
		t.Errorf("check --data --json: exit %d, %v, %+v:\n%s", status, err, rep, out)
	}
}

// TestLoadSummaryRate: the summary of a small load says its rate in a
// unit it reaches (it said "0.00 GB/s").
func TestLoadSummaryRate(t *testing.T) {
	file := testenv.Path(t, "safetensors/mlverse/hello.safetensors")
	out, status := captureRun(t, "load", file)
	if status != 0 || strings.Contains(out, "0.00 GB/s") || !regexp.MustCompile(`in [0-9.]+ s, [0-9.]+ (B|kB|MB|GB)/s,`).MatchString(out) {
		t.Errorf("load: exit %d:\n%s", status, out)
	}
}

// TestCatByKey: cat takes a distributed checkpoint's dotted key (as a
// torch user knows it) for the tensor tensorfs names with a "/".
func TestCatByKey(t *testing.T) {
	dir := testenv.Path(t, "formats2/dcp_single")
	want, status := captureRun(t, "cat", dir, "model/blocks.0.norm%scale")
	if status != 0 || want == "" {
		t.Fatalf("cat by name: exit %d: %q", status, want)
	}
	got, status := captureRun(t, "cat", dir, "model.blocks.0.norm%scale")
	if status != 0 || got != want {
		t.Errorf("cat by key: exit %d, %d bytes, want %d bytes\n%.200q", status, len(got), len(want), got)
	}
}
