#!/bin/sh
# Written by `k3strap firstboot seed` (docs/edge-first-boot.md): installs the k3strap payload of
# this directory into /var/lib/k3strap and enables k3strap-firstboot.service. cloud-init runs it
# once (user-data runcmd); on an image without cloud-init, an image builder or a technician runs
# `sh install.sh` from the payload directory (or copies the files and enables the unit). Safe to
# run again: files are replaced atomically, the unit enabled and started when not running.
set -eu
src=$(cd "$(dirname "$0")" && pwd)
dst=/var/lib/k3strap
umask 077
install -d -m 0700 "$dst" "$dst/cache"
for f in k3strap cluster.yaml token seed.json site.tar; do
  [ -e "$src/$f" ] || continue
  cp -p "$src/$f" "$dst/.$f.new"
  mv -f "$dst/.$f.new" "$dst/$f"
done
chmod 0755 "$dst/k3strap"
chmod 0600 "$dst/token" "$dst/cluster.yaml"
install -m 0644 "$src/k3strap-firstboot.service" /etc/systemd/system/k3strap-firstboot.service
systemctl daemon-reload
systemctl enable k3strap-firstboot.service
systemctl is-active --quiet k3strap-firstboot.service || systemctl start --no-block k3strap-firstboot.service
