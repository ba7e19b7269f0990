package index

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// encodingJSON is md as encoding/json renders it with HTML escaping off.
func encodingJSON(t *testing.T, md map[string]any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(md); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// TestRenderMetadataAsEncodingJSON: within the budget, RenderMetadata
// writes exactly what encoding/json writes.
func TestRenderMetadataAsEncodingJSON(t *testing.T) {
	tests := []map[string]any{
		nil,
		{},
		{"general.architecture": "llama", "n": uint64(1 << 63), "i": int64(-5), "f": 0.1, "t": true, "z": nil},
		{"esc": "a\"b\\c\n\r\t\b\f\x00\x1f<>&\u2028\u2029é\xff\xfe", "\xffkey": "v", "": "empty key"},
		{"arrs": []any{Uint8s{1, 255}, []uint16{7}, []int8{-1}, []float32{1.5, 0.1}, []float64{2}, []bool{true}, []string{"x", "y"}, []any{}, Uint8s{}}},
		{"nested": map[string]any{"b": []any{map[string]any{"c": "d"}}, "a": json.Number("12345678901234567890")}},
		{"floats": []any{1e-7, 1e21, 1e20, -0.0, 123456789.0, 5e-324, math.MaxFloat64, []float32{1e-7, 1e21, 3.4e38, -1.5e-45, 0.3}, []float64{1e-10, 0.000001}}},
		{"ints": []any{[]int32{math.MinInt32, 0}, []int64{math.MinInt64}, []uint32{math.MaxUint32}, []uint64{math.MaxUint64}, []int16{-3}}},
		{"big": Uint8s(bytes.Repeat([]byte{200, 7}, 100_000)), "strs": []string{strings.Repeat("é", 70_000), "\x01"}},
		ggufAllTypesWant(), // what the GGUF parser makes of every type
	}
	for _, md := range tests {
		got, err := RenderMetadata(md, MetadataJSONBudget)
		if err != nil {
			t.Fatal(err)
		}
		want := encodingJSON(t, md)
		if md == nil {
			want = []byte("{}")
		}
		if !bytes.Equal(got, want) {
			t.Errorf("RenderMetadata:\n%.2000s\nencoding/json:\n%.2000s", got, want)
		}
		// Each value's file: the same JSON and a newline; its size
		// counted without keeping it.
		for k, v := range md {
			want := append(encodingJSON(t, map[string]any{"": v})[4:len(encodingJSON(t, map[string]any{"": v}))-1], '\n')
			got, err := MetadataValueJSON(v, 1<<30)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("MetadataValueJSON(%q) = %.200q, %v; want %.200q", k, got, err, want)
			}
			if n, err := MetadataValueSize(v, 1<<30); err != nil || n != int64(len(want)) {
				t.Errorf("MetadataValueSize(%q) = %d, %v; want %d", k, n, err, len(want))
			}
			if n := int64(len(want)); n > 10 {
				if _, err := MetadataValueSize(v, int(n-1)); err == nil {
					t.Errorf("MetadataValueSize(%q) with a limit of %d: no error", k, n-1)
				}
				if _, err := MetadataValueSize(v, int(n)); err != nil {
					t.Errorf("MetadataValueSize(%q) with a limit of %d: %v", k, n, err)
				}
			}
		}
	}
	for _, bad := range []any{math.NaN(), math.Inf(-1), []float64{1, math.Inf(1)}, []float32{float32(math.NaN())}, []float32{float32(math.Inf(1))}, []any{math.NaN()}} {
		if got, err := RenderMetadata(map[string]any{"bad": bad}, MetadataJSONBudget); err == nil {
			t.Errorf("%v rendered: %s", bad, got)
		}
	}
}

// TestRenderMetadataBudget: values past the budget, and FileValues, are
// elision objects; the keys stay, in order.
func TestRenderMetadataBudget(t *testing.T) {
	long := strings.Repeat("x", 100)
	longKey := strings.Repeat("k", 300)
	md := map[string]any{
		"a":     long,
		"b":     long,
		"c":     []any{long},
		"d":     Uint8s(make([]byte, 100)),
		"e":     map[string]any{"x": long},
		"f.big": &FileValue{Offset: 100, Size: 1 << 30, Type: "array", ElemType: "uint8", Count: 1 << 30},
		"g/s":   &FileValue{Offset: 10, Size: 7, Type: "string"},
		longKey: long,
		"small": int64(1),
	}
	got, err := RenderMetadata(md, 150)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatalf("%v: %s", err, got)
	}
	elided := func(kind, enc, path string, more ...any) map[string]any {
		e := map[string]any{ElidedKey: true, "type": kind, "encoding": enc}
		if path != "" {
			e["path"] = path
		}
		for i := 0; i < len(more); i += 2 {
			e[more[i].(string)] = more[i+1]
		}
		return e
	}
	want := map[string]any{
		"a":     long,
		"b":     elided("string", "text", ".tensorfs/metadata/b", "bytes", 100.0),
		"c":     elided("array", "json", ".tensorfs/metadata/c", "count", 1.0),
		"d":     elided("array", "json", ".tensorfs/metadata/d", "count", 100.0),
		"e":     elided("object", "json", ".tensorfs/metadata/e", "count", 1.0),
		"f.big": elided("array", "gguf", ".tensorfs/metadata/f.big", "element_type", "uint8", "count", float64(1<<30), "bytes", float64(1<<30)),
		"g/s":   elided("string", "gguf", ".tensorfs/metadata/g%2Fs", "bytes", 7.0),
		longKey: elided("string", "text", "", "bytes", 100.0),
		"small": 1.0,
	}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("got  %v\nwant %v", m, want)
	}
	// Deterministic: the same bytes every time.
	again, _ := RenderMetadata(md, 150)
	if !bytes.Equal(got, again) {
		t.Error("two renderings differ")
	}
}

// TestRenderMetadataSharedReferences: one 1 MiB string referenced 10,000
// times (a pickle's memo makes this from a 1 MB file) renders within the
// budget, in memory bounded by it: encoding/json writes 10 GB.
func TestRenderMetadataSharedReferences(t *testing.T) {
	s := strings.Repeat("x", 1<<20)
	refs := make([]any, 10_000)
	for i := range refs {
		refs[i] = s
	}
	md := map[string]any{"refs": refs, "nested": map[string]any{"m": refs}, "ok": "fine"}
	const budget = 8 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got, err := RenderMetadata(md, budget)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) > 1024 {
		t.Errorf("%d bytes rendered", len(got))
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8*budget {
		t.Errorf("allocated %d bytes for a budget of %d", alloc, budget)
	}
	var m map[string]any
	if err := json.Unmarshal(got, &m); err != nil || m["ok"] != "fine" {
		t.Fatalf("%v: %s", err, got)
	}
}

func TestUint8sJSON(t *testing.T) {
	b, err := json.Marshal(map[string]any{"u": Uint8s{0, 9, 10, 255}, "e": Uint8s{}})
	if err != nil || string(b) != `{"e":[],"u":[0,9,10,255]}` {
		t.Fatalf("%s %v", b, err)
	}
	fv, err := json.Marshal(&FileValue{Size: 3, Type: "string"})
	if err != nil || string(fv) != `{"tensorfs.elided":true,"type":"string","bytes":3,"encoding":"gguf"}` {
		t.Fatalf("%s %v", fv, err)
	}
}

// FuzzRenderMetadata: for any strings (keys, values, inside arrays and
// objects), RenderMetadata writes exactly what encoding/json writes, and
// a value's file is that JSON and a newline.
func FuzzRenderMetadata(f *testing.F) {
	f.Add([]byte("plain"), int64(7))
	f.Add([]byte("\x00\x1f\"\\<>&\u2028\u2029\xff\xfeé\t\n"), int64(-1))
	f.Add([]byte("\xed\xa0\x80 surrogate, \xf4\x90\x80\x80 past U+10FFFF"), int64(1<<62))
	f.Fuzz(func(t *testing.T, b []byte, n int64) {
		s := string(b)
		md := map[string]any{
			s:     s,
			"n":   n,
			"arr": []any{s, n, float64(n) / 3, []string{s, ""}, map[string]any{s: []int64{n}}},
			"u8":  Uint8s(b),
			"f32": []float32{float32(n)},
		}
		got, err := RenderMetadata(md, MetadataJSONBudget)
		if err != nil {
			t.Fatal(err)
		}
		if want := encodingJSON(t, md); !bytes.Equal(got, want) {
			t.Fatalf("RenderMetadata:\n%q\nencoding/json:\n%q", got, want)
		}
		file, err := MetadataValueJSON(md["arr"], 1<<20)
		if want := append(encodingJSON(t, map[string]any{"": md["arr"]})[4:len(encodingJSON(t, map[string]any{"": md["arr"]}))-1], '\n'); err != nil || !bytes.Equal(file, want) {
			t.Fatalf("MetadataValueJSON = %q, %v; want %q", file, err, want)
		}
	})
}
