// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/k3strap/k3strap/e2e/cmd/internal/imagearchive"
)

// realImage is one image of the real archive: the exact reference K3s v1.36.3+k3s1 names, the
// upstream program in it and how that program is built here.
type realImage struct {
	// Ref is the image reference, fully qualified as containerd stores it.
	Ref string
	// Component is what the program is; NamedBy where K3s names Ref (read on a running
	// v1.36.3+k3s1 server: its containerd config and packaged manifests).
	Component, NamedBy string
	// Upstream is the project's repository (the image's org.opencontainers.image.source),
	// Version the upstream release built (empty: the program's source says), License its
	// SPDX identifier.
	Upstream, Version, License string
	// Program builds the program (cached by its source digest).
	Program program
	// Path is where the program lies in the image; Links are paths linked to it.
	Path  string
	Links func(b *builder) ([]string, error)
	// Files are other files of the image (each with its mode; links by Link), or nil.
	Files func(b *builder) ([]imagearchive.Entry, error)
	// Entrypoint, Cmd, User, Ports and Env are the image's configuration, as upstream's
	// Dockerfile sets them.
	Entrypoint, Cmd []string
	User            string
	// WorkingDir is the image's working directory (empty: /).
	WorkingDir string
	Ports      []string
	Env        []string
	// Dirs are directories the image has beside the program (mode 0755, or 1777 for /tmp/).
	Dirs []string
}

// The upstream releases K3s v1.36.3+k3s1 packages (its image references, below; the
// metrics-server and CoreDNS module versions are the same releases).
const (
	corednsModule       = "github.com/coredns/coredns"
	corednsVersion      = "v1.14.6"
	metricsServerModule = "sigs.k8s.io/metrics-server"
	metricsVersion      = "v0.9.0"
	// kubernetesModule holds build/pause (pause.c and the Makefile whose TAG is the pause
	// release); K3s v1.36.3 is Kubernetes v1.36.3.
	kubernetesModule  = "k8s.io/kubernetes"
	kubernetesVersion = "v1.36.3"
	pauseTag          = "3.10.2"
	localPathTag      = "v0.0.36"
	// localPathCommit is the commit tag v0.0.36 of github.com/rancher/local-path-provisioner
	// names; a source whose tag names another commit is refused.
	localPathCommit = "5d4bfc84b32cd9c5f56ed3aba921b1a3924ea2f0"
	localPathModule = "github.com/rancher/local-path-provisioner"
	// localPathProxyVersion is the release built from the Go module proxy when no git
	// directory of localPathTag is given: the proxy answers 403 for v0.0.31 to v0.0.36, and
	// v0.0.30 takes the same `start --config` command line and config.json K3s's
	// local-storage.yaml passes (docs/testing-stand-ins.md).
	localPathProxyVersion = "v0.0.30"
	// busyboxRef's version is what K3s names; the program is Debian's busybox-static, whatever
	// its version (the image's labels say which).
	busyboxTag = "1.37.0"
)

// imagePATH is the PATH of every image (local-path-provisioner's pod names its command bare).
const imagePATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// realImages are the images of the real archive: every image a K3s v1.36.3+k3s1 cluster pulls
// with Traefik disabled and no Service of type LoadBalancer (docs/testing-stand-ins.md).
var realImages = []realImage{
	{
		Ref:       "docker.io/rancher/mirrored-pause:" + pauseTag,
		Component: "the Kubernetes pause container (pod sandbox)", NamedBy: "agent/etc/containerd/config.toml pinned_images.sandbox",
		Upstream: "https://github.com/kubernetes/kubernetes/tree/" + kubernetesVersion + "/build/pause", Version: pauseTag, License: "Apache-2.0",
		Program: pauseProgram{}, Path: "/pause",
		Entrypoint: []string{"/pause"}, User: "65535:65535",
	},
	{
		Ref:       "docker.io/rancher/mirrored-coredns-coredns:1.14.6",
		Component: "CoreDNS", NamedBy: "server/manifests/coredns.yaml",
		Upstream: "https://github.com/coredns/coredns", Version: corednsVersion, License: "Apache-2.0",
		Program: goInstall{Module: corednsModule, Version: corednsVersion, Package: corednsModule,
			LDFlags: "-s -w -X " + corednsModule + "/coremain.GitCommit=" + corednsVersion},
		Path:       "/coredns",
		Entrypoint: []string{"/coredns"}, User: "65532:65532", Ports: []string{"53/tcp", "53/udp"},
		Dirs: []string{"/tmp/"},
	},
	{
		Ref:       "docker.io/rancher/mirrored-metrics-server:" + metricsVersion,
		Component: "Kubernetes metrics-server", NamedBy: "server/manifests/metrics-server/metrics-server-deployment.yaml",
		Upstream: "https://github.com/kubernetes-sigs/metrics-server", Version: metricsVersion, License: "Apache-2.0",
		Program: goInstall{Module: metricsServerModule, Version: metricsVersion, Package: metricsServerModule + "/cmd/metrics-server",
			LDFlags: "-s -w -X sigs.k8s.io/metrics-server/pkg/version.gitVersion=" + metricsVersion},
		Path:       "/metrics-server",
		Entrypoint: []string{"/metrics-server"}, User: "65534", Ports: []string{"10250/tcp"},
		Dirs: []string{"/tmp/"},
	},
	{
		Ref:       "docker.io/rancher/local-path-provisioner:" + localPathTag,
		Component: "Rancher local-path-provisioner", NamedBy: "server/manifests/local-storage.yaml",
		Upstream: "https://github.com/rancher/local-path-provisioner", Version: "", License: "Apache-2.0", // localPathTag or localPathProxyVersion, as localPathProgram says
		Program: localPathProgram{}, Path: "/usr/bin/local-path-provisioner",
		Cmd: []string{"local-path-provisioner"}, Env: []string{imagePATH},
		Dirs: []string{"/tmp/"},
	},
	{
		Ref:       "docker.io/rancher/mirrored-library-busybox:" + busyboxTag,
		Component: "BusyBox (local-path-provisioner's helper pod)", NamedBy: "server/manifests/local-storage.yaml (helperPod.yaml of the local-path-config ConfigMap)",
		Upstream: "https://packages.debian.org/bookworm/busybox-static", Version: "", License: "GPL-2.0-only",
		Program: busyboxProgram{}, Path: "/bin/busybox", Links: busyboxLinks,
		Cmd: []string{"sh"}, Env: []string{imagePATH},
		Dirs: []string{"/tmp/", "/root/", "/var/", "/home/", "/etc/"},
	},
}

// config is the image's configuration with its labels: what it is, from which source and how
// it was built (OCI annotation keys: github.com/opencontainers/image-spec annotations.md).
func (im realImage) config(p built) v1.Config {
	version := im.Version
	if version == "" {
		version = p.Version
	}
	labels := map[string]string{
		"org.opencontainers.image.title":       im.Component + " " + version,
		"org.opencontainers.image.description": "The real " + im.Component + " " + version + ", built from its upstream source by k3strap's end-to-end tests (e2e/cmd/mkimages) because the test machines cannot pull images; the image around it is k3strap's, not upstream's." + p.Note,
		"org.opencontainers.image.source":      im.Upstream,
		"org.opencontainers.image.version":     version,
		"org.opencontainers.image.revision":    p.Digest,
		"org.opencontainers.image.licenses":    im.License,
		"org.opencontainers.image.vendor":      "k3strap e2e (built from upstream source)",
		"org.opencontainers.image.ref.name":    im.Ref,
		labelBuiltBy:                           "k3strap e2e/cmd/mkimages",
		labelRecipe:                            p.Recipe,
		labelSourceDigest:                      p.Digest,
	}
	wd := im.WorkingDir
	if wd == "" {
		wd = "/"
	}
	cfg := v1.Config{Entrypoint: im.Entrypoint, Cmd: im.Cmd, User: im.User, Env: im.Env, WorkingDir: wd, Labels: labels}
	if len(im.Ports) > 0 {
		cfg.ExposedPorts = map[string]struct{}{}
		for _, p := range im.Ports {
			cfg.ExposedPorts[p] = struct{}{}
		}
	}
	return cfg
}

// Labels of k3strap's own on every real image.
const (
	labelBuiltBy      = "io.k3strap.test-image.built-by"
	labelRecipe       = "io.k3strap.test-image.recipe"
	labelSourceDigest = "io.k3strap.test-image.source-digest"
)

// dirsOf are the parent directories of paths (each ending in /), sorted, for a layer.
func dirsOf(paths []string) []string {
	set := map[string]bool{}
	for _, p := range paths {
		for d := p[:strings.LastIndex(p, "/")+1]; d != "/" && d != ""; d = d[:strings.LastIndex(strings.TrimSuffix(d, "/"), "/")+1] {
			set[d] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

func (im realImage) String() string { return fmt.Sprintf("%s (%s)", im.Ref, im.Component) }
