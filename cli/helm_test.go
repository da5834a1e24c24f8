package cli

import (
	"bytes"
	"context"
	"encoding/json"
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

// install is a documented way to install the chart: a values file of the
// chart's and --set flags.
type install struct {
	values string
	set    []string
}

func (in install) String() string {
	return strings.Join(append([]string{in.values}, in.set...), " ")
}

// args are helm's flags for in.
func (in install) args() []string {
	args := []string{"--values", filepath.Join(chart, in.values)}
	for _, s := range in.set {
		args = append(args, "--set", s)
	}
	return args
}

// installs are the documented installs: the values files, and the
// embedded store and the NATS cluster (each pod's index on its own claim)
// as StatefulSets.
var installs = []install{
	{values: "values.yaml"},
	{values: "examples/nats.yaml"},
	{values: "examples/sidecar.yaml"},
	{values: "values.yaml", set: []string{"kind=StatefulSet"}},
	{values: "examples/nats.yaml", set: []string{"kind=StatefulSet", "persistence.enabled=true"}},
}

func render(t *testing.T, in install) manifests {
	t.Helper()
	out, err := helm(t, append([]string{"template", "jethook", chart}, in.args()...)...)
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
			t.Fatalf("helm template %v: %v", in, err)
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

// workload returns the Deployment or the StatefulSet, whichever the chart
// made: it must make one of them.
func (m manifests) workload(t *testing.T) map[string]any {
	t.Helper()
	if len(m["Deployment"])+len(m["StatefulSet"]) != 1 {
		t.Fatalf("%d Deployments and %d StatefulSets, want one of them", len(m["Deployment"]), len(m["StatefulSet"]))
	}
	if len(m["Deployment"]) == 1 {
		return m.one(t, "Deployment")
	}
	return m.one(t, "StatefulSet")
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
	for _, in := range installs {
		if out, err := helm(t, append([]string{"lint", "--strict", chart}, in.args()...)...); err != nil {
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
	for _, in := range installs {
		t.Run(in.String(), func(t *testing.T) {
			m := render(t, in)
			dep := m.workload(t)
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
			if dep["kind"] == "StatefulSet" {
				// The data volume is the pod's or claimed per pod, not both
				// (TestTheHelmChartsStatefulSetClaimsAVolumePerPod checks the claim).
				claimed := get(dep, "spec", "volumeClaimTemplates", 0, "metadata", "name") == "data"
				if claimed == (named(pod["volumes"], "data") != nil) {
					t.Errorf("the StatefulSet claims %v, its pods' volumes are %v: want the data volume in one of them",
						get(dep, "spec", "volumeClaimTemplates"), pod["volumes"])
				}
				if embedded && !claimed {
					t.Error("the embedded store is on an emptyDir")
				}
				return
			}
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
	m := render(t, install{values: "examples/nats.yaml"})
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
		{[]string{"kind=StatefulSet", "replicaCount=2"}, "the embedded store belongs to one process"},
		{[]string{"kind=StatefulSet", "persistence.existingClaim=store"}, "a StatefulSet claims a volume per pod"},
		{[]string{"metrics.port=8080"}, "8080 is the webhooks port"},
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

// kind: StatefulSet gives each pod a claim of its own from a
// volumeClaimTemplate, mounted where the data dir is, kept when the
// StatefulSet goes, and a headless Service that governs the pods' names
// and exposes no more than the webhooks port. The chart makes no claim of
// its own then.
func TestTheHelmChartsStatefulSetClaimsAVolumePerPod(t *testing.T) {
	t.Parallel()
	m := render(t, install{values: "values.yaml", set: []string{
		"kind=StatefulSet", "persistence.size=20Gi", "persistence.storageClass=fast",
	}})
	if len(m["Deployment"]) != 0 || len(m["PersistentVolumeClaim"]) != 0 {
		t.Errorf("a StatefulSet install also made %d Deployments and %d PersistentVolumeClaims", len(m["Deployment"]), len(m["PersistentVolumeClaim"]))
	}
	sts := m.one(t, "StatefulSet")
	if n := get(sts, "spec", "replicas"); n != 1 {
		t.Errorf("%v replicas on the embedded store, want 1", n)
	}
	pod, _ := get(sts, "spec", "template", "spec").(map[string]any)
	c := named(pod["containers"], "jethook")
	s, err := loadSettings(containerEnv(t, c))
	if err != nil {
		t.Fatal(err)
	}
	claims, _ := get(sts, "spec", "volumeClaimTemplates").([]any)
	if len(claims) != 1 {
		t.Fatalf("volumeClaimTemplates %v, want one", claims)
	}
	claim := claims[0]
	name := get(claim, "metadata", "name")
	if mount := named(c["volumeMounts"], fmt.Sprint(name)); get(mount, "mountPath") != s.DataDir {
		t.Errorf("the claim %v is mounted at %v, JETHOOK_DATA_DIR is %s", name, get(mount, "mountPath"), s.DataDir)
	}
	if named(pod["volumes"], fmt.Sprint(name)) != nil {
		t.Errorf("the pods have a volume %v too, which would hide the claim", name)
	}
	for _, tc := range []struct {
		path []any
		want any
	}{
		{[]any{"spec", "accessModes"}, []any{"ReadWriteOnce"}},
		{[]any{"spec", "resources", "requests", "storage"}, "20Gi"},
		{[]any{"spec", "storageClassName"}, "fast"},
	} {
		if got := get(claim, tc.path...); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("the claim's %v is %v, want %v", tc.path, got, tc.want)
		}
	}
	if p := get(sts, "spec", "persistentVolumeClaimRetentionPolicy"); !reflect.DeepEqual(p, map[string]any{"whenDeleted": "Retain", "whenScaled": "Retain"}) {
		t.Errorf("persistentVolumeClaimRetentionPolicy %v: the store must outlive the StatefulSet", p)
	}

	svc, ok := m["Service"][fmt.Sprint(get(sts, "spec", "serviceName"))].(map[string]any)
	if !ok {
		t.Fatalf("the StatefulSet's serviceName %v is not a Service of the chart's", get(sts, "spec", "serviceName"))
	}
	if get(svc, "spec", "clusterIP") != "None" {
		t.Errorf("the governing Service's clusterIP is %v, want None (headless)", get(svc, "spec", "clusterIP"))
	}
	if sel, labels := get(svc, "spec", "selector"), get(sts, "spec", "template", "metadata", "labels"); !reflect.DeepEqual(sel, labels) {
		t.Errorf("the governing Service selects %v, the pods are labelled %v", sel, labels)
	}
	if ports, _ := get(svc, "spec", "ports").([]any); len(ports) != 1 || get(ports, 0, "targetPort") != "webhooks" {
		t.Errorf("the governing Service's ports are %v, want only webhooks", ports)
	}
}

// schema is the chart's values.schema.json.
func schema(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chart, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	return s
}

// Every value of the chart's values files has a type and a description in
// the schema, down to the objects the schema closes (those Kubernetes
// checks, such as resources, stay open).
func TestTheHelmChartsValuesAreTypedAndDescribed(t *testing.T) {
	t.Parallel()
	root := schema(t)
	var walk func(path string, values any, s map[string]any)
	walk = func(path string, values any, s map[string]any) {
		m, ok := values.(map[string]any)
		if !ok || s["additionalProperties"] != false {
			return
		}
		for key, v := range m {
			p, _ := get(s, "properties", key).(map[string]any)
			if ref, ok := p["$ref"].(string); ok {
				p, _ = get(root, "definitions", strings.TrimPrefix(ref, "#/definitions/")).(map[string]any)
			}
			switch {
			case p == nil:
				t.Errorf("%s%s is not in values.schema.json", path, key)
			case p["description"] == nil:
				t.Errorf("%s%s has no description in values.schema.json", path, key)
			case p["type"] == nil && p["enum"] == nil:
				t.Errorf("%s%s has no type in values.schema.json", path, key)
			default:
				walk(path+key+".", v, p)
			}
		}
	}
	for _, values := range []string{"values.yaml", "examples/nats.yaml", "examples/sidecar.yaml"} {
		raw, err := os.ReadFile(filepath.Join(chart, values))
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := yaml.Unmarshal(raw, &v); err != nil {
			t.Fatalf("%s: %v", values, err)
		}
		walk("", v, root)
	}
}

// The schema's settings are jethook's settings, all but those the chart
// sets from its own values and the secret that belongs in a Secret: a
// setting added to cli/settings.go must be added to the schema, or the
// chart would refuse it.
func TestTheHelmChartsSettingsAreJethooksSettings(t *testing.T) {
	t.Parallel()
	var values map[string]any
	raw, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	settings, _ := values["settings"].(map[string]any)
	// examples/nats.yaml makes the chart set every setting it owns.
	c := named(get(render(t, install{values: "examples/nats.yaml"}).one(t, "Deployment"), "spec", "template", "spec", "containers"), "jethook")
	allowed := []string{"JETHOOK_NATS_TOKEN"}
	for name := range containerEnv(t, c) {
		if _, ok := settings[name]; !ok && jethookVar.MatchString(name) {
			allowed = append(allowed, name)
		}
	}
	props, _ := get(schema(t), "properties", "settings", "properties").(map[string]any)
	for name := range props {
		if slices.Contains(allowed, name) {
			t.Errorf("settings.%s is in the schema, but the chart sets it itself or it is a secret", name)
		}
		allowed = append(allowed, name)
	}
	slices.Sort(allowed)
	want := settingNames()
	slices.Sort(want)
	if !slices.Equal(allowed, want) {
		t.Errorf("the schema's settings and the chart's own are %v,\njethook's settings are %v", allowed, want)
	}
}

// A value of the wrong type, a misspelt key or a setting jethook does not
// have fails both helm lint and helm template with the key named, before
// anything is rendered.
func TestTheHelmChartRejectsABadValueNamingIt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		set, want string
	}{
		{"replicaCount=two", "at '/replicaCount': got string, want integer"},
		{"replicaCont=2", "additional properties 'replicaCont' not allowed"},
		{"kind=Statefulset", "at '/kind': value must be one of 'Deployment', 'StatefulSet'"},
		{"nats.replicas=7", "at '/nats/replicas'"},
		{"metrics.port=0", "at '/metrics/port'"},
		{"persistence.size=10GB", "at '/persistence/size'"},
		{"metrics.serviceMonitor.enable=true", "additional properties 'enable' not allowed"},
		{"settings.JETHOOK_LOG_LEVL=debug", "additional properties 'JETHOOK_LOG_LEVL' not allowed"},
		{"settings.JETHOOK_NATS_URL=nats://x:4222", "additional properties 'JETHOOK_NATS_URL' not allowed"},
	} {
		for _, cmd := range [][]string{{"template", "jethook"}, {"lint", "--strict"}} {
			out, err := helm(t, append(cmd, chart, "--set", tc.set)...)
			if err == nil || !strings.Contains(out+err.Error(), tc.want) {
				t.Errorf("helm %s --set %s: %v\n%s\nwant an error saying %q", cmd[0], tc.set, err, out, tc.want)
			}
		}
	}
}
