#!/bin/sh
# Written by `k3strap firstboot seed` (docs/edge-first-boot.md): installs the k3strap payload of
# this directory into /var/lib/k3strap and enables k3strap-firstboot.service. cloud-init runs it
# once (user-data runcmd); on an image without cloud-init, an image builder or a technician runs
# `sh install.sh` from the payload directory (or copies the files and enables the unit). Safe to
# run again: files are replaced atomically, the unit enabled and started when not running.
# A seed written with --pull-config also carries pull.yaml and the files it names: they go to
# /etc/k3strap, and `k3strap pull install` writes and enables the pull timer.
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
if [ -f "$src/pull.yaml" ]; then
  install -d -m 0755 /etc/k3strap
  for f in pull.yaml allowed_signers minisign.pub mgmt.kubeconfig; do
    [ -e "$src/$f" ] || continue
    cp "$src/$f" "/etc/k3strap/.$f.new"
    chmod 0644 "/etc/k3strap/.$f.new"
    [ "$f" != mgmt.kubeconfig ] || chmod 0600 "/etc/k3strap/.$f.new"
    mv -f "/etc/k3strap/.$f.new" "/etc/k3strap/$f"
  done
fi
install -m 0644 "$src/k3strap-firstboot.service" /etc/systemd/system/k3strap-firstboot.service
systemctl daemon-reload
systemctl enable k3strap-firstboot.service
systemctl is-active --quiet k3strap-firstboot.service || systemctl start --no-block k3strap-firstboot.service
if [ -f "$src/pull.yaml" ]; then
  "$dst/k3strap" pull install --config /etc/k3strap/pull.yaml
fi
