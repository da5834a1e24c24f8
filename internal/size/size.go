// Package size parses and formats byte counts as people write them
// ("5MiB", "512KiB", "1MB") and read them ("3.1 GiB"). It imports nothing
// of jethook, so that every layer, the store included, may use it.
package size

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// units are the byte-size suffixes accepted by Parse, matched
// case-insensitively: SI (1000) and IEC (1024) multiples.
var units = map[string]int64{
	"b":   1,
	"kb":  1000,
	"mb":  1000 * 1000,
	"gb":  1000 * 1000 * 1000,
	"kib": 1 << 10,
	"mib": 1 << 20,
	"gib": 1 << 30,
}

// Format writes a byte count as people read sizes, in IEC units:
// "3.1 GiB".
func Format(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// Parse parses a byte count: a plain integer or a number with a unit
// ("512KiB", "5MiB", "1MB", "100kB", "2GiB", "1.5MiB"). It must be positive.
func Parse(s string) (int64, error) {
	bad := fmt.Errorf("invalid size %q: want bytes or a size like \"512KiB\", \"5MiB\", \"1MB\"", s)
	i := 0
	for i < len(s) && (s[i] == '.' || s[i] >= '0' && s[i] <= '9') {
		i++
	}
	num, unit := s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
	mult := int64(1)
	if unit != "" {
		m, ok := units[unit]
		if !ok {
			return 0, bad
		}
		mult = m
	}
	var n int64
	if strings.Contains(num, ".") {
		f, err := strconv.ParseFloat(num, 64)
		if err != nil || f*float64(mult) >= math.MaxInt64 {
			return 0, bad
		}
		n = int64(f * float64(mult))
	} else {
		v, err := strconv.ParseInt(num, 10, 64)
		if err != nil || v > math.MaxInt64/mult {
			return 0, bad
		}
		n = v * mult
	}
	if n <= 0 {
		return 0, fmt.Errorf("invalid size %q: must be positive", s)
	}
	return n, nil
}
