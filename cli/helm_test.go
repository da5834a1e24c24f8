package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

const chart = "../deploy/helm/jethook"

// helm runs the helm binary on the chart with args, with a configuration
// and cache of its own, and returns what it printed. CI installs helm and
// sets JETHOOK_REQUIRE_HELM so that these tests cannot skip there.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin, err := exec.LookPath("helm")
	if err != nil {
		if os.Getenv("JETHOOK_REQUIRE_HELM") != "" {
			t.Fatal("helm not found, and JETHOOK_REQUIRE_HELM is set")
		}
		t.Skip("helm not installed (go install helm.sh/helm/v4/cmd/helm@v4.3.2)")
	}
	home := t.TempDir()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// manifests are the objects of a rendered chart by kind and name.
type manifests map[string]map[string]any

func render(t *testing.T, values ...string) manifests {
	t.Helper()
	args := []string{"template", "jethook", chart}
	for _, v := range values {
		args = append(args, "--values", filepath.Join(chart, v))
	}
	out, err := helm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	m := manifests{}
	dec := yaml.NewDecoder(strings.NewReader(out))
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("helm template %v: %v", values, err)
		}
		if doc == nil {
			continue
		}
		kind, name := fmt.Sprint(doc["kind"]), fmt.Sprint(get(doc, "metadata", "name"))
		if m[kind] == nil {
			m[kind] = map[string]any{}
		}
		m[kind][name] = doc
	}
	return m
}

// one returns the only object of kind.
func (m manifests) one(t *testing.T, kind string) map[string]any {
	t.Helper()
	if len(m[kind]) != 1 {
		t.Fatalf("%d %s objects, want 1", len(m[kind]), kind)
	}
	for _, v := range m[kind] {
		return v.(map[string]any)
	}
	return nil
}

// named returns the element of list whose name is name.
func named(list any, name string) map[string]any {
	l, _ := list.([]any)
	for _, x := range l {
		if get(x, "name") == name {
			return x.(map[string]any)
		}
	}
	return nil
}

// containerEnv is a container's environment as jethook would see it, with
// a placeholder as long as a real token for each value from a Secret.
func containerEnv(t *testing.T, c map[string]any) map[string]string {
	t.Helper()
	env := map[string]string{}
	list, _ := c["env"].([]any)
	for _, e := range list {
		name := fmt.Sprint(get(e, "name"))
		if get(e, "valueFrom", "secretKeyRef") != nil {
			env[name] = "from-a-secret-openssl-rand-hex-32"
			continue
		}
		env[name] = fmt.Sprint(get(e, "value"))
	}
	return env
}

func TestTheHelmChartLints(t *testing.T) {
	t.Parallel()
	for _, values := range []string{"values.yaml", "examples/nats.yaml", "examples/sidecar.yaml"} {
		if out, err := helm(t, "lint", "--strict", chart, "--values", filepath.Join(chart, values)); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
	}
}

// Each documented values file renders a jethook that starts: its settings
// are real and valid, `jethook check` accepts the policies.yaml of its
// ConfigMap under the container's environment, the probes call real
// endpoints, the data volume is where the data dir is, the public Service
// exposes the webhooks port and nothing else, and the grace period covers
// the shutdown. Not parallel: check reads the process environment.
func TestTheHelmChartRendersAJethookThatStarts(t *testing.T) {
	for _, values := range []string{"values.yaml", "examples/nats.yaml", "examples/sidecar.yaml"} {
		t.Run(values, func(t *testing.T) {
			m := render(t, values)
			dep := m.one(t, "Deployment")
			pod, _ := get(dep, "spec", "template", "spec").(map[string]any)
			c := named(pod["containers"], "jethook")
			if c == nil {
				t.Fatal("no jethook container")
			}
			if !reflect.DeepEqual(c["args"], []any{"serve"}) {
				t.Errorf("args %v, want [serve]", c["args"])
			}
			env := containerEnv(t, c)
			for name := range env {
				if jethookVar.MatchString(name) && !slices.Contains(settingNames(), name) {
					t.Errorf("%s is not a jethook setting (cli/settings.go)", name)
				}
			}
			s, err := loadSettings(env)
			if err != nil {
				t.Fatal(err)
			}
			if err := errors.Join(checkAdminListen(s), checkNATSListen(s)); err != nil {
				t.Error(err)
			}

			// `jethook check` on the ConfigMap's file, in the container's environment.
			cm := m.one(t, "ConfigMap")
			policies, ok := get(cm, "data", "policies.yaml").(string)
			if !ok || !strings.Contains(policies, "routes:") {
				t.Fatalf("the ConfigMap holds no policies.yaml: %v", cm["data"])
			}
			mount := named(c["volumeMounts"], "policies")
			if got := fmt.Sprint(get(mount, "mountPath")) + "/policies.yaml"; got != s.Config {
				t.Errorf("policies.yaml is mounted at %s, JETHOOK_CONFIG is %s", got, s.Config)
			}
			if vol := named(pod["volumes"], "policies"); get(vol, "configMap", "name") != get(cm, "metadata", "name") {
				t.Errorf("the policies volume is %v, want the ConfigMap %v", vol, get(cm, "metadata", "name"))
			}
			file := filepath.Join(t.TempDir(), "policies.yaml")
			if err := os.WriteFile(file, []byte(policies), 0o600); err != nil {
				t.Fatal(err)
			}
			for k, v := range env {
				t.Setenv(k, v)
			}
			var out bytes.Buffer
			if err := runCheck(context.Background(), []string{"-config", file}, &out); err != nil {
				t.Errorf("jethook check on the ConfigMap's policies.yaml: %v", err)
			}

			for _, probe := range []string{"startupProbe", "readinessProbe", "livenessProbe"} {
				cmd, _ := get(c, probe, "exec", "command").([]any)
				if len(cmd) != 3 || cmd[0] != "/usr/local/bin/jethook" || cmd[1] != "probe" || probePaths[fmt.Sprint(cmd[2])] == "" {
					t.Errorf("%s runs %v, want /usr/local/bin/jethook probe ready|live", probe, cmd)
				}
			}
			if cmd := fmt.Sprint(get(c, "livenessProbe", "exec", "command", 2)); cmd != "live" {
				t.Errorf("livenessProbe checks %q: a NATS outage would restart the pods; want live", cmd)
			}

			_, listenPort, _ := net.SplitHostPort(s.Listen)
			if port := fmt.Sprint(get(named(c["ports"], "webhooks"), "containerPort")); port != listenPort {
				t.Errorf("the webhooks port is %s, JETHOOK_LISTEN is %s", port, s.Listen)
			}
			svc := m["Service"]["jethook"]
			ports, _ := get(svc, "spec", "ports").([]any)
			if len(ports) != 1 || get(ports, 0, "targetPort") != "webhooks" {
				t.Errorf("the public Service's ports are %v, want only webhooks", ports)
			}

			data := named(c["volumeMounts"], "data")
			if get(data, "mountPath") != s.DataDir {
				t.Errorf("the data volume is mounted at %v, JETHOOK_DATA_DIR is %s", get(data, "mountPath"), s.DataDir)
			}
			if get(pod, "securityContext", "runAsNonRoot") != true || get(c, "securityContext", "readOnlyRootFilesystem") != true ||
				get(c, "securityContext", "allowPrivilegeEscalation") != false {
				t.Errorf("security contexts %v, %v: want non-root, a read-only root file system, no privilege escalation",
					pod["securityContext"], c["securityContext"])
			}
			if get(c, "resources", "limits", "memory") == nil {
				t.Error("no memory limit: jethook's Go memory limit follows the container's")
			}
			preStop, _ := get(c, "lifecycle", "preStop", "sleep", "seconds").(int)
			grace, _ := pod["terminationGracePeriodSeconds"].(int)
			if want := time.Duration(preStop)*time.Second + shutdownBudget(s); time.Duration(grace)*time.Second < want {
				t.Errorf("terminationGracePeriodSeconds %d, want at least %s", grace, want)
			}

			embedded := s.NATSURL == ""
			if embedded != (get(dep, "spec", "strategy", "type") == "Recreate") {
				t.Errorf("store embedded %v, strategy %v: the embedded store takes one process at a time", embedded, get(dep, "spec", "strategy"))
			}
			if claim := get(named(pod["volumes"], "data"), "persistentVolumeClaim", "claimName"); embedded != (claim != nil) {
				t.Errorf("store embedded %v, data volume %v: want a claim for the embedded store only", embedded, named(pod["volumes"], "data"))
			} else if embedded && m["PersistentVolumeClaim"][fmt.Sprint(claim)] == nil {
				t.Errorf("the data volume claims %v, which the chart does not make", claim)
			}
		})
	}
}

// With metrics on, Prometheus reaches /metrics through a Service of its
// own on the admin listener's port, and the PrometheusRule holds the alert
// rules promtool tests, as they are in deploy/prometheus.
func TestTheHelmChartsMonitoringScrapesTheAdminListener(t *testing.T) {
	t.Parallel()
	m := render(t, "examples/nats.yaml")
	c := named(get(m.one(t, "Deployment"), "spec", "template", "spec", "containers"), "jethook")
	s, err := loadSettings(containerEnv(t, c))
	if err != nil {
		t.Fatal(err)
	}
	_, adminPort, _ := net.SplitHostPort(s.AdminListen)
	if port := fmt.Sprint(get(named(c["ports"], "admin"), "containerPort")); port != adminPort {
		t.Errorf("the admin port is %s, JETHOOK_ADMIN_LISTEN is %s", port, s.AdminListen)
	}
	sm := m.one(t, "ServiceMonitor")
	if get(sm, "spec", "endpoints", 0, "port") != "admin" || get(sm, "spec", "endpoints", 0, "path") != "/metrics" {
		t.Errorf("the ServiceMonitor scrapes %v, want /metrics on the admin port", get(sm, "spec", "endpoints"))
	}
	want, _ := get(sm, "spec", "selector", "matchLabels").(map[string]any)
	var scraped []string
	for name, svc := range m["Service"] {
		labels, _ := get(svc, "metadata", "labels").(map[string]any)
		matches := true
		for k, v := range want {
			matches = matches && labels[k] == v
		}
		if matches {
			scraped = append(scraped, name)
			if p := get(svc, "spec", "ports", 0, "targetPort"); p != "admin" {
				t.Errorf("Service %s, which the ServiceMonitor selects, targets %v, want admin", name, p)
			}
		}
	}
	if len(scraped) != 1 || scraped[0] == "jethook" {
		t.Errorf("the ServiceMonitor selects the Services %v, want the admin one alone", scraped)
	}

	raw, err := os.ReadFile("../deploy/prometheus/jethook-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules map[string]any
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatal(err)
	}
	if got := get(m.one(t, "PrometheusRule"), "spec"); !reflect.DeepEqual(got, rules) {
		t.Errorf("the PrometheusRule's spec differs from deploy/prometheus/jethook-rules.yaml:\n%v", got)
	}
}

// The chart refuses what cannot run, saying why.
func TestTheHelmChartRefusesWhatCannotRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{[]string{"replicaCount=2"}, "the embedded store belongs to one process"},
		{[]string{"metrics.enabled=true"}, "set adminToken.secretName"},
	} {
		args := []string{"template", "jethook", chart}
		for _, s := range tc.set {
			args = append(args, "--set", s)
		}
		if _, err := helm(t, args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--set %v: %v, want an error saying %q", tc.set, err, tc.want)
		}
	}
}
