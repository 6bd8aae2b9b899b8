// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/clock"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/config"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/flags"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/hostinfo"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/knobs"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/nodeagent"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/paths"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/sched"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/simlog"
)

// Real seconds after process start of the server milestones (timeline-default.txt,
// log-lines-default.txt).
const (
	tListen        = 1.0
	tKubeconfig    = 2.0
	tControllerLog = 2.0
	tImages        = 3.0
	tKubeletLog    = 4.0
	tReady         = 7.4
	// K3s logs "k3s is up and running" and sends systemd READY=1 together, after /readyz
	// answers: 8 s in log-lines-default.txt (readyz at 7.4), 0.7-1.5 s after /readyz on the
	// real binary in the harness (so the unit goes active after the API is ready).
	tUpAndRunning = 8.0
	tAddons       = 8.5
	tRegister     = 9.3
	// The KCM's first "Skipping a cloud provider controller" line falls between the kubelet's
	// "Starting flannel" and "Fast updating node status" lines (log-lines-f1.txt).
	tSkipCCM1    = 9.42
	tSkipCCM2    = 11.0
	tCRDStallEnd = 68.0
	// Agents: the kubelet starts right after the join.
	tAgentKubelet  = 1.5
	tAgentRegister = 3.0
)

// runtimeEnv is what every role resolves before it starts.
type runtimeEnv struct {
	opts     Options
	log      *simlog.Logger
	knobs    knobs.Knobs
	clock    clock.Clock
	cfg      *config.Result
	s        config.Settings
	nodeName string
	nodeIP   string
	dataDir  string // physical
}

// exitCode values.
const (
	exitOK    = 0
	exitFatal = 1
)

// prepare reads knobs and config (logging K3s's unknown-key warnings first) and resolves the
// node name and IP. It returns false (after logging a fatal line) when the process must exit.
func prepare(opts Options, role flags.Role, args []string) (*runtimeEnv, bool) {
	log := simlog.New(opts.Stderr)
	kn, err := knobs.Load(opts.Root.Path(paths.KnobsFile), opts.Getenv)
	if err != nil {
		log.Fatalf("k3s simulator: %v", err)
		return nil, false
	}
	env := &runtimeEnv{opts: opts, log: log, knobs: kn, clock: clock.New(kn.TimeScale)}
	res, err := config.Load(config.Input{Role: role, Args: args, Getenv: opts.Getenv, Environ: opts.Environ, Root: opts.Root}, flags.Load())
	if err != nil {
		log.Fatalf("Error: %v", err)
		return nil, false
	}
	for _, w := range res.Warnings {
		log.Warnf("%s", w)
	}
	s, err := res.Settings()
	if err != nil {
		log.Fatalf("Error: %v", err)
		return nil, false
	}
	env.cfg, env.s = res, s
	env.dataDir = opts.Root.Path(s.DataDir)
	env.nodeName = s.NodeName
	if env.nodeName == "" {
		env.nodeName = opts.Hostname
	}
	if env.nodeName == "" {
		env.nodeName = hostinfo.Hostname()
	}
	if len(s.NodeIPs) > 0 {
		env.nodeIP = s.NodeIPs[0]
	} else if ip, err := hostinfo.DefaultRouteIP(); err == nil {
		env.nodeIP = ip
	} else {
		log.Warnf("Unable to find a default route, using 127.0.0.1 as node IP: %v", err)
		env.nodeIP = "127.0.0.1"
	}
	return env, true
}

func (e *runtimeEnv) host() nodeagent.Host {
	return nodeagent.Host{
		OSImage: hostinfo.OSImage(e.opts.Root.Path(paths.OSRelease)), KernelVersion: hostinfo.KernelVersion(),
		Architecture: runtime.GOARCH, MachineID: hostinfo.MachineID(), BootID: hostinfo.BootID(),
		CPUs: hostinfo.CPUs(), MemoryKi: hostinfo.MemoryKi(), DiskKi: hostinfo.DiskKi(e.dataDir),
	}
}

// registrationTaints: node-taint entries, then the uninitialized taint when the kubelet runs
// with cloud-provider=external, then not-ready (node-registered-uninitialized.json order).
func (e *runtimeEnv) registrationTaints(cloudExternal bool) ([]corev1.Taint, error) {
	var out []corev1.Taint
	for _, t := range e.s.NodeTaints {
		tt, err := sched.ParseTaint(t)
		if err != nil {
			return nil, err
		}
		out = append(out, tt)
	}
	if cloudExternal {
		out = append(out, corev1.Taint{Key: sched.TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule})
	}
	return append(out, corev1.Taint{Key: sched.TaintNotReady, Effect: corev1.TaintEffectNoSchedule}), nil
}

// logImages logs K3s's airgap image import lines for every file in <data-dir>/agent/images.
func (e *runtimeEnv) logImages(ctx context.Context) {
	if e.clock.Until(ctx, tImages) != nil {
		return
	}
	entries, err := os.ReadDir(filepath.Join(e.dataDir, "agent", "images"))
	if err != nil {
		return
	}
	var names []string
	for _, en := range entries {
		if !en.IsDir() {
			names = append(names, en.Name())
		}
	}
	sort.Strings(names)
	for _, n := range names {
		e.log.Infof("Importing images from %s", filepath.Join(e.s.DataDir, "agent", "images", n))
	}
}

// logAt logs msg at the given real second after start (unless ctx ends first).
func (e *runtimeEnv) logAt(ctx context.Context, at float64, fn func()) {
	if e.clock.Until(ctx, at) == nil {
		fn()
	}
}

// runNode runs the node agent and maps its result to an exit code: ErrNetpolTimeout is K3s's
// F1 shutdown (logged, exit 1).
func (e *runtimeEnv) finish(err error) int {
	if errors.Is(err, nodeagent.ErrNetpolTimeout) {
		e.log.Infof("Waiting up to 2s for graceful shutdown of Kine GRPC server...")
		time.Sleep(e.clock.D(2))
		e.log.Infof("Closing database connections...")
		return exitFatal
	}
	if err != nil {
		e.log.Fatalf("Error: %v", err)
		return exitFatal
	}
	return exitOK
}
