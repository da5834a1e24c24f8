package cli

import (
	"bytes"
	"strings"
	"testing"
)

func TestHelpListsTheCommandsAndServeHelpItsFlags(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		var out, errOut bytes.Buffer
		if code := Main(args, &out, &errOut); code != 0 {
			t.Errorf("jethook %v: exit %d, stderr %q", args, code, errOut.String())
		}
		for _, c := range commands() {
			if !strings.Contains(out.String(), "  "+c.name+" ") {
				t.Errorf("jethook %v does not list %q:\n%s", args, c.name, out.String())
			}
		}
	}
	var out, errOut bytes.Buffer
	if code := Main([]string{"serve", "-h"}, &out, &errOut); code != 0 {
		t.Errorf("jethook serve -h: exit %d", code)
	}
	if !strings.Contains(out.String()+errOut.String(), "Usage of jethook serve") {
		t.Errorf("jethook serve -h did not show serve's flags: %q %q", out.String(), errOut.String())
	}
}
