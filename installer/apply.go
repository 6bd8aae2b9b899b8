package installer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/kube"
	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/inventory"
)

// Apply converges every host to the inventory: preflight, then the first server (files,
// install, start, supervised bring-up), further servers one at a time, agents in parallel, and
// the kubeconfig. A host whose files, unit and service already match is left alone (no
// upload, no rewrite, no restart) and reported "unchanged".
func (in *Installer) Apply(ctx context.Context) error {
	return in.run(ctx, "apply")
}

// Upgrade is Apply for a new spec.k3s.version: servers one at a time, then agents in batches
// (UpgradeBatchPercent of the agents, at least 1), each drained (unless NoDrain) and
// uncordoned once Ready on the new version. Downgrades are refused by preflight's
// ExistingInstall check unless Force.
func (in *Installer) Upgrade(ctx context.Context) error {
	return in.run(ctx, "upgrade")
}

func (in *Installer) run(ctx context.Context, command string) error {
	start := time.Now()
	s := in.newSession()
	s.command = command
	defer s.close()
	kubeconfig, err := s.apply(ctx)
	err = s.finish(ctx, err)
	s.summary(s.command, start, err, kubeconfig)
	return err
}

// finish turns a run's error into what the user sees: cancellation becomes ExitCancelled,
// every failure but preflight's (already reported as findings) is emitted with its fix.
func (s *session) finish(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		err = &Failure{Code: ExitCancelled, Phase: s.command, Info: events.ErrorInfo{
			Message: "cancelled; the step that was running finished or was stopped before anything was half-written",
			Resume:  "re-run `k3strap " + s.command + "` to continue",
		}}
	}
	var f *Failure
	switch {
	case errors.As(err, &f):
		if f.Code != ExitPreflight {
			s.in.emitter(f.Phase).Fail(f.Host, f.Phase, f.Info)
		}
	default:
		s.in.emitter(s.command).Fail("", s.command, events.ErrorInfo{Message: err.Error(), Resume: "re-run `k3strap " + s.command + "`"})
	}
	return err
}

func (s *session) apply(ctx context.Context) (string, error) {
	c := s.in.cluster
	first := c.FirstServer()
	if first == nil {
		return "", &Failure{Code: ExitInvalid, Phase: "plan", Info: events.ErrorInfo{Message: "the inventory has no server", Fix: "give at least one host role: server"}}
	}
	if s.state(first.Name) == nil {
		// --host selected only agents/joining servers: the first server is still needed for
		// the token and the API.
		s.hosts = append([]*hostState{{host: first}}, s.hosts...)
	}
	planner := &Planner{Cluster: c, APIAddress: s.in.opts.APIAddress}
	s.planner = planner
	s.connect(ctx)
	s.gather(ctx)
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if _, err := s.preflight(); err != nil {
		return "", err
	}
	fs := s.state(first.Name)
	if fs.facts == nil {
		return "", s.hostFailure(fs, "connect", ExitInstall, fmt.Errorf("the first server is unreachable: %w", fs.connErr))
	}
	em := s.in.emitter("plan")
	for _, hs := range s.hosts {
		if hs.facts == nil {
			// Unreachable, with the SSH check ignored: reported, not planned.
			hs.setResult(events.StatusFailed, "unreachable: "+errText(hs.connErr))
			continue
		}
		p, err := planner.Plan(hs.host, hs.facts.Arch)
		if err != nil {
			hs.setResult(events.StatusFailed, err.Error())
			return "", &Failure{Code: ExitInstall, Phase: "plan", Host: hs.host.Name, Info: events.ErrorInfo{Message: err.Error(), Resume: "fix the inventory and re-run `k3strap apply`"}}
		}
		hs.plan = p
	}
	em.Finished(events.StatusOK, "")

	if s.in.opts.DryRun {
		return "", s.dryRunAll(ctx, fs)
	}
	lk, err := s.lock(ctx, fs, s.command)
	if err != nil {
		return "", err
	}
	defer lk.unlock()

	if err := s.firstServer(ctx, fs); err != nil {
		return "", err
	}
	if err := s.joinAll(ctx, fs); err != nil {
		return "", err
	}
	kubeconfig, err := s.kubeconfig(ctx, fs)
	if err != nil {
		return "", err
	}
	return kubeconfig, s.postInstall(ctx, fs)
}

func errText(err error) string {
	if err == nil {
		return "unknown"
	}
	return err.Error()
}

// dryRunAll reports, per host, what apply would change; it reads (token, current files) but
// writes nothing.
func (s *session) dryRunAll(ctx context.Context, first *hostState) error {
	if err := s.firstServerToken(ctx, first); err != nil {
		return err
	}
	if _, err := s.converge(ctx, first); err != nil {
		return err
	}
	var token inventory.Secret
	if first.facts.K3s.TokenPresent {
		b, err := first.c().ReadFile(ctx, PathServerToken)
		if err != nil {
			return s.hostFailure(first, "token", ExitInstall, err)
		}
		token = inventory.Secret(strings.TrimSpace(string(b)))
	}
	for _, hs := range s.hosts {
		if hs == first || hs.plan == nil {
			continue
		}
		if token != "" {
			hs.plan.SetToken(token, false)
		} else {
			// The first server does not exist yet: its token will be new.
			hs.plan.SetToken("(the first server's new token)", false)
		}
		if _, err := s.converge(ctx, hs); err != nil {
			return err
		}
	}
	return nil
}

// upgrading reports whether apply changes the K3s version of an installed host.
func (s *session) upgrading(hs *hostState) bool {
	want := s.in.cluster.Spec.K3s.Version
	have := hs.facts.K3s.BinaryVersion
	return want != "" && have != "" && have != want
}

// firstServer converges and supervises the server that initialises the cluster. When its
// K3s version changes and other nodes can take its pods, it is drained first and uncordoned
// once it is Ready on the new version.
func (s *session) firstServer(ctx context.Context, hs *hostState) error {
	em := s.in.emitter("init-server")
	em.Started("first server " + hs.host.Name)
	if err := s.firstServerToken(ctx, hs); err != nil {
		return err
	}
	upgrade := s.upgrading(hs)
	drained := false
	if upgrade && len(s.in.cluster.Spec.Hosts) > 1 {
		if err := s.drain(ctx, hs, hs); err != nil {
			return err
		}
		drained = !s.in.opts.NoDrain
	}
	res, err := s.converge(ctx, hs)
	if err != nil {
		return err
	}
	sup := &supervisor{s: s, hs: hs, em: s.in.emitter("supervise")}
	if err := sup.run(ctx, res); err != nil {
		hs.setResult(events.StatusFailed, "bring-up: "+firstLine(err))
		return err
	}
	if upgrade {
		view := &nodeView{kc: kube.Kubectl{R: hs.c()}, interval: 500 * time.Millisecond}
		if err := s.waitNode(ctx, hs, view, s.in.cluster.Spec.K3s.Version); err != nil {
			return s.hostFailure(hs, "upgrade", ExitBringUp, err)
		}
		if drained {
			if err := s.uncordon(ctx, hs, hs); err != nil {
				return err
			}
		}
		res.upgradedFrom = hs.facts.K3s.BinaryVersion
	}
	hs.setResult(res.status(), res.describe())
	em.Finished(events.StatusOK, "")
	return nil
}

func firstLine(err error) string {
	var f *Failure
	if errors.As(err, &f) {
		return f.Info.Message
	}
	return err.Error()
}

// firstServerToken decides the first server's token file: the inventory's token; else the
// one already on the host (never regenerated); else the token of a K3s installed without
// k3strap (read back); else a new one from crypto/rand.
func (s *session) firstServerToken(ctx context.Context, hs *hostState) error {
	if t := s.in.cluster.Spec.K3s.Token; t != "" {
		hs.plan.SetToken(t, false)
		return nil
	}
	if hs.facts.K3s.Files[PathTokenFile] != "" {
		hs.plan.SetToken("existing", true)
		return nil
	}
	if hs.facts.K3s.TokenPresent {
		b, err := hs.c().ReadFile(ctx, PathServerToken)
		if err != nil {
			return s.hostFailure(hs, "token", ExitInstall, fmt.Errorf("reading the existing K3s token: %w", err))
		}
		hs.plan.SetToken(inventory.Secret(TokenPassword(strings.TrimSpace(string(b)))), false)
		return nil
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return err
	}
	hs.plan.SetToken(inventory.Secret(hex.EncodeToString(buf)), false)
	return nil
}

// TokenPassword returns the password part of a K3s token: the text after "::server:" of a
// full token K10<ca hash>::server:<password> (fixtures token-format.txt), or the token itself.
func TokenPassword(token string) string {
	if _, p, ok := strings.Cut(token, "::server:"); ok {
		return p
	}
	if _, p, ok := strings.Cut(token, "::node:"); ok {
		return p
	}
	return token
}

// hostFailure records err as hs's failure in step and returns the Failure.
func (s *session) hostFailure(hs *hostState, step string, code ExitCode, err error) error {
	hs.setResult(events.StatusFailed, step+": "+err.Error())
	fix := ""
	if errors.Is(err, remote.ErrSudoPassword) {
		fix = "allow NOPASSWD sudo for the SSH user, or give the sudo password (ssh.sudoPasswordEnv, ssh.sudoPasswordFile or --ask-sudo-password)"
	}
	return &Failure{Code: code, Phase: step, Host: hs.host.Name, Info: events.ErrorInfo{
		Message: fmt.Sprintf("%s failed: %v", step, err),
		Fix:     fix,
		Resume:  "fix the cause and re-run `k3strap apply`: finished steps are skipped, nothing is left half-written",
	}}
}
