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
		Retention: 72 * time.Hour, DedupWindow: 24 * time.Hour, StoreSync: "interval", Replicas: 1,
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

func TestAnAdminTokenNoRequestCouldPresentIsRefusedAtStart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, token string
		ok          bool
	}{
		{"no token is allowed (loopback admin only)", "", true},
		{"a token is allowed", "s3cret", true},
		{"spaces only are refused", "   ", false},
		{"a tab and a newline are refused", "\t\n", false},
		{"a trailing newline is refused", "s3cret\n", false},
		{"a leading space is refused", " s3cret", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := loadSettings(map[string]string{"JETHOOK_ADMIN_TOKEN": tc.token})
			if tc.ok && err != nil {
				t.Fatalf("%q: %v", tc.token, err)
			}
			if !tc.ok && (err == nil || !strings.Contains(err.Error(), "JETHOOK_ADMIN_TOKEN")) {
				t.Fatalf("%q: err = %v, want an error naming JETHOOK_ADMIN_TOKEN", tc.token, err)
			}
		})
	}
}
