// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package simlog writes log lines in the two formats a real K3s v1.36.3 writes to stderr
// (and journald captures): logrus text lines
//
//	time="2026-11-21T23:35:05Z" level=info msg="k3s is up and running"
//
// and klog lines from the embedded Kubernetes components
//
//	I1121 23:35:14.480158   27884 kubelet_node_status.go:75] "Attempting to register node" node="vm"
//
// Formats follow testdata/real-k3s-v1.36.3/log-lines-*.txt.
package simlog

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Logger writes whole lines to one writer; it is safe for concurrent use.
type Logger struct {
	mu  sync.Mutex
	w   io.Writer
	now func() time.Time
	pid int
}

// New returns a Logger writing to w, stamping lines with the local time and this process id.
func New(w io.Writer) *Logger {
	return &Logger{w: w, now: time.Now, pid: os.Getpid()}
}

// NewAt returns a Logger with a fixed clock and process id (for tests comparing whole lines).
func NewAt(w io.Writer, now func() time.Time, pid int) *Logger {
	return &Logger{w: w, now: now, pid: pid}
}

// Raw is a klog key/value value printed verbatim (e.g. a JSON array like ["10.42.0.0/24"]).
type Raw string

func (l *Logger) write(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = io.WriteString(l.w, s)
}

// logrus text formatter: a value is quoted (Go %q) unless it consists only of these characters.
func needsQuoting(s string) bool {
	if s == "" {
		return true
	}
	for _, c := range s {
		if !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			c == '-' || c == '.' || c == '_' || c == '/' || c == '@' || c == '^' || c == '+') {
			return true
		}
	}
	return false
}

func (l *Logger) logrus(level, msg string) {
	ts := l.now().Format(time.RFC3339)
	m := msg
	if needsQuoting(m) {
		m = strconv.Quote(m)
	}
	l.write(fmt.Sprintf("time=%q level=%s msg=%s\n", ts, level, m))
}

// Infof logs a logrus info line.
func (l *Logger) Infof(format string, args ...any) { l.logrus("info", fmt.Sprintf(format, args...)) }

// Warnf logs a logrus warning line.
func (l *Logger) Warnf(format string, args ...any) {
	l.logrus("warning", fmt.Sprintf(format, args...))
}

// Errorf logs a logrus error line.
func (l *Logger) Errorf(format string, args ...any) { l.logrus("error", fmt.Sprintf(format, args...)) }

// Fatalf logs a logrus fatal line. Unlike logrus it does not exit: the caller returns an error
// so that in-process tests keep running.
func (l *Logger) Fatalf(format string, args ...any) { l.logrus("fatal", fmt.Sprintf(format, args...)) }

func (l *Logger) klogPrefix(sev byte, fileLine string) string {
	t := l.now()
	return fmt.Sprintf("%c%02d%02d %02d:%02d:%02d.%06d %7d %s] ", sev, int(t.Month()), t.Day(),
		t.Hour(), t.Minute(), t.Second(), t.Nanosecond()/1000, l.pid, fileLine)
}

// Klog logs a structured klog info line: the message quoted, then key="value" pairs. Values
// of type Raw are printed verbatim, anything else is formatted with %v and quoted.
func (l *Logger) Klog(fileLine, msg string, kv ...any) {
	var b strings.Builder
	b.WriteString(l.klogPrefix('I', fileLine))
	b.WriteString(strconv.Quote(msg))
	for i := 0; i+1 < len(kv); i += 2 {
		b.WriteByte(' ')
		fmt.Fprintf(&b, "%v=", kv[i])
		if r, ok := kv[i+1].(Raw); ok {
			b.WriteString(string(r))
		} else {
			b.WriteString(strconv.Quote(fmt.Sprint(kv[i+1])))
		}
	}
	b.WriteByte('\n')
	l.write(b.String())
}

// KlogText logs an unstructured klog info line (as the cloud node controller does).
func (l *Logger) KlogText(fileLine, text string) {
	l.write(l.klogPrefix('I', fileLine) + text + "\n")
}
