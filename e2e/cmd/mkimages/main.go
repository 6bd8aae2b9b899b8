// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Command mkimages writes the K3s airgap images archives of the end-to-end tests.
//
//	mkimages OUT.tar.zst
//	    the simulator's archive: a real zstd-compressed tar (like
//	    k3s-airgap-images-<arch>.tar.zst) holding one file that says it is not a real image
//	    bundle (the simulator runs no containers).
//	mkimages real [-cache DIR] [-local-path-src GITDIR] [-timeout D] OUT.tar.zst
//	    the real components a K3s v1.36.3+k3s1 cluster runs with Traefik disabled, built here
//	    from their upstream source (pause, CoreDNS, metrics-server, local-path-provisioner and
//	    its helper busybox) under the exact references K3s names; each program is cached in
//	    DIR by its source digest. real.go lists the images and how each is built.
//	    local-path-provisioner is K3s's release (v0.0.36) when -local-path-src (default
//	    $LOCAL_PATH_PROVISIONER_SRC) names a git directory holding its tag, else v0.0.30
//	    from the Go module proxy, which refuses v0.0.36; its labels say which.
//	mkimages real-list
//	    the references `real` writes, one a line.
//	mkimages real-suc [-cache DIR] [-suc-src GITDIR|TAR.GZ] [-k3s-binary FILE] [-timeout D] OUT.tar.zst
//	    the images `k3strap upgrade --via suc` makes a cluster pull (suc.go):
//	    system-upgrade-controller built from a git directory of its source (-suc-src, default
//	    $SYSTEM_UPGRADE_CONTROLLER_SRC; the module proxy refuses it), the kubectl its Jobs
//	    cordon and drain with (module proxy), and rancher/k3s-upgrade with the K3s binary
//	    -k3s-binary (default $K3S_BINARY), tagged with its release. A separate archive: its inputs are not on every machine, and only
//	    the SUC tests upload it.
//	mkimages real-helm [-cache DIR] [-timeout D] OUT.tar.zst
//	    the image a HelmChart makes a cluster pull (helm.go): rancher/klipper-helm, as
//	    K3s v1.36.3+k3s1 names it, with helm v4.1.4 from the Go module proxy and the entry
//	    script of the repository's snapshot of klipper-helm's source. A separate archive: only
//	    the HelmChart tests upload it.
//
// Exit status: 0 done, 1 a build failed, 2 bad usage, 3 a build input is missing on this
// machine (the message names it and how to get it).
package main

import (
	"archive/tar"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/klauspost/compress/zstd"
)

const note = "k3strap simulator airgap bundle: no container images, for end-to-end tests and the demo only.\n"

func main() {
	if len(os.Args) >= 2 {
		switch os.Args[1] {
		case "real":
			os.Exit(realMain(os.Args[2:]))
		case "real-suc":
			os.Exit(realSUCMain(os.Args[2:]))
		case "real-helm":
			os.Exit(realHelmMain(os.Args[2:]))
		case "real-list":
			for _, im := range realImages {
				fmt.Println(im.Ref)
			}
			return
		}
	}
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: mkimages OUT.tar.zst | real [-cache DIR] [-local-path-src GITDIR] OUT.tar.zst | real-list | real-suc [-cache DIR] OUT.tar.zst | real-helm [-cache DIR] OUT.tar.zst")
		os.Exit(2)
	}
	if err := write(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "mkimages:", err)
		os.Exit(1)
	}
}

// archiveMain runs `mkimages KIND [flags] OUT.tar.zst`: the flags every kind takes (-cache,
// -timeout) and those flags adds to fs, then images builds the archive's list with the
// builder the flags filled; it returns the exit status (2: bad usage).
func archiveMain(kind string, args []string, usage string, flags func(fs *flag.FlagSet) func(b *builder) error, images func(b *builder) ([]realImage, error)) int {
	name := "mkimages " + kind
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	cache := fs.String("cache", "", "cache the built programs in `DIR`, keyed by source digest (default: no cache)")
	timeout := fs.Duration("timeout", 30*time.Minute, "give up after `D`")
	fill := func(*builder) error { return nil }
	if flags != nil {
		fill = flags(fs)
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: "+name+" "+usage)
		return 2
	}
	b := &builder{cacheDir: *cache, log: os.Stderr}
	if err := fill(b); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	list, err := images(b)
	if err == nil {
		err = b.writeArchive(ctx, fs.Arg(0), list)
	}
	return finish(ctx, name, err)
}

// realMain is `mkimages real`; it returns the exit status.
func realMain(args []string) int {
	return archiveMain("real", args, "[-cache DIR] [-local-path-src GITDIR] [-timeout D] OUT.tar.zst",
		func(fs *flag.FlagSet) func(b *builder) error {
			lpp := fs.String("local-path-src", os.Getenv("LOCAL_PATH_PROVISIONER_SRC"), "a git directory of github.com/rancher/local-path-provisioner holding tag "+localPathTag+", built instead of "+localPathProxyVersion+" from the module proxy (default $LOCAL_PATH_PROVISIONER_SRC)")
			return func(b *builder) error { b.localPathSrc = *lpp; return nil }
		},
		func(*builder) ([]realImage, error) { return realImages, nil })
}

// realSUCMain is `mkimages real-suc`; it returns the exit status.
func realSUCMain(args []string) int {
	return archiveMain("real-suc", args, "[-cache DIR] [-suc-src GITDIR|TAR.GZ] [-k3s-binary FILE] [-timeout D] OUT.tar.zst",
		func(fs *flag.FlagSet) func(b *builder) error {
			defSrc := os.Getenv("SYSTEM_UPGRADE_CONTROLLER_SRC")
			if _, err := os.Stat(sucSnapshot); defSrc == "" && err == nil {
				defSrc = sucSnapshot
			}
			src := fs.String("suc-src", defSrc, "a git directory of github.com/rancher/system-upgrade-controller holding commit "+sucCommit[:7]+", or `git archive --format=tar.gz` of it (default $SYSTEM_UPGRADE_CONTROLLER_SRC, else "+sucSnapshot+")")
			bin := fs.String("k3s-binary", os.Getenv("K3S_BINARY"), "the K3s binary of rancher/k3s-upgrade (default $K3S_BINARY)")
			return func(b *builder) error {
				b.k3sBinary = *bin
				if *src != "" {
					// The builds run in other directories.
					abs, err := filepath.Abs(*src)
					if err != nil {
						return err
					}
					b.sucSrc = abs
				}
				return nil
			}
		},
		sucImages)
}

// realHelmMain is `mkimages real-helm`; it returns the exit status.
func realHelmMain(args []string) int {
	return archiveMain("real-helm", args, "[-cache DIR] [-timeout D] OUT.tar.zst", nil,
		func(*builder) ([]realImage, error) { return helmImages(), nil })
}

// finish reports err of the command what and returns the exit status: 3 for a missing build
// input, 130 when interrupted, 1 for another failure.
func finish(ctx context.Context, what string, err error) int {
	if err != nil {
		fmt.Fprintln(os.Stderr, what+":", err)
		var m *missingError
		if errors.As(err, &m) {
			return 3
		}
		if ctx.Err() != nil && errors.Is(context.Cause(ctx), context.Canceled) {
			return 130
		}
		return 1
	}
	return 0
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
