// Package bytesize reads and writes byte counts as people write them:
// Parse takes a flag's "256MiB", Format and FormatFixed say a count in
// binary units. It is a leaf (standard library only), for every layer.
package bytesize

import (
	"fmt"
	"strconv"
	"strings"
)

// Max is the largest count Parse accepts: 1 TiB.
const Max = 1 << 40

// Parse parses a byte count: digits, optionally followed by K, M, G (or
// KiB, MiB, GiB, KB, MB, GB: all powers of 1024) or B, case-insensitive.
// It must be positive and at most Max.
func Parse(s string) (int64, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	mult := int64(1)
	for _, x := range []struct {
		suffix string
		m      int64
	}{
		{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30},
		{"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1},
	} {
		if strings.HasSuffix(u, x.suffix) {
			u, mult = strings.TrimSpace(strings.TrimSuffix(u, x.suffix)), x.m
			break
		}
	}
	n, err := strconv.ParseInt(u, 10, 64)
	if err != nil || n <= 0 || n > Max/mult {
		return 0, fmt.Errorf("%q is not a size (e.g. 8MiB, 1048576)", s)
	}
	return n * mult, nil
}

// Format says n in binary units, as the CLI prints sizes: "512 B",
// "1.5 KiB", "3.2 MiB", "1.25 GiB" (GiB the largest unit).
func Format(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// FormatFixed says n with two decimals in the largest binary unit up to
// EiB that it reaches: "512 B", "4.00 KiB", "1.50 TiB" (the form of
// client/cuda's messages).
func FormatFixed(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.2f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// Rate says n bytes in seconds as a throughput in decimal units, the
// largest the rate reaches: "2.35 GB/s", "48.2 MB/s", "3.1 kB/s",
// "812 B/s" (a small load's summary said "0.00 GB/s"). "-" when seconds
// is not positive.
func Rate(n int64, seconds float64) string {
	if seconds <= 0 {
		return "-"
	}
	r := float64(n) / seconds
	switch {
	case r >= 1e9:
		return fmt.Sprintf("%.2f GB/s", r/1e9)
	case r >= 1e6:
		return fmt.Sprintf("%.1f MB/s", r/1e6)
	case r >= 1e3:
		return fmt.Sprintf("%.1f kB/s", r/1e3)
	}
	return fmt.Sprintf("%.0f B/s", r)
}
