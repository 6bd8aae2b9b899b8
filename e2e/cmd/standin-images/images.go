// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// standinImage is one image of the archive: the exact reference a real K3s v1.36.3+k3s1 uses,
// and how the stand-in plays it.
type standinImage struct {
	// Ref is the image reference, fully qualified as containerd stores it.
	Ref string
	// Component names the real thing this image stands in for; for a test workload (no real
	// image of that name exists), what it is.
	Component string
	// Workload marks a test workload rather than a stand-in for a real image.
	Workload bool
	// Source says where Ref is named (for K3s's images: read on a running v1.36.3+k3s1 server).
	Source string
	// Entrypoint is the image's ENTRYPOINT: a path in the image whose base name is the applet.
	Entrypoint []string
	// User is the image's USER, as in the real image.
	User string
	// Ports are the image's EXPOSE entries ("53/udp").
	Ports []string
}

// standinImages are the images of the archive. The K3s v1.36.3+k3s1 references come from the
// containerd config K3s writes (agent/etc/containerd/config.toml, pinned sandbox image) and
// the packaged manifests it writes into server/manifests/ (see README.md). With Traefik
// disabled no HelmChart exists, so the helm-controller's job image (klipper-helm) is never
// pulled and is not here; servicelb's klipper-lb and local-path's helper busybox are left out
// too (README.md, "Not here").
var standinImages = []standinImage{
	{
		Ref:        "docker.io/rancher/mirrored-pause:3.10.2",
		Component:  "the Kubernetes pause container (pod sandbox)",
		Source:     "K3s v1.36.3+k3s1, agent/etc/containerd/config.toml pinned_images.sandbox",
		Entrypoint: []string{"/pause"},
		User:       "65535:65535",
	},
	{
		Ref:        "docker.io/rancher/mirrored-coredns-coredns:1.14.6",
		Component:  "CoreDNS",
		Source:     "K3s v1.36.3+k3s1, server/manifests/coredns.yaml",
		Entrypoint: []string{"/coredns"},
		User:       "65532:65532",
		Ports:      []string{"53/tcp", "53/udp"},
	},
	{
		Ref:        "docker.io/rancher/local-path-provisioner:v0.0.36",
		Component:  "Rancher local-path-provisioner",
		Source:     "K3s v1.36.3+k3s1, server/manifests/local-storage.yaml",
		Entrypoint: []string{"local-path-provisioner"},
	},
	{
		Ref:        "docker.io/rancher/mirrored-metrics-server:v0.9.0",
		Component:  "Kubernetes metrics-server",
		Source:     "K3s v1.36.3+k3s1, server/manifests/metrics-server/metrics-server-deployment.yaml",
		Entrypoint: []string{"/metrics-server"},
		User:       "65534:65534",
		Ports:      []string{"10250/tcp"},
	},
	{
		Ref:        NetprobeRef,
		Component:  "netprobe, a test workload (HTTP identity, fetch and resolve on demand)",
		Workload:   true,
		Source:     "k3strap e2e tests (README.md, netprobe)",
		Entrypoint: []string{"/netprobe"},
		User:       "65532:65532",
		Ports:      []string{"8080/tcp"},
	},
}

// NetprobeRef is the test workload's reference; the k3strap.test registry does not exist, so
// the name cannot be mistaken for a real image.
const NetprobeRef = "k3strap.test/netprobe:v1"

// binaryPath is where the one program lives in every image; the entrypoints link to it.
const binaryPath = "/bin/k3strap-standin"

// noteFile is the file in every image that says what it is.
const noteFile = "/K3STRAP-TEST-STANDIN.txt"

// applet links: entrypoint paths in the shared layer, each a symbolic link to binaryPath.
var appletLinks = []string{"/pause", "/coredns", "/metrics-server", "/netprobe", "/usr/bin/local-path-provisioner"}

// imagePath is the PATH of every image (local-path-provisioner's pod names its command bare).
const imagePath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
