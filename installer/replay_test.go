// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/installer/remote/transcript"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

// replayCluster is the inventory the transcripts in testdata/transcripts/sim-1s2a were
// recorded with (docs/development.md, "Host transcripts"): 1 server + 2 agents, airgap, on
// the harness's throw-away hosts with the K3s simulator. Artifacts are small stand-in files:
// the plan checksums and uploads them, the replayed hosts answer as the recorded ones did.
const replayCluster = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: rec
spec:
  k3s:
    version: v1.36.3+k3s1
    install: airgap
    airgap:
      amd64:
        binary: art/k3s
        images: art/k3s-airgap-images-amd64.tar.zst
        checksums: art/sha256sum-amd64.txt
    config:
      disable: [traefik]
      kubelet-arg: [fail-cgroupv1=false]
  ssh:
    user: root
    keyPath: key
    knownHosts: known_hosts
  hosts:
    - name: cp1
      address: 10.125.0.11
      role: server
      labels: {topology.kubernetes.io/zone: lab}
    - name: w1
      address: 10.125.0.12
      role: agent
      taints: ["dedicated=edge:NoSchedule"]
    - name: w2
      address: 10.125.0.13
      role: agent
      labels: {tier: TIER}
`

// replayKubeconfig stands for the server's k3s.yaml, which the transcript holds masked: a
// self-signed CA and client certificate made for the test (client-go parses them when it
// builds its transport; the replay answers the API requests without dialling).
func replayKubeconfig(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "replay stand-in"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	b64 := func(typ string, b []byte) string {
		return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}))
	}
	crt := b64("CERTIFICATE", der)
	return `apiVersion: v1
kind: Config
clusters:
- cluster: {certificate-authority-data: ` + crt + `, server: "https://127.0.0.1:6443"}
  name: default
contexts:
- context: {cluster: default, user: default}
  name: default
current-context: default
users:
- name: default
  user: {client-certificate-data: ` + crt + `, client-key-data: ` + b64("EC PRIVATE KEY", kder) + `}
`
}

// replayToken stands for the cluster token, which the transcripts hold masked.
const replayToken = "K10stand-in-token::server:stand-in"

// replayRun is one run of a command against replayed hosts.
type replayRun struct {
	hosts  map[string]*transcript.Replay
	mu     sync.Mutex
	events []events.Event
	dir    string
}

func (r *replayRun) Emit(e events.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// newReplayRun loads the transcripts under testdata/transcripts/name and an inventory for
// them with stand-in artifacts in a temporary directory.
func newReplayRun(t *testing.T, name string) (*replayRun, *inventory.Cluster) {
	return newReplayRunTier(t, name, "one")
}

// newReplayRunTier is newReplayRun with w2's tier label (the drift scenarios were recorded
// with "two" against a cluster installed with "one").
func newReplayRunTier(t *testing.T, name, tier string) (*replayRun, *inventory.Cluster) {
	return newReplayRunConfig(t, name, tier, "")
}

// replayF1Config is the F1 configuration record.sh's f1 inventory holds (docs/failure-modes.md).
const replayF1Config = `      kubelet-arg: [fail-cgroupv1=false, cloud-provider=external]
      disable-cloud-controller: true
`

// newReplayRunConfig is newReplayRunTier with the cluster's kubelet-arg line replaced by
// config ("" keeps it).
func newReplayRunConfig(t *testing.T, name, tier, config string) (*replayRun, *inventory.Cluster) {
	t.Helper()
	return newReplayRunInventory(t, name, inventoryText(tier, config))
}

// newReplayRunInventory is newReplayRun with the inventory text invText (replayCluster or a
// variant of it, with the same stand-in paths).
func newReplayRunInventory(t *testing.T, name, invText string) (*replayRun, *inventory.Cluster) {
	t.Helper()
	dir := t.TempDir()
	art := filepath.Join(dir, "art")
	if err := os.MkdirAll(art, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"k3s": "stand-in k3s binary: k3s version v1.36.3+k3s1 (6b5d35b7)\n", "k3s-airgap-images-amd64.tar.zst": "stand-in images"}
	var sums strings.Builder
	for f, content := range files {
		if err := os.WriteFile(filepath.Join(art, f), []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&sums, "%x  %s\n", sha256.Sum256([]byte(content)), f)
	}
	for f, content := range map[string]string{"art/sha256sum-amd64.txt": sums.String(), "key": "unused: the hosts are replays\n", "known_hosts": ""} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, err := inventory.Parse(filepath.Join(dir, "cluster.yaml"), []byte(invText), inventory.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The hosts recorded the checksums of the real artifacts; they hold the stand-ins here.
	sumOf := map[string]string{}
	for f, content := range files {
		sumOf[f] = fmt.Sprintf("%x", sha256.Sum256([]byte(content)))
	}
	// A scenario recorded on its own (record.sh SCENARIO) keeps the checksums of the artifacts
	// it was recorded with; the others share those of the whole recording.
	recorded, err := os.ReadFile(filepath.Join("testdata", "transcripts", name, "artifacts.sha256"))
	if errors.Is(err, os.ErrNotExist) {
		recorded, err = os.ReadFile(filepath.Join("testdata", "transcripts", "artifacts.sha256"))
	}
	if err != nil {
		t.Fatal(err)
	}
	var moves []string
	for _, l := range strings.Split(strings.TrimSpace(string(recorded)), "\n") {
		if f := strings.Fields(l); len(f) == 2 && sumOf[f[1]] != "" {
			moves = append(moves, f[0], sumOf[f[1]])
		}
	}
	// The first server's token is a stand-in too (the transcript holds it masked): the hosts'
	// checksums of their token files become the stand-in's.
	tokenSum := fmt.Sprintf("%x", sha256.Sum256([]byte(replayToken+"\n")))
	tokenLine := regexp.MustCompile(`(?m)^sha [0-9a-f]{64} ` + regexp.QuoteMeta(k3s.PathTokenFile) + `$`)
	serverTokenSum := fmt.Sprintf("%x", sha256.Sum256([]byte(replayToken)))
	standIns := strings.NewReplacer(moves...)
	r := &replayRun{hosts: map[string]*transcript.Replay{}, dir: dir}
	kubeconfig := replayKubeconfig(t)
	for _, h := range c.Spec.Hosts {
		es, err := transcript.ReadFile(filepath.Join("testdata", "transcripts", name, h.Name+".jsonl"))
		if errors.Is(err, os.ErrNotExist) {
			continue // the recorded command did not reach this host
		}
		if err != nil {
			t.Fatal(err)
		}
		rp := transcript.NewReplay(h.Name, es)
		rp.Secrets = func(p string) []byte {
			if p == k3s.PathKubeconfig {
				return []byte(kubeconfig) // a fresh copy: the API clears what it read
			}
			return []byte(replayToken)
		}
		rp.Rewrite = func(e transcript.Entry) transcript.Entry {
			e.Stdout = tokenLine.ReplaceAllString(standIns.Replace(e.Stdout), "sha "+tokenSum+" "+k3s.PathTokenFile)
			// The server token as copied off the host (backup --to) is the stand-in too: the
			// host's checksum of it becomes the stand-in's.
			if e.Label == "sha256sum" && strings.HasSuffix(e.Cmd, " "+k3s.PathServerToken) && e.Stdout != "" {
				e.Stdout = serverTokenSum + "\n"
			}
			return e
		}
		r.hosts[h.Name] = rp
	}
	return r, c
}

func (r *replayRun) options(opts Options) Options {
	opts.Connect = func(ctx context.Context, h *inventory.Host) (remote.Host, error) {
		rp, ok := r.hosts[h.Name]
		if !ok {
			return nil, fmt.Errorf("no transcript for %s", h.Name)
		}
		return rp, nil
	}
	if opts.KubeconfigOut == "" {
		opts.KubeconfigOut = filepath.Join(r.dir, "rec.kubeconfig")
	}
	return opts
}

func (r *replayRun) summary(t *testing.T) *events.SummaryInfo {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e.Summary != nil {
			return e.Summary
		}
	}
	t.Fatal("no summary event")
	return nil
}

// TestReplayApply runs apply against the recorded hosts of a fresh 1 server + 2 agents
// install: it must converge every host, write each host's declared labels and taints into
// its config.yaml, and ask the hosts nothing the real run did not.
func TestReplayApply(t *testing.T) {
	r, c := newReplayRun(t, "sim-1s2a")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	in := New(c, r.options(Options{InsecureIgnoreHostKey: true}), r)
	if err := in.Apply(ctx); err != nil {
		t.Fatalf("apply: %v\nunanswered: %v\nevents:\n%s", err, r.unanswered(), r.log())
	}
	if u := r.unanswered(); len(u) > 0 {
		t.Errorf("calls the transcripts could not answer: %v", u)
	}
	cfg := string(r.hosts["cp1"].Written(k3s.PathConfig))
	if !strings.Contains(cfg, "topology.kubernetes.io/zone=lab") {
		t.Errorf("cp1 config.yaml lacks its label:\n%s", cfg)
	}
	if w1 := string(r.hosts["w1"].Written(k3s.PathConfig)); !strings.Contains(w1, "dedicated=edge:NoSchedule") {
		t.Errorf("w1 config.yaml lacks its taint:\n%s", w1)
	}
	sum := r.summary(t)
	for _, h := range sum.Hosts {
		if h.Status != events.StatusChanged {
			t.Errorf("%s: %s %q, want changed", h.Host, h.Status, h.Message)
		}
	}
}

func (r *replayRun) unanswered() []string {
	var out []string
	for name, h := range r.hosts {
		for _, u := range h.Unanswered() {
			out = append(out, name+": "+u)
		}
	}
	return out
}

// log is the run's events, one per line, for failure messages.
func (r *replayRun) log() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, e := range r.events {
		fmt.Fprintf(&b, "%s %s %s %s %s\n", e.Time.Format("15:04:05.000"), e.Phase, e.Host, e.Status, e.Message)
	}
	return b.String()
}

// inventoryText is replayCluster with w2's tier and, when set, the F1 config.
func inventoryText(tier, config string) string {
	s := strings.Replace(replayCluster, "TIER", tier, 1)
	if config != "" {
		s = strings.Replace(s, "      kubelet-arg: [fail-cgroupv1=false]\n", config, 1)
	}
	return s
}
