# shellcheck shell=sh
# Uninstalls K3s through the scripts its install left (k3s-agent-uninstall.sh,
# k3s-uninstall.sh), then removes k3strap's own files, so that `apply` starts from scratch. The
# official uninstall script stops short of removing the binary and data directory while any
# other unit file matching k3s*.service exists (it assumes a second K3s service on the host;
# docs/k3s.md "Uninstall"): the script then prints "@k3strap kept" and the names of those unit
# files, and the reset fails naming them.
did=
for s in "$K3S_BIN_DIR/k3s-agent-uninstall.sh" "$K3S_BIN_DIR/k3s-uninstall.sh"; do
  if [ -x "$s" ]; then "$s" >/dev/null 2>&1 || { echo "$s failed" >&2; exit 1; }; did=1; fi
done
rm -rf "$K3STRAP_DIR" "$K3S_CONFIG_DIR"
if [ -n "$did" ] && [ -e "$K3S_BIN" ]; then
  echo "@k3strap kept"; ls "$K3S_SYSTEMD_DIR"/k3s*.service "$K3S_INITD_DIR"/k3s* 2>/dev/null; exit 0
fi
if [ -n "$did" ]; then echo "@k3strap reset"; else echo "@k3strap nothing"; fi
