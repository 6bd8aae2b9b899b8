package installer

import (
	"context"
	"fmt"
	"strings"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/k3s"
)

// tokenRotateScript reads the new token on stdin (never on k3strap's command lines or in its
// logs) and runs `k3s token rotate` with the current server token as K3S_TOKEN. K3s's
// --new-token has no environment variable, so the new token is on k3s's own argv while it
// runs (root-only host; the documented way).
const tokenRotateScript = `IFS= read -r new
K3S_TOKEN=$(cat /var/lib/rancher/k3s/server/token) exec "$1" token rotate --new-token "$new" >/dev/null`

// tokenFileScript writes the token file from stdin (0600, atomically), keeping a full token's
// K10<CA hash>::server: prefix when the file held one.
const tokenFileScript = `IFS= read -r new
f=$1
cur=$(cat "$f" 2>/dev/null || true)
case "$cur" in K10*::server:*) new="${cur%%::server:*}::server:$new" ;; esac
mkdir -p "$(dirname "$f")"; umask 077
printf '%s\n' "$new" > "$f.k3strap-tmp" && mv "$f.k3strap-tmp" "$f"`

// rotateTokenStep replaces the server token and restarts every node with it.
type rotateTokenStep struct{}

func (rotateTokenStep) Phase() events.Phase { return events.PhaseRotateToken }

func (rotateTokenStep) Summary() string {
	return "k3s token rotate on the first server (new token: K3STRAP_K3S_TOKEN or generated); token file on every node; restart servers one at a time, then agents"
}

func (rotateTokenStep) Run(ctx context.Context, s *session) error {
	em := s.in.emitter(events.PhaseRotateToken)
	newTok := TokenPassword(s.in.cluster.Spec.K3s.Token.Reveal())
	if newTok == "" {
		var err error
		if newTok, err = newSecretHex(32); err != nil {
			return err
		}
	} else {
		cur, err := s.first.c().ReadFile(ctx, k3s.PathServerToken)
		if err == nil && TokenPassword(strings.TrimSpace(string(cur))) == newTok {
			return &Failure{Kind: KindInvalid, Phase: events.PhaseRotateToken, Info: events.ErrorInfo{
				Message: "the inventory's token (spec.k3s.token or K3STRAP_K3S_TOKEN) is already the cluster's token",
				Fix:     "set K3STRAP_K3S_TOKEN to the new token, or leave spec.k3s.token and K3STRAP_K3S_TOKEN unset to have one generated",
			}}
		}
	}
	if _, err := s.sh(ctx, s.first, "token rotate", tokenRotateScript, newTok+"\n", k3s.PathBinary); err != nil {
		return s.hostFailure(s.first, "token rotate", KindInstall, err)
	}
	em.Step(s.first.host.Name, "token", events.StatusChanged, "server token rotated (the old token no longer joins)")
	var failed []string
	for _, hs := range s.hosts {
		if hs.c() == nil {
			failed = append(failed, hs.host.Name)
			continue
		}
		if _, err := s.sh(ctx, hs, "token file", tokenFileScript, newTok+"\n", k3s.PathTokenFile); err != nil {
			_ = s.hostFailure(hs, "token file", KindInstall, err)
			failed = append(failed, hs.host.Name)
		}
	}
	if len(failed) > 0 {
		return &Failure{Kind: KindInstall, Phase: events.PhaseRotateToken, Info: events.ErrorInfo{
			Message: "the token file could not be updated on " + strings.Join(failed, ", "),
			Fix:     "make the hosts reachable; until then they cannot rejoin after a restart",
			Resume:  "re-run `k3strap rotate token` with K3STRAP_K3S_TOKEN set to the new token",
		}}
	}
	em.Info("", fmt.Sprintf("token file %s updated on %d nodes", k3s.PathTokenFile, len(s.hosts)))
	return s.rotateEach(ctx, func(ctx context.Context, hs *hostState) error {
		return s.restartAndWait(ctx, hs, "restart", nil)
	})
}

// Preview says what would change.
func (rotateTokenStep) Preview(ctx context.Context, s *session) error {
	em := s.in.emitter(events.PhaseRotateToken)
	em.Info(s.first.host.Name, "would run k3s token rotate with a new token, write "+k3s.PathTokenFile+" on every node and restart them (servers one at a time, then agents)")
	return ctx.Err()
}
