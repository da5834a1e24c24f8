package cli

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

// Every block of the README (and of the docs pages that show commands)
// that starts with "$ jethook schedule" or "$ jethook simulate" shows
// exactly what that command prints for the shipped policies.yaml, so the
// published numbers cannot drift.
func TestTheREADMEsCommandExamplesPrintWhatTheyShow(t *testing.T) {
	t.Parallel()
	var text []byte
	for _, f := range []string{"../README.md", "../docs/protection.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text = append(text, b...)
	}
	blocks := strings.Split(string(text), "```")
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
				t.Errorf("README shows:\n%s\nthe command prints:\n%s", want, out.String())
			}
		})
		checked++
	}
	if checked < 5 {
		t.Fatalf("only %d README examples found", checked)
	}
}
