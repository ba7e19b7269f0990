package bytesize

import "testing"

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64 // 0: an error
	}{
		{"1048576", 1 << 20},
		{"8MiB", 8 << 20},
		{" 256 mib ", 256 << 20},
		{"4k", 4 << 10},
		{"2GB", 2 << 30},
		{"10B", 10},
		{"1024G", 1 << 40},
		{"1025G", 0},
		{"0", 0},
		{"-1M", 0},
		{"8 TiB", 0},
		{"", 0},
		{"MiB", 0},
	} {
		got, err := Parse(tc.in)
		if tc.want == 0 {
			if err == nil {
				t.Errorf("Parse(%q) = %d, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		n           int64
		want, fixed string
	}{
		{0, "0 B", "0 B"},
		{1000, "1000 B", "1000 B"},
		{4096, "4.0 KiB", "4.00 KiB"},
		{3 << 19, "1.5 MiB", "1.50 MiB"},
		{5 << 29, "2.50 GiB", "2.50 GiB"},
		{3 << 39, "1536.00 GiB", "1.50 TiB"},
	} {
		if got := Format(tc.n); got != tc.want {
			t.Errorf("Format(%d) = %q, want %q", tc.n, got, tc.want)
		}
		if got := FormatFixed(tc.n); got != tc.fixed {
			t.Errorf("FormatFixed(%d) = %q, want %q", tc.n, got, tc.fixed)
		}
	}
}

func TestRate(t *testing.T) {
	for _, c := range []struct {
		n    int64
		s    float64
		want string
	}{
		{36, 0.002, "18.0 kB/s"},
		{36, 1, "36 B/s"},
		{5e9, 2, "2.50 GB/s"},
		{48_200_000, 1, "48.2 MB/s"},
		{1, 0, "-"},
	} {
		if got := Rate(c.n, c.s); got != c.want {
			t.Errorf("Rate(%d, %v) = %q, want %q", c.n, c.s, got, c.want)
		}
	}
}
