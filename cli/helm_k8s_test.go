package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// kubernetesTypes are the objects the chart renders, by apiVersion and
// kind, each as a new value of Kubernetes' own API type (k8s.io/api).
// The Prometheus Operator's two kinds are not Kubernetes' and are checked
// apart: TestTheHelmChartsMonitoringScrapesTheAdminListener reads the
// ServiceMonitor, and the PrometheusRule's spec must equal the rules file
// that promtool checks.
var kubernetesTypes = map[string]func() any{
	"apps/v1 Deployment":       func() any { return new(appsv1.Deployment) },
	"apps/v1 StatefulSet":      func() any { return new(appsv1.StatefulSet) },
	"v1 ConfigMap":             func() any { return new(corev1.ConfigMap) },
	"v1 PersistentVolumeClaim": func() any { return new(corev1.PersistentVolumeClaim) },
	"v1 Service":               func() any { return new(corev1.Service) },
}

// operatorKinds are the Prometheus Operator's kinds the chart may render.
var operatorKinds = []string{"monitoring.coreos.com/v1 PrometheusRule", "monitoring.coreos.com/v1 ServiceMonitor"}

// checkObject decodes a rendered object strictly into its Kubernetes API
// type: a field the type does not have, at any depth, or a value of the
// wrong type or form (a port as a word, a quantity that is not one) is an
// error, where an API server would refuse the object or drop the field.
func checkObject(doc map[string]any) error {
	kind := fmt.Sprint(doc["apiVersion"], " ", doc["kind"])
	newObject, ok := kubernetesTypes[kind]
	if !ok {
		return fmt.Errorf("%s: not a kind this test knows; add its type to kubernetesTypes", kind)
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(newObject()); err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	return nil
}

// Every object of every documented install is a valid object of
// Kubernetes' API as far as its types go, checked offline against
// k8s.io/api rather than a schema fetched from the network.
func TestTheHelmChartsObjectsDecodeStrictlyIntoKubernetesTypes(t *testing.T) {
	t.Parallel()
	checked := 0
	for _, in := range installs {
		for _, objects := range render(t, in) {
			for name, doc := range objects {
				doc := doc.(map[string]any)
				if kind := fmt.Sprint(doc["apiVersion"], " ", doc["kind"]); strings.HasPrefix(kind, "monitoring.coreos.com/") {
					if !strings.Contains(strings.Join(operatorKinds, "\n"), kind) {
						t.Errorf("%v: %s %s: an operator kind this test does not know", in, kind, name)
					}
					continue
				}
				if err := checkObject(doc); err != nil {
					t.Errorf("%v: %s: %v", in, name, err)
				}
				checked++
			}
		}
	}
	if checked < 2*len(installs) {
		t.Errorf("checked %d objects over %d installs, want at least a workload and a Service each", checked, len(installs))
	}
}

// The check finds what it is for: each of these breaks a rendered
// Deployment in one place, as a slip in a template would.
func TestTheKubernetesCheckRefusesABrokenObject(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"a misspelt field", `{apiVersion: apps/v1, kind: Deployment, spec: {replica: 2}}`, `unknown field "replica"`},
		{"a field one level too high", `{apiVersion: apps/v1, kind: Deployment, spec: {template: {containers: []}}}`, `unknown field "containers"`},
		{"a port as a word", `{apiVersion: v1, kind: Service, spec: {ports: [{port: http}]}}`, "cannot unmarshal string"},
		{"a size that is not a quantity", `{apiVersion: v1, kind: PersistentVolumeClaim, spec: {resources: {requests: {storage: 10GB}}}}`, "quantities must match"},
		{"a kind the chart does not make", `{apiVersion: v1, kind: Secret}`, "not a kind this test knows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var doc map[string]any
			if err := yaml.Unmarshal([]byte(tc.yaml), &doc); err != nil {
				t.Fatal(err)
			}
			if err := checkObject(doc); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("checkObject = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
