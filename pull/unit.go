// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package pull

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"al.essio.dev/pkg/shellescape"

	"github.com/k3strap/k3strap/internal/atomicfile"
)

// Unit names `pull install` writes into /etc/systemd/system.
const (
	ServiceName = "k3strap-pull.service"
	TimerName   = "k3strap-pull.timer"
	UnitDir     = "/etc/systemd/system"
)

// Units returns the service (its comment names stateDir's status file) and the timer that runs
// it — `BINARY pull run --config CONFIG` — every interval (and a minute after boot). The service
// is oneshot (the run bounds its own waits: RetryFor, the converge's timeouts); its lines go to
// the journal. A run is skipped (systemd's ExecCondition, not a failure) while the first-boot
// unit of a seeded box is still converging it: both would take the cluster lock, and the one
// that came second would fail (docs/edge-pull.md "Running").
func Units(binary, config, stateDir string, interval time.Duration) (service, timer []byte) {
	service = fmt.Appendf(nil, `# Written by `+"`k3strap pull install`"+` (docs/edge-pull.md): fetch this box's desired state,
# verify it, converge when it changed. Status: %s; journal: journalctl -u %s.
[Unit]
Description=k3strap pull: fetch, verify and converge this box's desired state
Documentation=https://github.com/k3strap/k3strap/blob/main/docs/edge-pull.md
Wants=network-online.target
After=network-online.target time-sync.target k3strap-firstboot.service

[Service]
Type=oneshot
Environment=K3STRAP_CACHE_DIR=/var/lib/k3strap/cache
ExecCondition=/bin/sh -c 'case $$(systemctl is-active k3strap-firstboot.service) in active|activating|reloading) echo "k3strap-firstboot.service is converging this box: this run is skipped"; exit 1;; esac'
ExecStart=%s pull run --config %s
StandardOutput=journal
StandardError=journal
`, filepath.Join(stateDir, StatusName), ServiceName, shellescape.Quote(binary), shellescape.Quote(config))
	timer = fmt.Appendf(nil, `# Written by `+"`k3strap pull install`"+` (docs/edge-pull.md): runs %s every %s.
[Unit]
Description=k3strap pull every %s
Documentation=https://github.com/k3strap/k3strap/blob/main/docs/edge-pull.md

[Timer]
OnBootSec=1min
OnUnitInactiveSec=%s
RandomizedDelaySec=%s
Persistent=true

[Install]
WantedBy=timers.target
`, ServiceName, interval, interval, systemdSpan(interval), systemdSpan(interval/10))
	return service, timer
}

// systemdSpan writes d as systemd's time span (seconds).
func systemdSpan(d time.Duration) string { return fmt.Sprintf("%ds", int(d.Seconds())) }

// InstallUnits writes the service and timer into root+UnitDir; a file already holding the same
// content is left alone. It returns whether a file changed (then systemd must reload).
func InstallUnits(root, binary string, c *Config) (bool, error) {
	svc, tmr := Units(binary, c.Path, c.StateDir, time.Duration(c.Interval))
	dir := filepath.Join(root, UnitDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	changed := false
	for _, f := range []struct {
		name string
		data []byte
	}{{ServiceName, svc}, {TimerName, tmr}} {
		p := filepath.Join(dir, f.name)
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, f.data) {
			continue
		}
		if err := atomicfile.WriteFile(p, f.data, 0o644); err != nil {
			return changed, err
		}
		changed = true
	}
	return changed, nil
}
