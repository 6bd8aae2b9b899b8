# shellcheck shell=sh
# Enables unit $1 (left running or stopped as it is): systemd without the implicit
# daemon-reload, or OpenRC's default runlevel ($2 = openrc).
if [ "$2" = openrc ]; then
  rc-update add "$1" default >/dev/null
else
  systemctl enable --no-reload "$1" >/dev/null
fi
