// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Command mkimages writes a stand-in K3s airgap images archive for the simulator: a real
// zstd-compressed tar (like k3s-airgap-images-<arch>.tar.zst) holding one file that says it is
// not a real image bundle. Usage: mkimages OUT.tar.zst
package main

import (
	"archive/tar"
	"fmt"
	"os"

	"github.com/klauspost/compress/zstd"
)

const note = "k3strap simulator airgap bundle: no container images, for end-to-end tests and the demo only.\n"

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: mkimages OUT.tar.zst")
		os.Exit(2)
	}
	if err := write(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "mkimages:", err)
		os.Exit(1)
	}
}

func write(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	zw, err := zstd.NewWriter(f)
	if err != nil {
		f.Close()
		return err
	}
	tw := tar.NewWriter(zw)
	hdr := &tar.Header{Name: "README.k3strap-simulator", Mode: 0o644, Size: int64(len(note))}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if _, err := tw.Write([]byte(note)); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}
