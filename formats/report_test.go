package formats

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestLoadReport: with Options.Report, Load goes on past every problem
// of a weight map and its shards, passing each to Report once (one
// line, naming the file and the tensor or shard), keeps what it can
// serve, and leaves nothing open; without it, the first problem is the
// error.
func TestLoadReport(t *testing.T) {
	dir := ldSharded(t)
	// The map names a third shard that does not exist, a tensor that
	// shard 2 lacks; shard 2 holds a tensor the map lacks, and a tensor
	// the map puts in shard 1.
	ldWrite(t, dir, "model.safetensors.index.json", ldMap(t, nil, map[string]string{
		"model.embed.weight": "model-00001-of-00002.safetensors",
		"lm_head.weight":     "model-00001-of-00002.safetensors",
		"model.layers.0.w":   "model-00001-of-00002.safetensors",
		"ghost":              "model-00002-of-00002.safetensors",
		"lost":               "model-00003-of-00003.safetensors",
	}))
	if _, err := ldLoad(t, dir, nil); err == nil {
		t.Fatal("a broken weight map loads without Report")
	}
	var got []string
	o := newLdOpener()
	opts := testOptions
	opts.Report = func(err error) { got = append(got, err.Error()) }
	idx, files, err := Load(dir, o.Open, opts)
	if err != nil {
		t.Fatalf("Load with Report: %v", err)
	}
	for _, f := range files {
		f.(*ldFile).Close()
	}
	if open := o.stillOpen(); len(open) > 0 {
		t.Errorf("left open: %v", open)
	}
	var names []string
	for _, tn := range idx.Tensors {
		names = append(names, tn.Name)
	}
	if want := []string{"lm_head.weight", "model.embed.weight", "model.layers.0.w", "model.layers.1.w"}; !slices.Equal(names, want) {
		t.Errorf("tensors %q, want %q", names, want)
	}
	want := []string{
		`model-00002-of-00002.safetensors: the shard holds a tensor that the weight map model.safetensors.index.json does not list (tensor "model.layers.1.w")`,
		`model-00002-of-00002.safetensors: the weight map model.safetensors.index.json puts this tensor in shard model-00001-of-00002.safetensors (tensor "lm_head.weight")`,
		`model.safetensors.index.json: cannot open the shard: `,
		`model.safetensors.index.json: the weight map puts this tensor in shard model-00002-of-00002.safetensors, which does not hold it (tensor "ghost")`,
	}
	slices.Sort(got)
	if len(got) != len(want) {
		t.Fatalf("reported %d problems, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) || strings.ContainsAny(got[i], "\n\r") {
			t.Errorf("problem %d: %q, want it to hold %q", i, got[i], want[i])
		}
	}
	if !strings.Contains(got[2], `shard "model-00003-of-00003.safetensors"`) {
		t.Errorf("the missing shard's line does not name it: %q", got[2])
	}

	// No shard left: an error, even with Report.
	for _, s := range []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"} {
		os.Remove(filepath.Join(dir, s))
	}
	got = nil
	if _, _, err := Load(dir, o.Open, opts); err == nil || !strings.Contains(err.Error(), "none of the 3 shards") {
		t.Errorf("no shard left: %v", err)
	}
}

// TestLoadReportDir: in a directory without a weight map, Report gets
// each checkpoint file that does not parse, and the rest loads.
func TestLoadReportDir(t *testing.T) {
	dir := t.TempDir()
	good := stBuild(nil, true, stT{Name: "a", DType: "F32", Shape: []int{2}, Bytes: 8})
	ldWrite(t, dir, "a.safetensors", good)
	bad := stBuild(nil, true, stT{Name: "b", DType: "F32", Shape: []int{2}, Bytes: 8})
	ldWrite(t, dir, "b.safetensors", bad[:len(bad)-4]) // its data cut short
	ldWrite(t, dir, "c.safetensors", bad[:len(bad)-2])
	if _, err := ldLoad(t, dir, nil); err == nil {
		t.Fatal("a directory with a truncated shard loads without Report")
	}
	var got []string
	o := newLdOpener()
	opts := testOptions
	opts.Report = func(err error) { got = append(got, err.Error()) }
	idx, files, err := Load(dir, o.Open, opts)
	if err != nil {
		t.Fatalf("Load with Report: %v", err)
	}
	for _, f := range files {
		f.(*ldFile).Close()
	}
	if open := o.stillOpen(); len(open) > 0 {
		t.Errorf("left open: %v", open)
	}
	if len(idx.Tensors) != 1 || idx.Tensors[0].Name != "a" || len(got) != 2 || !strings.Contains(got[0], "b.safetensors: ") || !strings.Contains(got[1], "c.safetensors: ") {
		t.Errorf("tensors %v, problems:\n%s", idx.Tensors, strings.Join(got, "\n"))
	}
}
