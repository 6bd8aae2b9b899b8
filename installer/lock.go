package installer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/remote"
)

// PathLock is the run lock on the first server: while it is held and fresh, no other k3strap
// run changes the cluster (issue 3).
const PathLock = "/var/lib/k3strap/run.lock"

// Lock timing: the holder refreshes the lock every LockRefresh; a lock older than LockTTL is
// stale (its run died) and may be taken over.
const (
	LockTTL     = 90 * time.Second
	LockRefresh = 20 * time.Second
)

// lockScript takes, refreshes or releases the lock file $2 for id $3 (holder text $4, TTL
// seconds $5). It prints "acquired", "took-over AGE HOLDER", "held AGE HOLDER", "refreshed",
// "released" or "lost HOLDER". Creation is atomic (noclobber: O_EXCL).
const lockScript = `op=$1 f=$2 id=$3 holder=$4 ttl=$5
mkdir -p "$(dirname "$f")"
age() { echo $(( $(date +%s) - $(stat -c %Y "$f" 2>/dev/null || date +%s) )); }
case $op in
acquire)
  if ( set -C; printf '%s\n%s\n' "$id" "$holder" > "$f" ) 2>/dev/null; then echo acquired; exit 0; fi
  a=$(age); h=$(sed -n 2p "$f" 2>/dev/null)
  if [ "$a" -gt "$ttl" ]; then
    rm -f "$f"
    if ( set -C; printf '%s\n%s\n' "$id" "$holder" > "$f" ) 2>/dev/null; then echo "took-over $a $h"; exit 0; fi
    h=$(sed -n 2p "$f" 2>/dev/null); a=$(age)
  fi
  echo "held $a $h"; exit 0 ;;
refresh)
  if [ "$(sed -n 1p "$f" 2>/dev/null)" = "$id" ]; then touch "$f"; echo refreshed; else echo "lost $(sed -n 2p "$f" 2>/dev/null)"; fi ;;
release)
  if [ "$(sed -n 1p "$f" 2>/dev/null)" = "$id" ]; then rm -f "$f"; fi; echo released ;;
esac`

// runLock is a held lock; release it with unlock.
type runLock struct {
	hs     *hostState
	id     string
	cancel context.CancelFunc
	done   chan struct{}
}

// holderText says who holds a lock: user@machine, pid, start time, command.
func holderText(command string) string {
	u := "unknown"
	if cu, err := user.Current(); err == nil {
		u = cu.Username
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s@%s (pid %d, k3strap %s since %s)", u, host, os.Getpid(), command, time.Now().UTC().Format(time.RFC3339))
}

// lock takes the run lock on the first server, or fails naming who holds it. The lock is
// refreshed in the background until unlock.
func (s *session) lock(ctx context.Context, first *hostState, command string) (*runLock, error) {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	ttl := strconv.Itoa(int(LockTTL.Seconds()))
	res, err := first.c().Check(ctx, remote.Script("lock", lockScript, "acquire", PathLock, id, holderText(command), ttl).AsRoot())
	if err != nil {
		return nil, s.hostFailure(first, "lock", ExitInstall, err)
	}
	out := strings.TrimSpace(string(res.Stdout))
	switch {
	case out == "acquired":
	case strings.HasPrefix(out, "took-over "):
		f := strings.SplitN(out, " ", 3)
		s.in.emitter("lock").Warn(first.host.Name, fmt.Sprintf("took over a stale lock (%s s old) of %s", f[1], strings.Join(f[2:], " ")))
	default:
		f := strings.SplitN(out, " ", 3)
		holder, age := "another k3strap run", "?"
		if len(f) == 3 {
			age, holder = f[1], f[2]
		}
		first.setResult(events.StatusFailed, "locked by "+holder)
		return nil, &Failure{Code: ExitInstall, Phase: "lock", Host: first.host.Name, Info: events.ErrorInfo{
			Message: fmt.Sprintf("another k3strap run holds the cluster lock on %s: %s (refreshed %s s ago)", first.host.Name, holder, age),
			Fix:     fmt.Sprintf("wait for it to finish; a lock not refreshed for %s is stale and taken over automatically (or remove %s on %s if you are sure)", LockTTL, PathLock, first.host.Name),
			Resume:  "re-run the same command",
		}}
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l := &runLock{hs: first, id: id, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		t := time.NewTicker(LockRefresh)
		defer t.Stop()
		for {
			select {
			case <-lctx.Done():
				return
			case <-t.C:
				rctx, rcancel := context.WithTimeout(lctx, 15*time.Second)
				_, _ = first.c().Run(rctx, remote.Script("lock", lockScript, "refresh", PathLock, id, "", ttl).AsRoot())
				rcancel()
			}
		}
	}()
	return l, nil
}

// unlock releases the lock (best effort: an unreleased lock goes stale after LockTTL).
func (l *runLock) unlock() {
	if l == nil {
		return
	}
	l.cancel()
	<-l.done
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if c := l.hs.c(); c != nil {
		_, _ = c.Run(ctx, remote.Script("lock", lockScript, "release", PathLock, l.id, "", "0").AsRoot())
	}
}
