package cli

import (
	"strings"
	"testing"
	"time"
)

func TestSettingsHaveTheDocumentedDefaults(t *testing.T) {
	t.Parallel()
	s, err := loadSettings(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{Listen: ":8080", AdminListen: "127.0.0.1:8081", Config: "policies.yaml", DataDir: "./data",
		Retention: 72 * time.Hour, DedupWindow: 72 * time.Hour, StoreSync: "interval", Replicas: 1,
		LogLevel: "info", LogFormat: "json", ShutdownGrace: 20 * time.Second, HeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, AttemptLogAge: 72 * time.Hour}
	if s != want {
		t.Fatalf("got %+v\nwant %+v", s, want)
	}
}

func TestABadSettingIsAClearErrorNamingTheVariable(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"JETHOOK_RETENTION":       "three days",
		"JETHOOK_STORE_SYNC":      "sometimes",
		"JETHOOK_LOG_FORMAT":      "xml",
		"JETHOOK_LOG_LEVEL":       "loud",
		"JETHOOK_REPLICAS":        "7",
		"JETHOOK_ATTEMPT_LOG_AGE": "0s",
		"JETHOOK_STORE_MAX_BYTES": "20 gigs",
	}
	for name, value := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := loadSettings(map[string]string{name: value})
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Fatalf("%s=%q: err = %v, want it to name the variable", name, value, err)
			}
		})
	}
}

func TestStoreMaxBytesTakesASize(t *testing.T) {
	t.Parallel()
	for value, want := range map[string]int64{"": 0, "20GiB": 20 << 30, "512MB": 512_000_000, "1048576": 1 << 20} {
		s, err := loadSettings(map[string]string{"JETHOOK_STORE_MAX_BYTES": value})
		if err != nil {
			t.Fatalf("JETHOOK_STORE_MAX_BYTES=%q: %v", value, err)
		}
		if got, _ := s.storeMaxBytes(); got != want {
			t.Errorf("JETHOOK_STORE_MAX_BYTES=%q: %d bytes, want %d", value, got, want)
		}
	}
}
