package installer

import (
	"context"

	"github.com/k3strap/k3strap/events"
)

// kubeconfigStep writes the cluster's kubeconfig on the workstation: the first server's
// k3s.yaml pointed at its address (or --api-address), named after the cluster, mode 0600 —
// for apply to --kubeconfig-out (an identical file is left alone); for `k3strap kubeconfig`
// (requested) to a file or merged into an existing one (clientcmd), as KubeconfigRequest says.
type kubeconfigStep struct {
	requested bool
}

func (kubeconfigStep) Phase() events.Phase { return events.PhaseKubeconfig }

func (k kubeconfigStep) Summary() string {
	if k.requested {
		return "fetch the kubeconfig from the first server and write it, or merge it into an existing one"
	}
	return "write the kubeconfig (0600) pointing at the first server or --api-address"
}

func (k kubeconfigStep) Run(ctx context.Context, s *session) error {
	write := s.writeKubeconfig
	if k.requested {
		write = func(ctx context.Context, _ *hostState) (string, error) { return s.kubeconfigCmd(ctx, s.kubeconfigReq) }
	}
	path, err := write(ctx, s.first)
	if err != nil {
		return err
	}
	s.kubeconfig = path
	return nil
}

// Preview names the file the step would write or merge into.
func (k kubeconfigStep) Preview(ctx context.Context, s *session) error {
	if !k.requested {
		s.in.emitter(events.PhaseKubeconfig).Info(s.first.host.Name, "would write the kubeconfig to "+s.kubeconfigPath()+" (mode 0600)")
		return ctx.Err()
	}
	verb := "write"
	if s.kubeconfigReq.Merge {
		verb = "merge into"
	}
	path := s.kubeconfigReq.Path
	if path == "" {
		path = "the default kubeconfig path"
	}
	s.in.emitter(events.PhaseKubeconfig).Info(s.first.host.Name, "would "+verb+" "+path)
	return ctx.Err()
}
