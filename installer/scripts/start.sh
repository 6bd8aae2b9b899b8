# shellcheck shell=sh
# (Re)starts unit $1 ($2: start or restart) without waiting for it to become ready (the
# supervisor watches): systemd --no-block, OpenRC's rc-service in the background ($4 = openrc).
# With $3 = enable the unit is enabled right after the start is queued, without systemd's
# implicit daemon-reload (install.sh reloaded systemd when the unit changed; the symlink is what
# a boot reads), or added to OpenRC's default runlevel.
unit=$1 verb=$2 enable=$3 init=$4
if [ "$init" = openrc ]; then
  rc-service "$unit" "$verb" >/dev/null 2>&1 &
  if [ "$enable" = enable ]; then rc-update add "$unit" default >/dev/null; fi
else
  systemctl "$verb" --no-block "$unit"
  if [ "$enable" = enable ]; then systemctl enable --no-reload "$unit" >/dev/null; fi
fi
