// Command jethook is a webhook retry proxy: it answers providers at once,
// keeps every payload in NATS JetStream, and delivers it to your backend
// with a jittered retry schedule. See README.md.
package main

import (
	"os"

	"github.com/jethook/jethook/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
