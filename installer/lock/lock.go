// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package lock is the cluster's run lock on the first server (k3s.PathLock): while it is held
// and fresh, no other k3strap run changes the cluster. Taking it is one atomic step on the host
// (lock.sh under flock); a lock not refreshed for TTL, or whose holder provably died on this
// machine, is taken over.
package lock

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/k3s"
)

// Lock timing: the holder refreshes the lock every Refresh; a lock older than TTL is
// stale (its run died) and may be taken over.
const (
	TTL     = 90 * time.Second
	Refresh = 20 * time.Second
)

// Held is a held lock, refreshed in the background until Release.
type Held struct {
	client func() remote.Host
	id     string
	cancel context.CancelFunc
	done   chan struct{}
}

// Holder says who takes a lock, for the message of a run that finds it held: "USER@HOST (pid
// PID, k3strap COMMAND since TIME)". USER is the workstation user's login name (os/user, then
// $USER, then $LOGNAME); only when none is known is it "uid N". The cluster's run lock and a
// fleet's state-file lock (package fleet) describe their holder with it.
func Holder(command string, now time.Time) string {
	host, _ := os.Hostname()
	if host == "" {
		host = "unknown-host"
	}
	return fmt.Sprintf("%s@%s (pid %d, k3strap %s since %s)", userName(), host, os.Getpid(), command, now.UTC().Format(time.RFC3339))
}

// userName returns the login name of the user running k3strap (see Holder).
func userName() string {
	if cu, err := user.Current(); err == nil && cu.Username != "" {
		return cu.Username
	}
	if u, err := user.LookupId(strconv.Itoa(os.Getuid())); err == nil && u.Username != "" {
		return u.Username
	}
	for _, v := range []string{"USER", "LOGNAME"} {
		if s := os.Getenv(v); s != "" {
			return s
		}
	}
	return "uid " + strconv.Itoa(os.Getuid())
}

// holderText is Holder now.
func holderText(command string) string { return Holder(command, time.Now()) }

// lockOwner identifies this process for a lock: "MACHINE-ID:HOSTNAME" ("-" when the machine
// has no machine-id), the pid and the pid's start time ("-" where /proc has none).
type lockOwner struct {
	machine string
	pid     int
	start   string
}

func thisOwner() lockOwner {
	o := lockOwner{machine: "-", pid: os.Getpid(), start: "-"}
	for _, p := range []string{"/etc/machine-id", "/var/lib/dbus/machine-id"} {
		if b, err := os.ReadFile(p); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			host, _ := os.Hostname()
			o.machine = strings.TrimSpace(string(b)) + ":" + strings.ReplaceAll(host, " ", "_")
			break
		}
	}
	if st, ok := procStart(o.pid); ok {
		o.start = st
	}
	return o
}

// procStart returns the start time (clock ticks since boot, /proc/PID/stat field 22) of pid.
func procStart(pid int) (string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return "", false
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 20 {
		return "", false
	}
	return f[19], true
}

// holderGone reports whether a lock's holder is provably dead: it ran on this machine (same
// machine-id and host name) and its pid no longer exists, or now belongs to a process started
// at another time.
func (o lockOwner) holderGone(machine, pid, start string) bool {
	if o.machine == "-" || machine != o.machine {
		return false
	}
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 || n == o.pid {
		return false
	}
	p, err := os.FindProcess(n)
	if err != nil {
		return true
	}
	if err := p.Signal(syscall.Signal(0)); errors.Is(err, os.ErrProcessDone) || errors.Is(err, syscall.ESRCH) {
		return true
	}
	if st, ok := procStart(n); ok && start != "-" && st != start {
		return true
	}
	return false
}

// Attempt is the outcome of one Try.
type Attempt struct {
	// Acquired says this attempt holds the lock now (TookOver says it replaced a stale lock or
	// one whose holder provably died).
	Acquired, TookOver bool
	// Holder and Age describe the lock found: who held it and how many seconds ago it was last
	// refreshed (when taken over or refused).
	Holder, Age string
	// ID identifies the lock taken, for refreshing and releasing it.
	ID string
}

// Try makes one attempt to take the run lock k3s.PathLock on c's host for command. A lock not
// refreshed for TTL, or held by a k3strap process of this machine that no longer exists,
// is taken over; of several runs trying at once, exactly one gets the lock.
func Try(ctx context.Context, c remote.Host, command string) (Attempt, error) {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	at := Attempt{ID: hex.EncodeToString(b)}
	me := thisOwner()
	ttl := strconv.Itoa(int(TTL.Seconds()))
	holder := holderText(command)
	run := func(op, expect string) (string, error) {
		res, err := c.Check(ctx, remote.Script("lock", script, op, k3s.PathLock, at.ID, holder, ttl,
			me.machine, strconv.Itoa(me.pid), me.start, expect).AsRoot())
		if err != nil {
			return "", err
		}
		out := strings.TrimSpace(string(res.Stdout))
		if out == "busy" {
			return "", fmt.Errorf("%s: the lock %s stayed busy for 30 s", c.Host(), k3s.PathLock)
		}
		return out, nil
	}
	out, err := run("acquire", "")
	if err != nil {
		return at, err
	}
	// held AGE ID OWNER PID START HOLDER
	if f := strings.SplitN(out, " ", 7); f[0] == "held" && len(f) == 7 && me.holderGone(f[3], f[4], f[5]) {
		if out, err = run("takeover", f[2]); err != nil {
			return at, err
		}
	}
	switch f := strings.SplitN(out, " ", 3); {
	case out == "acquired":
		at.Acquired = true
	case f[0] == "took-over":
		at.Acquired, at.TookOver = true, true
		if len(f) == 3 {
			at.Age, at.Holder = f[1], f[2]
		}
	default:
		at.Holder, at.Age = "another k3strap run", "?"
		if g := strings.SplitN(out, " ", 7); g[0] == "held" && len(g) == 7 {
			at.Age, at.Holder = g[1], g[6]
		}
	}
	return at, nil
}

// Release stops refreshing and releases the lock (best effort: an unreleased lock goes stale
// after TTL).
func (l *Held) Release() {
	if l == nil {
		return
	}
	l.cancel()
	<-l.done
	// Bounded briefly: a run that is ending (Ctrl-C included) must not wait for a dead link.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if c := l.client(); c != nil {
		_, _ = c.Run(ctx, remote.Script("lock", script, "release", k3s.PathLock, l.id, "", "0", "", "", "", "").AsRoot())
	}
}

// Hold keeps the lock at took (taken by Try) refreshed every Refresh through client (a
// reconnect may replace the connection) until Release.
func Hold(ctx context.Context, client func() remote.Host, took Attempt) *Held {
	id := took.ID
	ttl := strconv.Itoa(int(TTL.Seconds()))
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l := &Held{client: client, id: id, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		t := time.NewTicker(Refresh)
		defer t.Stop()
		for {
			select {
			case <-lctx.Done():
				return
			case <-t.C:
				rctx, rcancel := context.WithTimeout(lctx, 15*time.Second)
				_, _ = client().Run(rctx, remote.Script("lock", script, "refresh", k3s.PathLock, id, "", ttl, "", "", "", "").AsRoot())
				rcancel()
			}
		}
	}()
	return l
}

// script takes, takes over, refreshes or releases the lock (lock.sh, the host paths before it).
var script = k3s.ShellVars() + lockScript

//go:embed lock.sh
var lockScript string
