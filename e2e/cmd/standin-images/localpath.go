// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// localPathConfig is local-path-provisioner's config.json (its README, "Configuration").
type localPathConfig struct {
	NodePathMap []struct {
		Node  string   `json:"node"`
		Paths []string `json:"paths"`
	} `json:"nodePathMap"`
}

// localPathMain plays Rancher's local-path-provisioner as K3s deploys it
// (server/manifests/local-storage.yaml: `local-path-provisioner start --config FILE`): it
// refuses a config the real one refuses (unreadable, not JSON, no nodePathMap, an entry
// without a node or paths), reads the API once as its service account, then runs until
// SIGTERM. It provisions no volumes: a PersistentVolumeClaim of the local-path class stays
// Pending (README.md, "Not here").
func localPathMain(args []string) int {
	logger := log.New(os.Stderr, "[local-path-provisioner k3strap test stand-in] ", log.LstdFlags)
	if len(args) == 0 || args[0] != "start" {
		logger.Print("usage: local-path-provisioner start --config FILE")
		return 2
	}
	fs := flag.NewFlagSet("start", flag.ContinueOnError)
	conf := fs.String("config", "", "config.json")
	fs.String("provisioner-name", "rancher.io/local-path", "")
	fs.String("namespace", "", "")
	fs.Bool("debug", false, "")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if err := checkLocalPathConfig(*conf); err != nil {
		logger.Print(err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	api, err := inCluster()
	if err != nil {
		logger.Print(err)
		return 1
	}
	for {
		var l struct{}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := api.get(cctx, "/apis/storage.k8s.io/v1/storageclasses", map[string][]string{"limit": {"1"}}, &l)
		cancel()
		if err == nil {
			break
		}
		logger.Printf("waiting for the Kubernetes API: %v", err)
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(time.Second):
		}
	}
	logger.Printf("config %s valid, API read; provisioning nothing (a test stand-in)", *conf)
	<-ctx.Done()
	return 0
}

// checkLocalPathConfig validates config.json as the provisioner does before it starts.
func checkLocalPathConfig(p string) error {
	if p == "" {
		return errors.New("--config is required")
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	var c localPathConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if len(c.NodePathMap) == 0 {
		return fmt.Errorf("%s: nodePathMap is empty", p)
	}
	for i, m := range c.NodePathMap {
		if m.Node == "" || len(m.Paths) == 0 {
			return fmt.Errorf("%s: nodePathMap[%d] needs a node and paths", p, i)
		}
	}
	return nil
}
