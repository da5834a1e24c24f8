package store

import (
	"fmt"
	"log/slog"
	"strings"
)

// serverLog is the embedded nats-server's logger: its warnings and errors
// go to jethook's log (its notices at debug level), and a write error it
// reports reaches the health monitor. In nats-server a file store that
// failed to write (a full disk, an I/O error) refuses every later write
// until it is reopened, and a publish it refuses that way gets no answer
// at all: this log line is the only word of it (filestore.go setWriteErr,
// stream.go processJetStreamMsg; pinned in writeerror_facts_test.go).
type serverLog struct {
	log        *slog.Logger
	writeError func(msg string)
}

// isWriteError reports whether an error line of nats-server says a store
// could not write: "Filestore [S] Critical write error: ...", "JetStream
// stream '$G > S' critical write error: ..." or "JetStream failed to store
// a msg on stream ...". Limits reached (maximum bytes, insufficient
// resources) are refused with an answer and are not logged this way.
func isWriteError(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "critical write error") || strings.Contains(m, "failed to store a msg")
}

func (l serverLog) Noticef(format string, v ...any) {
	l.log.Debug("nats-server: " + fmt.Sprintf(format, v...))
}

func (l serverLog) Warnf(format string, v ...any) {
	l.log.Warn("nats-server: " + fmt.Sprintf(format, v...))
}

func (l serverLog) Errorf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.log.Error("nats-server: " + msg)
	if isWriteError(msg) {
		l.writeError(msg)
	}
}

func (l serverLog) Fatalf(format string, v ...any) {
	l.log.Error("nats-server: " + fmt.Sprintf(format, v...))
}

func (l serverLog) Debugf(string, ...any) {}

func (l serverLog) Tracef(string, ...any) {}
