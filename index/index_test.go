package index

import "testing"

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, é ü 中 \"q\" \\ ok":   "plain text, é ü 中 \"q\" \\ ok",
		"os\x1b[31mRED\x1b[0m\rX\nsystem": `os\u001b[31mRED\u001b[0m\u000dX\u000asystem`,
		"bad\xffutf8\x00":                 `bad\xffutf8\u0000`,
		"bidi \u202egnp.exe":              `bidi \u202egnp.exe`,
		"tab\there":                       `tab\u0009here`,
	} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
	e := Errorf("m\x1b.pt", 45, "refused global %s", "os\x1b[31m.system\n")
	if got, want := e.Error(), `m\u001b.pt: refused global os\u001b[31m.system\u000a (at byte 45)`; got != want {
		t.Errorf("FormatError %q, want %q", got, want)
	}
}

func TestNamesByKey(t *testing.T) {
	got := NamesByKey(map[string]string{"model/a.w": "model.a.w", "x/y": "x.y", "x.y": "x.y", "e": "e"})
	if len(got) != 2 || got["model.a.w"] != "model/a.w" || got["e"] != "e" {
		t.Errorf("NamesByKey: %v", got)
	}
	if NamesByKey(nil) != nil {
		t.Error("NamesByKey(nil) is not nil")
	}
}
