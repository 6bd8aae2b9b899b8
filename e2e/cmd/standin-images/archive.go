// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/k3strap/k3strap/e2e/cmd/internal/imagearchive"
)

// Labels every image carries (OCI annotation keys, docs: github.com/opencontainers/image-spec
// annotations.md) plus k3strap's own.
const (
	labelStandin    = "io.k3strap.test-standin"
	labelStandinFor = "io.k3strap.test-standin.for"
)

// writeArchive writes every image of standinImages, made of this program, into a K3s airgap
// images archive at out (the format: package imagearchive). It refuses a program that is not
// statically linked.
func writeArchive(out string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	bin, err := os.ReadFile(self)
	if err != nil {
		return err
	}
	if err := imagearchive.RequireStatic(self); err != nil {
		return err
	}
	return writeArchiveOf(bin, out)
}

// writeArchiveOf writes the archive at out with bin as the program of every image.
func writeArchiveOf(bin []byte, out string) error {
	if !strings.HasSuffix(out, ".tar") && !strings.HasSuffix(out, ".tar.zst") {
		return fmt.Errorf("%s: name the archive .tar or .tar.zst (K3s imports by extension)", out)
	}
	images, err := buildImages(bin)
	if err != nil {
		return err
	}
	return imagearchive.Write(out, images)
}

// buildImages makes every image from bin, keyed by reference: a layer shared by all (the
// program, its applet links, /tmp) and a small layer of the image's own note file.
func buildImages(bin []byte) (map[string]v1.Image, error) {
	shared, err := sharedLayer(bin)
	if err != nil {
		return nil, err
	}
	images := map[string]v1.Image{}
	for _, im := range standinImages {
		note, err := imagearchive.Layer([]imagearchive.Entry{{Name: noteFile, Mode: 0o444, Body: []byte(im.note())}})
		if err != nil {
			return nil, err
		}
		cfg := v1.Config{
			Entrypoint: im.Entrypoint,
			User:       im.User,
			Env:        []string{imagePath},
			WorkingDir: "/",
			Labels:     im.labels(),
		}
		if len(im.Ports) > 0 {
			cfg.ExposedPorts = map[string]struct{}{}
			for _, p := range im.Ports {
				cfg.ExposedPorts[p] = struct{}{}
			}
		}
		img, err := imagearchive.Image([]imagearchive.Step{
			{Layer: shared, CreatedBy: "k3strap standin-images: the stand-in program " + binaryPath, Comment: "k3strap test stand-in"},
			{Layer: note, CreatedBy: "k3strap standin-images: " + noteFile, Comment: "k3strap test stand-in"},
		}, cfg, "k3strap e2e (test stand-in)")
		if err != nil {
			return nil, err
		}
		images[im.Ref] = img
	}
	return images, nil
}

// labels are the image's OCI labels: what it is, and that it is a stand-in.
func (im standinImage) labels() map[string]string {
	title, desc := "k3strap test stand-in for "+im.Ref,
		"NOT "+im.Component+": a k3strap end-to-end test stand-in that behaves like it only where k3strap and Kubernetes look. See "+noteFile+"."
	if im.Workload {
		title, desc = "k3strap test workload "+im.Ref, "A k3strap end-to-end test workload: "+im.Component+". No real image has this name. See "+noteFile+"."
	}
	return map[string]string{
		"org.opencontainers.image.title":       title,
		"org.opencontainers.image.description": desc,
		"org.opencontainers.image.vendor":      "k3strap (test stand-in)",
		"org.opencontainers.image.ref.name":    im.Ref,
		labelStandin:                           "true",
		labelStandinFor:                        im.Component,
	}
}

// note is the text of the image's noteFile.
func (im standinImage) note() string {
	head := "THIS IMAGE IS A k3strap TEST STAND-IN, NOT THE REAL COMPONENT."
	if im.Workload {
		head = "THIS IMAGE IS A k3strap TEST WORKLOAD; NO REAL IMAGE HAS THIS NAME."
	}
	return fmt.Sprintf(`%s

reference:     %s
stands in for: %s
named by:      %s

It holds one static Go program (%s, k3strap's e2e/cmd/standin-images) that plays this
image only as far as k3strap's end-to-end tests and Kubernetes look (probes, ports, discovery,
DNS). It exists because the test machines cannot pull container images. Never run it in a
real cluster.
`, head, im.Ref, im.Component, im.Source, binaryPath)
}

// sharedLayer is the layer of every image: the program at binaryPath, the applet links to it,
// and a world-writable /tmp.
func sharedLayer(bin []byte) (v1.Layer, error) {
	entries := []imagearchive.Entry{
		{Name: "/bin/", Mode: 0o755}, {Name: "/usr/", Mode: 0o755}, {Name: "/usr/bin/", Mode: 0o755},
		{Name: "/etc/", Mode: 0o755}, {Name: "/tmp/", Mode: 0o1777},
		{Name: binaryPath, Mode: 0o755, Body: bin},
	}
	for _, l := range appletLinks {
		entries = append(entries, imagearchive.Entry{Name: l, Link: binaryPath})
	}
	return imagearchive.Layer(entries)
}
