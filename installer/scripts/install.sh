# shellcheck shell=sh
# Runs the install script $1 with INSTALL_K3S_SKIP_ENABLE (k3strap enables the unit itself: the
# official script disables the unit at every run and, with SKIP_ENABLE, neither enables nor
# reloads systemd), reloads systemd when the unit changed, and says whether the unit or env
# file changed ("@k3strap unit-changed" / "@k3strap unit-unchanged"). Uploaded artifacts are
# not hashed again here: every upload is checked against its sha256 on the host before it
# replaces the file, and the facts hash the files already in place. An airgap k3s-selinux RPM
# uploaded by k3strap (K3STRAP_SELINUX_RPM) is installed first; the proxy environment
# K3STRAP_PROXY_ENV names (spec.proxy, docs/proxy.md) is exported to the script.
set -e
script=$1
units() {
  cat "$K3S_SYSTEMD_DIR/k3s.service" "$K3S_SYSTEMD_DIR/k3s.service.env" \
    "$K3S_SYSTEMD_DIR/k3s-agent.service" "$K3S_SYSTEMD_DIR/k3s-agent.service.env" \
    "$K3S_INITD_DIR/k3s" "$K3S_INITD_DIR/k3s-agent" 2>/dev/null || true
}
before=$(units | sha256sum)
if [ -n "${K3STRAP_SELINUX_RPM:-}" ] && ! rpm -q k3s-selinux >/dev/null 2>&1; then
  if command -v dnf >/dev/null 2>&1; then dnf install -y --disablerepo='*' "$K3STRAP_SELINUX_RPM"
  elif command -v yum >/dev/null 2>&1; then yum install -y --disablerepo='*' "$K3STRAP_SELINUX_RPM"
  elif command -v zypper >/dev/null 2>&1; then zypper --no-refresh install -y "$K3STRAP_SELINUX_RPM"
  else rpm -i "$K3STRAP_SELINUX_RPM"; fi
fi
if [ -n "${K3STRAP_PROXY_ENV:-}" ]; then
  # The proxy environment (spec.proxy): the install script's downloads go through the proxy,
  # and it copies the variables into the unit's env file.
  set -a
  # shellcheck disable=SC1090
  . "$K3STRAP_PROXY_ENV"
  set +a
fi
sh "$script"
after=$(units | sha256sum)
if [ "$before" = "$after" ]; then echo "@k3strap unit-unchanged"; else
  if [ -d /run/systemd/system ]; then systemctl daemon-reload; fi
  echo "@k3strap unit-changed"
fi
