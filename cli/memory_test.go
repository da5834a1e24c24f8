package cli

import (
	"errors"
	"strings"
	"testing"
)

func TestTheMemoryLimitComesFromTheSettingThenTheCgroupThenADefault(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	cgroup := func(n uint64, err error) func() (uint64, error) {
		return func() (uint64, error) { return n, err }
	}
	for _, c := range []struct {
		name, setting string
		cgroup        func() (uint64, error)
		want          int64
		from          string
	}{
		{"the setting wins over a cgroup", "512MiB", cgroup(4<<30, nil), 512 << 20, "JETHOOK_MEMORY_LIMIT"},
		{"a cgroup limit leaves a tenth spare", "", cgroup(1000<<20, nil), 900 << 20, "cgroup"},
		{"no cgroup takes the default", "", cgroup(0, errors.New("no cgroup")), defaultMemoryLimit, "default"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, from, err := memoryLimit(c.setting, c.cgroup)
			if err != nil || got != c.want || from != c.from {
				t.Errorf("memoryLimit = %d from %s, %v; want %d from %s", got, from, err, c.want, c.from)
			}
		})
	}
	if _, _, err := memoryLimit("lots", cgroup(0, nil)); err == nil || !strings.Contains(err.Error(), "JETHOOK_MEMORY_LIMIT") {
		t.Errorf("a bad setting: %v; want an error naming JETHOOK_MEMORY_LIMIT", err)
	}
}
