// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// proxyConn is a net.Conn over the standard input and output of a local process: OpenSSH's
// ProxyCommand. Closing it kills the process (its whole process group) and reaps it.
type proxyConn struct {
	cmd     *exec.Cmd
	r       *os.File // the command's stdout
	w       *os.File // the command's stdin
	stderr  *tailBuffer
	line    string
	once    sync.Once
	exited  chan struct{}
	waitErr error
}

// startProxyCommand runs command (tokens already expanded) with /bin/sh -c, as OpenSSH does
// with the user's shell ("exec" so that the shell does not stay in between), in its own
// process group. The caller must Close the returned conn.
func startProxyCommand(command string) (*proxyConn, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		_ = inR.Close()
		_ = inW.Close()
		return nil, err
	}
	cmd := proxyShell(command)
	cmd.Stdin, cmd.Stdout = inR, outW
	tail := &tailBuffer{max: 512}
	cmd.Stderr = tail
	ownProcessGroup(cmd)
	cmd.WaitDelay = time.Second
	err = cmd.Start()
	_ = inR.Close()
	_ = outW.Close()
	if err != nil {
		_ = inW.Close()
		_ = outR.Close()
		return nil, fmt.Errorf("starting ProxyCommand %q: %w", command, err)
	}
	p := &proxyConn{cmd: cmd, r: outR, w: inW, stderr: tail, line: command, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func (p *proxyConn) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p *proxyConn) Write(b []byte) (int, error) { return p.w.Write(b) }

// Close kills the command's process group and closes the pipes.
func (p *proxyConn) Close() error {
	p.once.Do(func() {
		_ = p.w.Close()
		_ = p.r.Close()
		if p.cmd.Process != nil {
			killProcessGroup(p.cmd)
		}
	})
	return nil
}

// exitError says how the command ended when it has (within a short grace period), with the
// last line it wrote to stderr; nil while it runs.
func (p *proxyConn) exitError() error {
	select {
	case <-p.exited:
	case <-time.After(200 * time.Millisecond):
		return nil
	}
	msg := fmt.Sprintf("ProxyCommand %q ended", p.line)
	if p.waitErr != nil {
		msg += " (" + p.waitErr.Error() + ")"
	}
	if last := p.stderr.lastLine(); last != "" {
		msg += ": " + last
	}
	return fmt.Errorf("%s", msg)
}

func (p *proxyConn) LocalAddr() net.Addr  { return proxyAddr(p.line) }
func (p *proxyConn) RemoteAddr() net.Addr { return proxyAddr(p.line) }

func (p *proxyConn) SetDeadline(t time.Time) error {
	return errors.Join(p.r.SetReadDeadline(t), p.w.SetWriteDeadline(t))
}
func (p *proxyConn) SetReadDeadline(t time.Time) error  { return p.r.SetReadDeadline(t) }
func (p *proxyConn) SetWriteDeadline(t time.Time) error { return p.w.SetWriteDeadline(t) }

// proxyAddr is the address of a ProxyCommand connection: the command line.
type proxyAddr string

func (a proxyAddr) Network() string { return "proxycommand" }
func (a proxyAddr) String() string  { return string(a) }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(b), nil
}

func (t *tailBuffer) lastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.buf)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
