package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.yaml.in/yaml/v3"

	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/policy"
)

// The examples under deploy/ are not run here (no Docker, no cluster), so
// these tests keep them honest: every JETHOOK_* variable they set is a real
// setting with a valid value, the routes load, the NATS configuration is
// one nats-server accepts with a max_payload jethook accepts, the probes
// call a real subcommand, and the grace periods cover jethook's shutdown.

var jethookVar = regexp.MustCompile(`^JETHOOK_[A-Z0-9_]+$`)

// settingNames are the JETHOOK_* variables jethook reads: the Settings
// fields, plus JETHOOK_ADMIN_URL of the admin API's client commands.
func settingNames() []string {
	names := []string{"JETHOOK_ADMIN_URL"}
	t := reflect.TypeFor[Settings]()
	for i := range t.NumField() {
		names = append(names, "JETHOOK_"+t.Field(i).Tag.Get("env"))
	}
	return names
}

// yamlDocs decodes every document of a YAML file.
func yamlDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var docs []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		docs = append(docs, doc)
	}
	if len(docs) == 0 {
		t.Fatalf("%s: no YAML document", path)
	}
	return docs
}

// jethookVars finds every JETHOOK_* name used as a map key (compose's
// environment) or as a value (Kubernetes' env[].name) anywhere in v.
func jethookVars(v any, found map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if jethookVar.MatchString(k) {
				found[k] = true
			}
			jethookVars(x, found)
		}
	case []any:
		for _, x := range v {
			jethookVars(x, found)
		}
	case string:
		if jethookVar.MatchString(v) {
			found[v] = true
		}
	}
}

// get walks a decoded YAML tree along keys (map keys or list indexes).
func get(v any, keys ...any) any {
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func TestTheDeployExamplesUseOnlyRealSettings(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../deploy/kubernetes/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../deploy/compose.yaml", "../deploy/policies.yaml")
	known := settingNames()
	used := map[string]bool{}
	for _, f := range files {
		found := map[string]bool{}
		for _, doc := range yamlDocs(t, f) {
			jethookVars(doc, found)
		}
		for name := range found {
			used[name] = true
			if !slices.Contains(known, name) {
				t.Errorf("%s: %s is not a jethook setting (cli/settings.go)", f, name)
			}
		}
	}
	for _, want := range []string{"JETHOOK_NATS_URL", "JETHOOK_REPLICAS", "JETHOOK_ADMIN_TOKEN"} {
		if !used[want] {
			t.Errorf("no deploy example sets %s", want)
		}
	}
}

// composeEnv is the environment compose gives a jethook replica, with
// ${VAR…} references filled in.
func composeEnv(t *testing.T, service map[string]any) map[string]string {
	t.Helper()
	env := map[string]string{}
	m, ok := service["environment"].(map[string]any)
	if !ok {
		t.Fatalf("compose: environment is %T, want a map", service["environment"])
	}
	for k, v := range m {
		s := fmt.Sprint(v)
		if strings.HasPrefix(s, "${") {
			s = "from-the-host-openssl-rand-hex-32" // as long as a real token
		}
		env[k] = s
	}
	return env
}

func TestTheComposeReplicasStartAgainstTheComposeNATSCluster(t *testing.T) {
	t.Parallel()
	compose := yamlDocs(t, "../deploy/compose.yaml")[0]
	opts, err := server.ProcessConfigFile("../deploy/nats.conf")
	if err != nil {
		t.Fatalf("nats.conf: %v", err)
	}
	if !opts.JetStream || opts.Cluster.Name == "" || len(opts.Routes) != 3 {
		t.Errorf("nats.conf: jetstream %v, cluster %q with %d routes; want a 3-node JetStream cluster",
			opts.JetStream, opts.Cluster.Name, len(opts.Routes))
	}
	services, _ := compose["services"].(map[string]any)
	replicas := 0
	for name, v := range services {
		svc, _ := v.(map[string]any)
		if strings.HasPrefix(name, "nats-") {
			if get(svc, "command", 3) != name {
				t.Errorf("compose: %s: command %v does not name the server %s", name, svc["command"], name)
			}
			continue
		}
		if _, ok := svc["environment"]; !ok {
			continue
		}
		replicas++
		env := composeEnv(t, svc)
		env["JETHOOK_CONFIG"] = "../deploy/policies.yaml" // mounted at /etc/jethook/policies.yaml
		s, err := loadSettings(env)
		if err != nil {
			t.Fatalf("compose: %s: %v", name, err)
		}
		if s.Replicas != 3 || strings.Count(s.NATSURL, "nats://") != 3 {
			t.Errorf("compose: %s: JETHOOK_REPLICAS=%d, JETHOOK_NATS_URL=%q; want 3 and the 3 nodes", name, s.Replicas, s.NATSURL)
		}
		cfg, err := policy.Load(s.Config)
		if err != nil {
			t.Fatal(err)
		}
		// What serve checks once connected, with the servers' max_payload.
		if err := checkWithPayload(s, cfg, int64(opts.MaxPayload)); err != nil {
			t.Errorf("compose: %s: %v", name, err)
		}
		grace, err := time.ParseDuration(fmt.Sprint(svc["stop_grace_period"]))
		if err != nil || grace < shutdownBudget(s) {
			t.Errorf("compose: %s: stop_grace_period %v, want at least %s for JETHOOK_SHUTDOWN_GRACE=%s",
				name, svc["stop_grace_period"], shutdownBudget(s), s.ShutdownGrace)
		}
	}
	if replicas < 2 {
		t.Errorf("compose: %d jethook replicas, want at least 2", replicas)
	}
}

// shutdownBudget is the longest jethook's shutdown can take: the ingress
// and then the attempts in flight get JETHOOK_SHUTDOWN_GRACE each, the
// admin listener 5 s, and a last alert 10 s.
func shutdownBudget(s Settings) time.Duration { return 2*s.ShutdownGrace + 15*time.Second }

func TestTheKubernetesSidecarIsConsistent(t *testing.T) {
	t.Parallel()
	var pod map[string]any
	for _, doc := range yamlDocs(t, "../deploy/kubernetes/deployment.yaml") {
		if doc["kind"] == "Deployment" {
			pod, _ = get(doc, "spec", "template", "spec").(map[string]any)
		}
	}
	containers, _ := pod["containers"].([]any)
	var sidecar map[string]any
	for _, c := range containers {
		if get(c, "name") == "jethook" {
			sidecar, _ = c.(map[string]any)
		}
	}
	if sidecar == nil {
		t.Fatal("deployment.yaml: no jethook container")
	}
	env := map[string]string{}
	list, _ := sidecar["env"].([]any)
	for _, e := range list {
		name, _ := get(e, "name").(string)
		value := fmt.Sprint(get(e, "value"))
		if get(e, "valueFrom") != nil {
			value = "from-a-secret-openssl-rand-hex-32" // as long as a real token
		}
		env[name] = value
	}
	env["JETHOOK_CONFIG"] = "../deploy/kubernetes/policies.yaml" // the ConfigMap's file
	s, err := loadSettings(env)
	if err != nil {
		t.Fatalf("deployment.yaml: %v", err)
	}
	if s.Replicas != 3 || s.NATSURL == "" {
		t.Errorf("deployment.yaml: JETHOOK_REPLICAS=%d, JETHOOK_NATS_URL=%q; want 3 and the cluster", s.Replicas, s.NATSURL)
	}
	data, err := os.ReadFile(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := policy.Parse(s.Config, data, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if err := checkWithPayload(s, cfg, 8<<20); err != nil { // max_payload in nats-values.yaml
		t.Error(err)
	}

	for _, probe := range []string{"startupProbe", "readinessProbe", "livenessProbe"} {
		cmd, _ := get(sidecar, probe, "exec", "command").([]any)
		if len(cmd) != 3 || cmd[0] != "/usr/local/bin/jethook" || cmd[1] != "probe" || probePaths[fmt.Sprint(cmd[2])] == "" {
			t.Errorf("deployment.yaml: %s runs %v, want /usr/local/bin/jethook probe ready|live", probe, cmd)
		}
	}
	if cmd := fmt.Sprint(get(sidecar, "livenessProbe", "exec", "command", 2)); cmd != "live" {
		t.Errorf("deployment.yaml: livenessProbe checks %q: a NATS outage would restart the pods; want live", cmd)
	}

	preStop, _ := get(sidecar, "lifecycle", "preStop", "sleep", "seconds").(int)
	grace, _ := pod["terminationGracePeriodSeconds"].(int)
	if want := time.Duration(preStop)*time.Second + shutdownBudget(s); time.Duration(grace)*time.Second < want {
		t.Errorf("deployment.yaml: terminationGracePeriodSeconds %d, want at least %s (preStop %ds + shutdown with JETHOOK_SHUTDOWN_GRACE=%s)",
			grace, want, preStop, s.ShutdownGrace)
	}
	if port := get(sidecar, "ports", 0, "containerPort"); port != 8080 {
		t.Errorf("deployment.yaml: jethook's port %v, want the image's 8080", port)
	}
}

// go.mod asks for the first patch of the Go release it needs, so that a Go
// of any later patch of that release builds jethook without downloading
// another toolchain.
func TestGoModNeedsNoNewerPatchThanTheReleasesFirst(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "go "); ok {
			if parts := strings.Split(v, "."); len(parts) == 3 && parts[2] != "0" {
				t.Errorf("go.mod says %q: a Go %s.%s.0 would download a toolchain; say go %s.%s.0", line, parts[0], parts[1], parts[0], parts[1])
			}
		}
		if strings.HasPrefix(line, "toolchain ") {
			t.Errorf("go.mod says %q: builds with an older toolchain would download it", line)
		}
	}
}

// checkWithPayload runs app.Check on cfg under the settings s and an
// external server's max_payload, as serve does once connected.
func checkWithPayload(s Settings, cfg *policy.Config, maxPayload int64) error {
	l, err := s.limits()
	if err != nil {
		return err
	}
	l.MaxPayload = maxPayload
	return app.Check(cfg, l)
}
