package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestStatusPrintsATableOfDestinations(t *testing.T) {
	t.Parallel()
	r := newOpsRig(t)
	r.post("/hooks/shop", `{"s":1}`, map[string]string{"audit": "422"})
	eventually(t, "a dead letter", func() bool { return r.deadLetterCount() == 1 })
	out, err := r.run(status)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("want a header and two rows:\n%s", out)
	}
	for _, col := range []string{"ROUTE", "DESTINATION", "STATE", "LIMIT", "PENDING", "IN BACKOFF", "DEAD", "LAST SUCCESS", "LAST FAILURE"} {
		if !strings.Contains(lines[0], col) {
			t.Errorf("header lacks %s: %s", col, lines[0])
		}
	}
	if f := strings.Fields(lines[1]); f[0] != "shop" || f[1] != "app" || f[2] != "ok" || f[3] != "-" || f[7] != "0" {
		t.Errorf("app row: %s", lines[1])
	}
	if f := strings.Fields(lines[2]); f[1] != "audit" || f[7] != "1" || !strings.Contains(lines[2], "status 422") {
		t.Errorf("audit row: %s", lines[2])
	}

	out, err = r.run(status, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Destinations []struct {
			DeadLetters int `json:"dead_letters"`
		}
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || len(st.Destinations) != 2 || st.Destinations[1].DeadLetters != 1 {
		t.Errorf("--json: %v\n%s", err, out)
	}
}

func TestStatusWithoutTheTokenSaysWhatToSet(t *testing.T) {
	t.Parallel()
	r := newOpsRig(t)
	r.client.token = ""
	_, err := r.run(status)
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "JETHOOK_ADMIN_TOKEN") {
		t.Errorf("error %v", err)
	}
}

func TestStatusShowsAPullDestinationsLeases(t *testing.T) {
	t.Parallel()
	r := newOpsRig(t)
	r.write(strings.Replace(opsConfig, `      - {name: audit, url: "BACKEND/audit", slow_start: 0s}`,
		`      - {name: laptop, pull: {token: "`+laptopToken+`"}, timeout: 30s}`, 1))
	if err := r.client.call(context.Background(), http.MethodPost, "/v1/reload", nil, nil, nil); err != nil {
		t.Fatalf("reload: %v", err)
	}
	r.post("/hooks/shop", `{"n":1}`, nil)
	r.post("/hooks/shop", `{"n":2}`, nil)
	var leased []pulled
	for len(leased) == 0 {
		leased = r.pull("laptop", 1)
	}
	var row []string
	eventually(t, "the laptop row with one leased and one pending", func() bool {
		out, err := r.run(status)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[1] == "laptop" {
				row = f
			}
		}
		// ROUTE DESTINATION STATE LIMIT PENDING IN-FLIGHT ...
		return len(row) > 5 && row[4] == "1" && row[5] == "1"
	})
	if row[2] != "pull" || row[3] != "-" {
		t.Errorf("laptop row: %q", row)
	}
}
