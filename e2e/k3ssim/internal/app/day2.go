// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package app

// Day-two commands of the simulator, shaped after K3s's CLI (docs.k3s.io
// cli/etcd-snapshot, cli/certificate, cli/token, datastore/backup-restore). They act on the
// simulator's datastore — the first server's state file, which stands in for etcd — and say
// so where it matters. What k3strap relies on matches K3s:
//
//   - `k3s etcd-snapshot save [--name N] [--etcd-snapshot-dir D]` writes
//     <dir>/<name>-<node>-<unix time> (default dir <data-dir>/server/db/snapshots, name
//     "on-demand"), logs `Snapshot NAME saved.`; refused on a node without embedded etcd.
//   - `k3s etcd-snapshot ls|list` prints Name, Location (file://...), Size, Created.
//   - `k3s etcd-snapshot delete NAME...` removes local snapshots.
//   - `k3s server --cluster-reset [--cluster-reset-restore-path P]` (K3s stopped) restores the
//     snapshot (the old member data moved to db/etcd-old-<unix time>, server/tls backed up to
//     tls-<unix time>), resets the membership to this one node, logs K3s's "restart without
//     --cluster-reset" shutdown line and exits 0.
//   - `k3s certificate rotate` (K3s stopped) moves <data-dir>/server/tls to tls-<unix time>
//     keeping the CAs, so every leaf certificate is issued anew at the next start; on an agent
//     its leaf certificates move to <data-dir>/agent/tls-<unix time>.
//   - `k3s token rotate [--token OLD] --new-token NEW` asks the running server to replace its
//     server token; the old one no longer joins.

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/flags"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/join"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/paths"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/pki"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/simlog"
)

// etcdMarker is the directory a server with embedded etcd has (K3s: <data-dir>/server/db/etcd).
func etcdMarker(dataDir string) string { return filepath.Join(dataDir, "server", "db", "etcd") }

// markEtcd creates the etcd directory of a server that runs embedded etcd.
func markEtcd(dataDir, node string) {
	dir := etcdMarker(dataDir)
	_ = os.MkdirAll(dir, 0o700)
	_ = os.WriteFile(filepath.Join(dir, "config"), []byte("# k3strap K3s SIMULATOR: stands in for the etcd member of "+node+"\nname: "+node+"\n"), 0o600)
}

func (e *runtimeEnv) snapshotDir() string {
	if d, ok := e.cfg.Get("etcd-snapshot-dir"); ok && d != "" {
		return e.opts.Root.Path(d)
	}
	return filepath.Join(e.dataDir, "server", "db", "snapshots")
}

func runEtcdSnapshot(_ context.Context, opts Options, args []string) int {
	log := simlog.New(opts.Stderr)
	sub := "save"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	var names []string
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--name" && i+1 < len(args):
			rest = append(rest, "--etcd-snapshot-name", args[i+1])
			i++
		case strings.HasPrefix(a, "--name="):
			rest = append(rest, "--etcd-snapshot-name="+strings.TrimPrefix(a, "--name="))
		case a == "--dir" && i+1 < len(args):
			rest = append(rest, "--etcd-snapshot-dir", args[i+1])
			i++
		case strings.HasPrefix(a, "--dir="):
			rest = append(rest, "--etcd-snapshot-dir="+strings.TrimPrefix(a, "--dir="))
		case !strings.HasPrefix(a, "-"):
			names = append(names, a)
		default:
			rest = append(rest, a)
		}
	}
	e, ok := prepare(opts, flags.Server, rest)
	if !ok {
		return exitFatal
	}
	if _, err := os.Stat(etcdMarker(e.dataDir)); err != nil {
		log.Fatalf("Error: etcd database not found in %s", filepath.Join(e.s.DataDir, "server", "db", "etcd"))
		return exitFatal
	}
	dir := e.snapshotDir()
	switch sub {
	case "save":
		state := filepath.Join(e.dataDir, "server", "db", StateFile)
		// The running server writes its state at most 100 ms after a change.
		time.Sleep(300 * time.Millisecond)
		data, err := os.ReadFile(state)
		if err != nil {
			log.Fatalf("Error: k3s simulator: the simulated datastore lives on the first server (%s): %v", filepath.Join(e.s.DataDir, "server", "db", StateFile), err)
			return exitFatal
		}
		name, _ := e.cfg.Get("etcd-snapshot-name")
		if name == "" {
			name = "on-demand"
		}
		full := fmt.Sprintf("%s-%s-%d", name, e.nodeName, time.Now().Unix())
		if err := os.MkdirAll(dir, 0o700); err != nil {
			log.Fatalf("Error: %v", err)
			return exitFatal
		}
		if err := pki.WriteFileAtomic(filepath.Join(dir, full), data, 0o600); err != nil {
			log.Fatalf("Error: %v", err)
			return exitFatal
		}
		log.Infof("Snapshot %s saved.", full)
		return exitOK
	case "ls", "list", "l":
		entries, _ := os.ReadDir(dir)
		tw := tabwriter.NewWriter(opts.Stdout, 0, 0, 1, ' ', 0)
		fmt.Fprintln(tw, "Name\tLocation\tSize\tCreated")
		// Oldest first, as K3s v1.36.3 lists them (not by name).
		sort.SliceStable(entries, func(i, j int) bool {
			a, errA := entries[i].Info()
			b, errB := entries[j].Info()
			if errA != nil || errB != nil || a.ModTime().Equal(b.ModTime()) {
				return entries[i].Name() < entries[j].Name()
			}
			return a.ModTime().Before(b.ModTime())
		})
		for _, en := range entries {
			fi, err := en.Info()
			if err != nil || en.IsDir() {
				continue
			}
			logical := filepath.Join(e.logicalSnapshotDir(), en.Name())
			fmt.Fprintf(tw, "%s\tfile://%s\t%d\t%s\n", en.Name(), logical, fi.Size(), fi.ModTime().UTC().Format(time.RFC3339))
		}
		_ = tw.Flush()
		return exitOK
	case "delete", "prune":
		if sub == "prune" {
			return exitOK
		}
		if len(names) == 0 {
			log.Fatalf("Error: must specify a snapshot name to delete")
			return exitFatal
		}
		for _, n := range names {
			if err := os.Remove(filepath.Join(dir, filepath.Base(n))); err != nil {
				log.Warnf("Unable to delete snapshot %s: %v", n, err)
				continue
			}
			log.Infof("Snapshot %s deleted.", n)
		}
		return exitOK
	}
	fmt.Fprintf(opts.Stderr, "Incorrect Usage: unknown etcd-snapshot command %q\n", sub)
	return exitFatal
}

func (e *runtimeEnv) logicalSnapshotDir() string {
	if d, ok := e.cfg.Get("etcd-snapshot-dir"); ok && d != "" {
		return d
	}
	return filepath.Join(e.s.DataDir, "server", "db", "snapshots")
}

// clusterReset is `k3s server --cluster-reset [--cluster-reset-restore-path P]`: the
// datastore is replaced by the snapshot (when given), the membership is this node alone, and
// the process exits 0 as K3s does.
func (e *runtimeEnv) clusterReset() int {
	if _, err := os.Stat(etcdMarker(e.dataDir)); err != nil {
		e.log.Fatalf("Error: --cluster-reset is only supported with embedded etcd: %s not found", filepath.Join(e.s.DataDir, "server", "db", "etcd"))
		return exitFatal
	}
	if p, ok := e.cfg.Get("cluster-reset-restore-path"); ok && p != "" {
		data, err := os.ReadFile(e.opts.Root.Path(p))
		if err != nil {
			e.log.Fatalf("Error: etcd: snapshot path does not exist: %s", p)
			return exitFatal
		}
		var probe map[string]any
		if json.Unmarshal(data, &probe) != nil {
			e.log.Fatalf("Error: etcd: %s is not a snapshot of this (simulated) datastore", p)
			return exitFatal
		}
		// As K3s v1.36.3 does: the member's data moves to db/etcd-old-<unix time>, and the
		// certificates directory is backed up to server/tls-<unix time> (the snapshot's
		// bootstrap data then rewrites it).
		now := time.Now().Unix()
		old := fmt.Sprintf("etcd-old-%d", now)
		if err := os.Rename(etcdMarker(e.dataDir), filepath.Join(e.dataDir, "server", "db", old)); err != nil {
			e.log.Fatalf("Error: %v", err)
			return exitFatal
		}
		e.log.Infof("Pre-restore etcd database moved to %s", filepath.Join(e.s.DataDir, "server", "db", old))
		if err := pki.WriteFileAtomic(filepath.Join(e.dataDir, "server", "db", StateFile), data, 0o600); err != nil {
			e.log.Fatalf("Error: %v", err)
			return exitFatal
		}
		e.log.Infof("Restoring etcd snapshot from %s", p)
		tlsBackup := fmt.Sprintf("tls-%d", now)
		if err := copyDir(filepath.Join(e.dataDir, "server", "tls"), filepath.Join(e.dataDir, "server", tlsBackup)); err != nil {
			e.log.Fatalf("Error: %v", err)
			return exitFatal
		}
		e.log.Infof("Cluster reset: backing up certificates directory to %s", filepath.Join(e.s.DataDir, "server", tlsBackup))
	}
	markEtcd(e.dataDir, e.nodeName)
	_ = os.WriteFile(filepath.Join(e.dataDir, "server", "db", "reset-flag"), nil, 0o600)
	e.log.Errorf("Shutdown request received: %q", "Managed etcd cluster membership has been reset, restart without --cluster-reset flag now. Backup and delete ${datadir}/server/db on each peer etcd server and rejoin the nodes")
	return exitOK
}

// runCertificate is `k3s certificate rotate` (K3s stopped): the server's tls directory is
// backed up to tls-<unix time> and every leaf certificate removed (the CAs stay), so that the
// next start issues new ones; on an agent its client certificates are removed likewise.
func runCertificate(_ context.Context, opts Options, args []string) int {
	log := simlog.New(opts.Stderr)
	if len(args) == 0 || args[0] != "rotate" {
		fmt.Fprintf(opts.Stderr, "Incorrect Usage: k3s certificate rotate|rotate-ca (the simulator has rotate)\n")
		return exitFatal
	}
	dataDir := opts.Root.Path(paths.DefaultDataDir)
	for i := 1; i < len(args); i++ {
		if args[i] == "--data-dir" && i+1 < len(args) {
			dataDir = opts.Root.Path(args[i+1])
		}
	}
	tlsDir := filepath.Join(dataDir, "server", "tls")
	if _, err := os.Stat(tlsDir); err == nil {
		log.Infof("Server detected, rotating agent and server certificates")
		backup := filepath.Join(dataDir, "server", fmt.Sprintf("tls-%d", time.Now().Unix()))
		if err := copyDir(tlsDir, backup); err != nil {
			log.Fatalf("Error: %v", err)
			return exitFatal
		}
		entries, _ := os.ReadDir(tlsDir)
		for _, en := range entries {
			n := en.Name()
			if strings.HasSuffix(n, "-ca.crt") || strings.HasSuffix(n, "-ca.key") || strings.HasPrefix(n, "service.") {
				continue
			}
			_ = os.RemoveAll(filepath.Join(tlsDir, n))
		}
		log.Infof("Successfully backed up certificates to %s, please restart k3s server or agent to rotate certificates", strings.TrimPrefix(backup, string(opts.Root)))
		return exitOK
	}
	agentDir := filepath.Join(dataDir, "agent")
	if _, err := os.Stat(agentDir); err != nil {
		log.Fatalf("Error: no K3s data in %s", dataDir)
		return exitFatal
	}
	// K3s moves the agent's leaf certificates into agent/tls-<unix time> (v1.36.3: the
	// kubelet's client and serving certificates, kube-proxy's and k3s-controller's).
	log.Infof("Agent detected, rotating agent certificates")
	backup := filepath.Join(agentDir, fmt.Sprintf("tls-%d", time.Now().Unix()))
	if err := os.MkdirAll(backup, 0o755); err != nil {
		log.Fatalf("Error: %v", err)
		return exitFatal
	}
	for _, svc := range []string{"kube-proxy", "kubelet", "k3s-controller"} {
		log.Infof("Rotating certificates for %s", svc)
	}
	for _, n := range []string{"client-k3s-controller", "client-kube-proxy", "client-kubelet", "serving-kubelet"} {
		for _, ext := range []string{".crt", ".key"} {
			_ = os.Rename(filepath.Join(agentDir, n+ext), filepath.Join(backup, n+ext))
		}
	}
	log.Infof("Successfully backed up certificates to %s, please restart k3s server or agent to rotate certificates", strings.TrimPrefix(backup, string(opts.Root)))
	return exitOK
}

func copyDir(src, dst string) error {
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, en := range entries {
		if en.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, en.Name()))
		if err != nil {
			return err
		}
		fi, _ := en.Info()
		if err := os.WriteFile(filepath.Join(dst, en.Name()), b, fi.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}

// runToken is `k3s token rotate [--token OLD] [--new-token NEW] [--server URL] [--data-dir D]`:
// the running server replaces its server token (K3S_TOKEN or the server's token file is the
// old one; a new one is generated when not given). Other token subcommands are not simulated.
func runToken(ctx context.Context, opts Options, args []string) int {
	log := simlog.New(opts.Stderr)
	if len(args) == 0 || args[0] != "rotate" {
		fmt.Fprintf(opts.Stderr, "k3s token %s: not available in the k3strap K3s simulator (only rotate)\n", strings.Join(args, " "))
		return exitFatal
	}
	server, dataDir := "https://127.0.0.1:6443", paths.DefaultDataDir
	old, newTok := opts.Getenv("K3S_TOKEN"), ""
	if u := opts.Getenv("K3S_URL"); u != "" {
		server = u
	}
	for i := 1; i < len(args); i++ {
		k, v, has := strings.Cut(args[i], "=")
		if !has && i+1 < len(args) {
			v = args[i+1]
		}
		used := !has
		switch k {
		case "--token", "-t":
			old = v
		case "--new-token":
			newTok = v
		case "--server", "-s":
			server = v
		case "--data-dir", "-d":
			dataDir = v
		default:
			fmt.Fprintf(opts.Stderr, "Incorrect Usage: flag provided but not defined: %s\n", k)
			return exitFatal
		}
		if used {
			i++
		}
	}
	if old == "" {
		b, err := os.ReadFile(opts.Root.Path(filepath.Join(dataDir, "server", "token")))
		if err != nil {
			log.Fatalf("Error: --token is required")
			return exitFatal
		}
		old = strings.TrimSpace(string(b))
	}
	ot, err := pki.ParseToken(old)
	if err != nil {
		log.Fatalf("Error: %v", err)
		return exitFatal
	}
	if newTok == "" {
		if newTok, err = pki.RandomHex(16); err != nil {
			log.Fatalf("Error: %v", err)
			return exitFatal
		}
	}
	nt, err := pki.ParseToken(newTok)
	if err != nil {
		log.Fatalf("Error: new token: %v", err)
		return exitFatal
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	body, _ := json.Marshal(join.RotateRequest{NewPassword: nt.Password})
	req, err := http.NewRequestWithContext(cctx, http.MethodPost, strings.TrimRight(server, "/")+join.RotatePath, bytes.NewReader(body))
	if err != nil {
		log.Fatalf("Error: %v", err)
		return exitFatal
	}
	req.SetBasicAuth("server", ot.Password)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // #nosec G402 -- simulator: the old token authenticates
	resp, err := client.Do(req)
	if err != nil {
		log.Fatalf("Error: %v", err)
		return exitFatal
	}
	defer func() { _ = resp.Body.Close() }()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		log.Fatalf("Error: failed to rotate token: %s %s", resp.Status, strings.TrimSpace(string(msg)))
		return exitFatal
	}
	fmt.Fprintln(opts.Stdout, "Token rotated, restart k3s nodes with new token")
	return exitOK
}
