package size

import "testing"

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1024", 1024, true},
		{"512KiB", 512 << 10, true},
		{"5MiB", 5 << 20, true},
		{"1MB", 1_000_000, true},
		{"100kB", 100_000, true},
		{"2GiB", 2 << 30, true},
		{"1.5MiB", 3 << 19, true},
		{"5 MiB", 5 << 20, true},
		{"0", 0, false},
		{"5XB", 0, false},
		{"MiB", 0, false},
		{"-1", 0, false},
		{"99999999999GiB", 0, false},
	}
	for _, tt := range tests {
		t.Run("size "+tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := Parse(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("Parse(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestFormatWritesIECUnits(t *testing.T) {
	t.Parallel()
	for n, want := range map[uint64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 3 << 20: "3.0 MiB", 5 << 29: "2.5 GiB"} {
		if got := Format(n); got != want {
			t.Errorf("Format(%d) = %q, want %q", n, got, want)
		}
	}
}
