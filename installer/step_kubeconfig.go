package installer

import (
	"context"

	"github.com/k3strap/k3strap/events"
)

// kubeconfigStep writes the cluster's kubeconfig on the workstation: the first server's
// k3s.yaml pointed at its address (or --api-address), named after the cluster, mode 0600.
type kubeconfigStep struct{}

func (kubeconfigStep) Phase() events.Phase { return events.PhaseKubeconfig }

func (kubeconfigStep) Summary() string {
	return "write the kubeconfig (0600) pointing at the first server or --api-address"
}

func (kubeconfigStep) Run(ctx context.Context, s *session) error {
	path, err := s.writeKubeconfig(ctx, s.first)
	if err != nil {
		return err
	}
	s.kubeconfig = path
	return nil
}

// Preview names the file the step would write.
func (kubeconfigStep) Preview(ctx context.Context, s *session) error {
	s.in.emitter(events.PhaseKubeconfig).Info(s.first.host.Name, "would write the kubeconfig to "+s.kubeconfigPath()+" (mode 0600)")
	return ctx.Err()
}

// fetchKubeconfigStep is `k3strap kubeconfig`: the kubeconfig written to a file or merged
// into an existing one (clientcmd), as KubeconfigRequest says.
type fetchKubeconfigStep struct{}

func (fetchKubeconfigStep) Phase() events.Phase { return events.PhaseKubeconfig }

func (fetchKubeconfigStep) Summary() string {
	return "fetch the kubeconfig from the first server and write it, or merge it into an existing one"
}

func (fetchKubeconfigStep) Run(ctx context.Context, s *session) error {
	path, err := s.kubeconfigCmd(ctx, s.kubeconfigReq)
	if err != nil {
		return err
	}
	s.kubeconfig = path
	return nil
}

// Preview names the file the step would write or merge into.
func (fetchKubeconfigStep) Preview(ctx context.Context, s *session) error {
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
