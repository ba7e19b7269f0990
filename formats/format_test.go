package formats

import "testing"

// TestDetect: the table picks each format by content (the detection
// checks of index/gguf's TestGGUFSniff and index/safetensors'
// TestSniffSafetensors, which cannot import formats).
func TestDetect(t *testing.T) {
	gguf := append([]byte("GGUF\x03\x00\x00\x00"), make([]byte, SniffLen-8)...)
	if f, ok := Detect(gguf); !ok || f.Name != "gguf" {
		t.Fatalf("Detect does not pick gguf for a GGUF header")
	}
	good := stBuild(nil, true, stT{Name: "a", DType: "F32", Shape: []int{1}, Bytes: 4})
	if fm, ok := Detect(good); !ok || fm.Name != "safetensors" {
		t.Errorf("Detect = %v, %v", fm, ok)
	}
}

// TestFamilies: every row of Table is in exactly one family, every
// family row names a row of Table, and titles are distinct, so that the
// lists made from Families (help text) name every format read.
func TestFamilies(t *testing.T) {
	in := map[string]string{}
	titles := map[string]bool{}
	for _, f := range Families {
		if f.Title == "" || f.Detail == "" || titles[f.Title] {
			t.Errorf("family %+v: empty or repeated title or detail", f)
		}
		titles[f.Title] = true
		for _, r := range f.Rows {
			if other, ok := in[r]; ok {
				t.Errorf("row %s is in families %s and %s", r, other, f.Title)
			}
			in[r] = f.Title
		}
	}
	rows := map[string]bool{}
	for _, fm := range Table {
		rows[fm.Name] = true
		if _, ok := in[fm.Name]; !ok {
			t.Errorf("Table row %s is in no family (formats.Families): help and docs would not name it", fm.Name)
		}
	}
	for r, f := range in {
		if !rows[r] {
			t.Errorf("family %s names row %s, which Table lacks", f, r)
		}
	}
}
