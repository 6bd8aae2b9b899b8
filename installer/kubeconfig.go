package installer

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/k3strap/k3strap/events"
)

// kubeconfig fetches the first server's /etc/rancher/k3s/k3s.yaml, points it at the server's
// address (or --api-address) with the cluster's name for cluster, user and context, and writes
// it 0600 to --kubeconfig-out (default ./<cluster>.kubeconfig). An identical existing file is
// left alone.
func (s *session) kubeconfig(ctx context.Context, first *hostState) (string, error) {
	em := s.in.emitter("kubeconfig")
	raw, err := first.client.ReadFile(ctx, PathKubeconfig)
	if err != nil {
		return "", s.hostFailure(first, "kubeconfig", ExitInstall, fmt.Errorf("reading %s: %w", PathKubeconfig, err))
	}
	addr := s.in.opts.APIAddress
	if addr == "" {
		addr = first.host.Address
	}
	out, err := RewriteKubeconfig(raw, s.in.cluster.Metadata.Name, "https://"+net.JoinHostPort(addr, "6443"))
	if err != nil {
		return "", s.hostFailure(first, "kubeconfig", ExitInstall, err)
	}
	path := s.in.opts.KubeconfigOut
	if path == "" {
		path = s.in.cluster.Metadata.Name + ".kubeconfig"
	}
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, out) {
		em.Step(first.host.Name, "kubeconfig", events.StatusUnchanged, path+" is up to date")
		return path, nil
	}
	if err := writeFileAtomic(path, out, 0o600); err != nil {
		return "", &Failure{Code: ExitInstall, Phase: "kubeconfig", Info: events.ErrorInfo{Message: "writing the kubeconfig: " + err.Error(), Fix: "choose a writable path with --kubeconfig-out"}}
	}
	em.Step(first.host.Name, "kubeconfig", events.StatusChanged, "wrote "+path)
	return path, nil
}

// RewriteKubeconfig takes K3s's k3s.yaml (cluster, user and context all named "default",
// server https://127.0.0.1:6443) and returns it with every name replaced by name and the
// server URL set to server, using client-go's clientcmd.
func RewriteKubeconfig(raw []byte, name, server string) ([]byte, error) {
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		return nil, fmt.Errorf("parsing k3s.yaml: %w", err)
	}
	out := clientcmdapi.NewConfig()
	for cname, cl := range cfg.Clusters {
		c := cl.DeepCopy()
		c.Server = server
		out.Clusters[rename(cname, name)] = c
	}
	for uname, u := range cfg.AuthInfos {
		out.AuthInfos[rename(uname, name)] = u.DeepCopy()
	}
	for xname, x := range cfg.Contexts {
		c := x.DeepCopy()
		c.Cluster, c.AuthInfo = rename(c.Cluster, name), rename(c.AuthInfo, name)
		out.Contexts[rename(xname, name)] = c
	}
	out.CurrentContext = rename(cfg.CurrentContext, name)
	if len(out.Clusters) == 0 || len(out.AuthInfos) == 0 {
		return nil, fmt.Errorf("k3s.yaml has no cluster or no user")
	}
	return clientcmd.Write(*out)
}

func rename(old, name string) string {
	if old == "default" || old == "" {
		return name
	}
	return old
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
