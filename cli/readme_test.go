package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/provider"
)

// docsText is the README and every page under docs/, one after another.
func docsText(t *testing.T) string {
	t.Helper()
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, p := range append([]string{"../README.md"}, pages...) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
		all.WriteString("\n")
	}
	return all.String()
}

// Every block in the README or docs/ that starts with "$ jethook schedule"
// or "$ jethook simulate" shows exactly what that command prints for the
// shipped policies.yaml, so the published numbers cannot drift.
func TestTheDocsCommandExamplesPrintWhatTheyShow(t *testing.T) {
	t.Parallel()
	blocks := strings.Split(docsText(t), "```")
	run := map[string]func(context.Context, []string, *bytes.Buffer) error{
		"schedule": func(ctx context.Context, a []string, b *bytes.Buffer) error { return runSchedule(ctx, a, b) },
		"simulate": func(ctx context.Context, a []string, b *bytes.Buffer) error { return runSimulate(ctx, a, b) },
	}
	checked := 0
	for i := 1; i < len(blocks); i += 2 {
		block := strings.TrimPrefix(blocks[i], "\n")
		first, want, _ := strings.Cut(block, "\n")
		args := strings.Fields(strings.TrimPrefix(first, "$ "))
		if !strings.HasPrefix(first, "$ jethook ") || len(args) < 2 || run[args[1]] == nil {
			continue
		}
		t.Run(first, func(t *testing.T) {
			var out bytes.Buffer
			if err := run[args[1]](context.Background(), append([]string{"-config", "../policies.yaml"}, args[2:]...), &out); err != nil {
				t.Fatal(err)
			}
			if strings.TrimSpace(out.String()) != strings.TrimSpace(want) {
				t.Errorf("the docs show:\n%s\nthe command prints:\n%s", want, out.String())
			}
		})
		checked++
	}
	if checked < 5 {
		t.Fatalf("only %d examples found in the docs", checked)
	}
}

// The README's configuration example is a policies.yaml that jethook
// check accepts.
func TestTheREADMEsConfigurationExamplePassesCheck(t *testing.T) {
	t.Setenv("GITHUB_WEBHOOK_SECRET", "a-secret")
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "```yaml\ndefaults:")
	if !ok {
		t.Fatal("README has no yaml block starting with defaults:")
	}
	example, _, _ := strings.Cut(rest, "```")
	file := filepath.Join(t.TempDir(), "policies.yaml")
	if err := os.WriteFile(file, []byte("defaults:"+example), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runCheck(context.Background(), []string{"-config", file}, &out); err != nil {
		t.Fatalf("jethook check refuses the README's example: %v\n%s", err, out.String())
	}
}

// Every provider has a section in docs/providers.md, and every route in
// it loads as written, given its secrets: each is configured from the docs
// alone.
func TestEveryProviderIsDocumentedWithARouteThatLoads(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/providers.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range provider.Names() {
		if !strings.Contains(string(doc), "\n    provider: "+name+"\n") {
			t.Errorf("docs/providers.md has no route with provider %s", name)
		}
	}
	sendgridKey, _ := presetSendGridKey()
	env := func(v string) (string, bool) {
		switch {
		case strings.Contains(v, "SENDGRID"):
			return sendgridKey, true
		case strings.Contains(v, "BILLING"), strings.Contains(v, "CLERK"), strings.Contains(v, "APP_WEBHOOK"), strings.Contains(v, "SIGNING_TOKEN"):
			return "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", true
		}
		return "s3cret-" + strings.ToLower(v), true
	}
	blocks := strings.Split(string(doc), "```")
	loaded := 0
	for i := 1; i < len(blocks); i += 2 {
		block, ok := strings.CutPrefix(blocks[i], "yaml\n")
		if !ok {
			continue
		}
		if _, err := policy.Parse("docs/providers.md", []byte("routes:\n"+block), env); err != nil {
			t.Errorf("a route of docs/providers.md does not load: %v\n%s", err, block)
		}
		loaded++
	}
	if loaded < len(provider.Names()) {
		t.Fatalf("%d routes loaded, want one per provider (%d)", loaded, len(provider.Names()))
	}
}

// Every relative link of the README and docs/ points at a file that
// exists and, with a #fragment into a Markdown page, at one of its
// headings (GitHub's anchors: lower case, punctuation dropped, spaces as
// hyphens).
func TestTheDocsLinksResolve(t *testing.T) {
	t.Parallel()
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{"../README.md"}, pages...)
	code := regexp.MustCompile("(?s)```.*?```")
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading := regexp.MustCompile(`(?m)^#{1,6} (.*)$`)
	punct := regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(page string) map[string]bool {
		if a, ok := anchors[page]; ok {
			return a
		}
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		a := map[string]bool{}
		for _, m := range heading.FindAllStringSubmatch(code.ReplaceAllString(string(b), ""), -1) {
			slug := strings.ReplaceAll(punct.ReplaceAllString(strings.ToLower(strings.TrimSpace(m[1])), ""), " ", "-")
			a[slug] = true
		}
		anchors[page] = a
		return a
	}
	checked := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(code.ReplaceAllString(string(b), ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, fragment, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links %s: no such file", page, target)
				continue
			}
			if fragment != "" && strings.HasSuffix(path, ".md") && !anchorsOf(path)[fragment] {
				t.Errorf("%s links %s: %s has no such heading", page, target, path)
			}
			checked++
		}
	}
	if checked < 50 {
		t.Fatalf("only %d links checked", checked)
	}
}

// The README and the docs count the provider presets as the code does:
// every "N provider presets" (or "N providers", "N presets", "N more") in
// them is the length of the preset table.
func TestTheDocsCountTheProviderPresets(t *testing.T) {
	t.Parallel()
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	count := regexp.MustCompile(`\b(\d+) (?:provider presets|providers|presets|senders|more)\b`)
	want := len(provider.Presets())
	found := 0
	for _, p := range append([]string{"../README.md"}, pages...) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range count.FindAllStringSubmatch(string(b), -1) {
			found++
			if n, _ := strconv.Atoi(m[1]); n != want {
				t.Errorf("%s says %q; the code has %d presets", p, m[0], want)
			}
		}
	}
	if found == 0 {
		t.Fatal("no page counts the presets; this check finds nothing")
	}
}
