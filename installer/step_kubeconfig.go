// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

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
	"github.com/k3strap/k3strap/k3s"
)

// kubeconfigStep writes the cluster's kubeconfig on the workstation: the first server's
// k3s.yaml pointed at its address (or --api-address), named after the cluster, mode 0600 —
// for apply to --kubeconfig-out (an identical file is left alone); for `k3strap kubeconfig`
// (requested) to a file or merged into an existing one (clientcmd), as KubeconfigRequest says.
//
// Reads: the first server's k3s.yaml; s.out.kubeconfigReq (requested). Writes: s.out.kubeconfig.
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
		write = func(ctx context.Context, _ *hostState) (string, error) {
			return s.kubeconfigCmd(ctx, s.out.kubeconfigReq)
		}
	}
	path, err := write(ctx, s.first)
	if err != nil {
		return err
	}
	s.out.kubeconfig = path
	return nil
}

// Preview names the file the step would write or merge into.
func (k kubeconfigStep) Preview(ctx context.Context, s *session) error {
	if !k.requested {
		s.in.emitter(events.PhaseKubeconfig).Info(s.first.host.Name, "would write the kubeconfig to "+s.kubeconfigPath()+" (mode 0600)")
		return ctx.Err()
	}
	verb := "write"
	if s.out.kubeconfigReq.Merge {
		verb = "merge into"
	}
	path := s.out.kubeconfigReq.Path
	if path == "" {
		path = "the default kubeconfig path"
	}
	s.in.emitter(events.PhaseKubeconfig).Info(s.first.host.Name, "would "+verb+" "+path)
	return ctx.Err()
}

// writeKubeconfig fetches the first server's /etc/rancher/k3s/k3s.yaml, points it at the server's
// address (or --api-address) with the cluster's name for cluster, user and context, and writes
// it 0600 to --kubeconfig-out (default ./<cluster>.kubeconfig). An identical existing file is
// left alone.
func (s *session) writeKubeconfig(ctx context.Context, first *hostState) (string, error) {
	em := s.in.emitter(events.PhaseKubeconfig)
	raw, err := first.c().ReadFile(ctx, k3s.PathKubeconfig)
	if err != nil {
		return "", s.hostFailure(first, "kubeconfig", KindInstall, fmt.Errorf("reading %s: %w", k3s.PathKubeconfig, err))
	}
	addr := s.in.cluster.EndpointAddress()
	if addr == "" {
		addr = first.host.Address
	}
	out, err := RewriteKubeconfig(raw, s.in.cluster.Metadata.Name, "https://"+net.JoinHostPort(addr, "6443"))
	if err != nil {
		return "", s.hostFailure(first, "kubeconfig", KindInstall, err)
	}
	path := s.kubeconfigPath()
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, out) {
		em.Step(first.host.Name, "kubeconfig", events.StatusUnchanged, path+" is up to date")
		return path, nil
	}
	if err := writeFileAtomic(path, out, 0o600); err != nil {
		return "", &Failure{Kind: KindInstall, Phase: events.PhaseKubeconfig, Info: events.ErrorInfo{Message: "writing the kubeconfig: " + err.Error(), Fix: "choose a writable path with --kubeconfig-out"}}
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

// KubeconfigRequest says where `k3strap kubeconfig` puts the cluster's credentials.
type KubeconfigRequest struct {
	// Path is the file to write or merge into. Empty: ./<cluster>.kubeconfig, or with Merge
	// the first file of $KUBECONFIG, else ~/.kube/config.
	Path string
	// Merge adds (or replaces) the cluster, user and context in an existing kubeconfig and
	// makes the context current, keeping everything else in the file.
	Merge bool
	// Context names the cluster, user and context (default: the cluster's name).
	Context string
}

// kubeconfigCmd fetches the kubeconfig for `k3strap kubeconfig`: written to req.Path, or
// merged into it (default: the kubeconfig kubectl uses) under the context req.Context.
func (s *session) kubeconfigCmd(ctx context.Context, req KubeconfigRequest) (string, error) {
	fs := s.first
	first := fs.host
	raw, err := fs.c().ReadFile(ctx, k3s.PathKubeconfig)
	if err != nil {
		return "", s.hostFailure(fs, "kubeconfig", KindInstall, fmt.Errorf("reading %s (is K3s installed? run `k3strap apply` first): %w", k3s.PathKubeconfig, err))
	}
	name := req.Context
	if name == "" {
		name = s.in.cluster.Metadata.Name
	}
	addr := s.in.cluster.EndpointAddress()
	if addr == "" {
		addr = first.Address
	}
	out, err := RewriteKubeconfig(raw, name, "https://"+net.JoinHostPort(addr, "6443"))
	if err != nil {
		return "", s.hostFailure(fs, "kubeconfig", KindInstall, err)
	}
	em := s.in.emitter(events.PhaseKubeconfig)
	if !req.Merge {
		path := req.Path
		if path == "" {
			path = s.in.cluster.Metadata.Name + ".kubeconfig"
		}
		if err := writeFileAtomic(path, out, 0o600); err != nil {
			return "", &Failure{Kind: KindInstall, Phase: events.PhaseKubeconfig, Info: events.ErrorInfo{Message: err.Error()}}
		}
		fs.setResult(events.StatusChanged, "wrote "+path)
		em.Step(first.Name, "kubeconfig", events.StatusChanged, "wrote "+path)
		return path, nil
	}
	path := req.Path
	if path == "" {
		path = clientcmd.NewDefaultPathOptions().GetDefaultFilename()
	}
	if err := MergeKubeconfig(path, out, name); err != nil {
		return "", &Failure{Kind: KindInstall, Phase: events.PhaseKubeconfig, Info: events.ErrorInfo{Message: "merging into " + path + ": " + err.Error()}}
	}
	fs.setResult(events.StatusChanged, fmt.Sprintf("merged context %s into %s", name, path))
	em.Step(first.Name, "kubeconfig", events.StatusChanged, fmt.Sprintf("merged context %s into %s and made it current", name, path))
	return path, nil
}

// MergeKubeconfig adds the cluster, user and context of the kubeconfig in add (all named name)
// to the kubeconfig file at path — replacing entries of that name, keeping every other entry —
// and makes name the current context. A missing file is created (0600).
func MergeKubeconfig(path string, add []byte, name string) error {
	in, err := clientcmd.Load(add)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	if _, err := os.Stat(path); err == nil {
		if cfg, err = clientcmd.LoadFromFile(path); err != nil {
			return err
		}
	}
	for k, v := range in.Clusters {
		cfg.Clusters[k] = v
	}
	for k, v := range in.AuthInfos {
		cfg.AuthInfos[k] = v
	}
	for k, v := range in.Contexts {
		cfg.Contexts[k] = v
	}
	cfg.CurrentContext = name
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, b, 0o600)
}
