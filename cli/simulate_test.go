package cli

import (
	"bytes"
	"context"
	"encoding/xml"
	"os"
	"strings"
	"testing"
)

func TestSimulateComparesEveryStrategyAndDrawsAChart(t *testing.T) {
	t.Parallel()
	svg := t.TempDir() + "/chart.svg"
	var out bytes.Buffer
	args := []string{"-config", "../policies.yaml", "-all", "-arrival", "0", "-burst", "200",
		"-outage-start", "0s", "-outage", "20s", "-capacity", "50/s", "-limits=false", "-svg", svg}
	if err := runSimulate(context.Background(), args, &out); err != nil {
		t.Fatal(err)
	}
	rows := 0
	for line := range strings.SplitSeq(out.String(), "\n") {
		f := strings.Fields(line)
		if len(f) == 14 && (f[0] == "fixed" || f[0] == "linear" || f[0] == "exponential") {
			rows++
		}
	}
	if rows != 12 {
		t.Fatalf("%d strategy rows, want 12:\n%s", rows, out.String())
	}
	data, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		XMLName  xml.Name
		Polyline []struct{} `xml:"polyline"`
	}
	if err := xml.Unmarshal(data, &doc); err != nil || doc.XMLName.Local != "svg" || len(doc.Polyline) != 12 {
		t.Fatalf("chart: %v, root %q, %d lines", err, doc.XMLName.Local, len(doc.Polyline))
	}
}

func TestSimulateRejectsAnUnknownJitter(t *testing.T) {
	t.Parallel()
	err := runSimulate(context.Background(), []string{"-config", "../policies.yaml", "-jitter", "wobbly"}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "-jitter") {
		t.Fatalf("err = %v", err)
	}
}
