package installer

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/kube"
	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/inventory"
)

// resetScript uninstalls K3s through the scripts its install left (k3s-agent-uninstall.sh,
// k3s-uninstall.sh), then removes k3strap's own files, so that `apply` starts from scratch.
const resetScript = `did=
for s in /usr/local/bin/k3s-agent-uninstall.sh /usr/local/bin/k3s-uninstall.sh; do
  if [ -x "$s" ]; then "$s" >/dev/null 2>&1 || { echo "$s failed" >&2; exit 1; }; did=1; fi
done
rm -rf /var/lib/k3strap /etc/rancher/k3s
if [ -n "$did" ]; then echo "@k3strap reset"; else echo "@k3strap nothing"; fi`

// Reset uninstalls K3s from the selected hosts (every host when Options.Hosts is empty):
// agents first, in parallel; then servers one at a time, the first server last. When the
// first server stays, the reset hosts' Node objects are deleted from the cluster. Afterwards
// `apply` works on those hosts again. The caller asks for confirmation.
func (in *Installer) Reset(ctx context.Context) error {
	start := time.Now()
	s := in.newSession()
	s.command = "reset"
	defer s.close()
	err := s.finish(ctx, s.reset(ctx))
	s.summary("reset", start, err, "")
	return err
}

func (s *session) reset(ctx context.Context) error {
	c := s.in.cluster
	first := c.FirstServer()
	resetAll := len(s.in.opts.Hosts) == 0
	if first != nil && s.state(first.Name) == nil {
		// The first server stays; it deletes the reset nodes' objects.
		s.hosts = append([]*hostState{{host: first}}, s.hosts...)
	}
	s.connect(ctx)
	s.gather(ctx)
	if err := ctx.Err(); err != nil {
		return err
	}
	selected := map[string]bool{}
	for _, n := range s.in.opts.Hosts {
		selected[n] = true
	}
	var agents, servers []*hostState
	var fs *hostState
	for _, hs := range s.hosts {
		if !resetAll && !selected[hs.host.Name] {
			continue
		}
		switch {
		case first != nil && hs.host.Name == first.Name:
			fs = hs
		case hs.host.Role == inventory.RoleAgent:
			agents = append(agents, hs)
		default:
			servers = append(servers, hs)
		}
	}
	var keeper *hostState // the first server, when it stays and runs K3s
	if first != nil && fs == nil {
		if st := s.state(first.Name); st.facts != nil && st.facts.K3s.Installed() {
			keeper = st
			st.setResult(events.StatusUnchanged, "kept (not selected)")
		}
	}
	if keeper != nil {
		lk, err := s.lock(ctx, keeper, "reset")
		if err != nil {
			return err
		}
		defer lk.unlock()
	}
	var (
		mu     sync.Mutex
		failed []string
	)
	one := func(ctx context.Context, hs *hostState) {
		if err := s.resetOne(ctx, hs, keeper); err != nil {
			mu.Lock()
			failed = append(failed, hs.host.Name)
			mu.Unlock()
		}
	}
	s.each(ctx, agents, one)
	for _, hs := range servers {
		one(ctx, hs)
	}
	if fs != nil {
		one(ctx, fs)
	}
	if len(failed) > 0 {
		return &Failure{Code: ExitInstall, Phase: "reset", Info: events.ErrorInfo{
			Message: "reset failed on " + strings.Join(failed, ", "),
			Fix:     "see each host's error above",
			Resume:  "re-run `k3strap reset` for those hosts",
		}}
	}
	return nil
}

func (s *session) resetOne(ctx context.Context, hs *hostState, keeper *hostState) error {
	em := s.in.emitter("reset")
	if hs.connErr != nil || hs.c() == nil {
		hs.setResult(events.StatusFailed, "unreachable: "+errText(hs.connErr))
		return fmt.Errorf("unreachable")
	}
	res, err := hs.c().Check(ctx, remote.Script("reset", resetScript).AsRoot())
	if err != nil {
		hs.setResult(events.StatusFailed, "uninstall: "+err.Error())
		em.Fail(hs.host.Name, "reset", events.ErrorInfo{Message: err.Error(), Resume: "re-run `k3strap reset --host " + hs.host.Name + "`"})
		return err
	}
	if strings.Contains(string(res.Stdout), "@k3strap nothing") {
		hs.setResult(events.StatusUnchanged, "no K3s installed")
		em.Step(hs.host.Name, "reset", events.StatusUnchanged, "no K3s installed")
	} else {
		hs.setResult(events.StatusChanged, "K3s uninstalled")
		em.Step(hs.host.Name, "reset", events.StatusChanged, "K3s uninstalled, k3strap's files removed")
	}
	if keeper != nil {
		kc := kube.Kubectl{R: keeper.c()}
		if _, err := kc.Run(ctx, nil, "delete", "node", hs.host.Name, "--ignore-not-found"); err != nil {
			em.Warn(hs.host.Name, "could not delete its Node object: "+err.Error())
		} else {
			em.Step(hs.host.Name, "node", events.StatusChanged, "Node object deleted from the cluster")
		}
	}
	return nil
}
