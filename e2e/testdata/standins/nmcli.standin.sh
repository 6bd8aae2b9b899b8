#!/bin/sh
# STAND-IN for NetworkManager's nmcli (k3strap e2e tests; NetworkManager cannot manage the
# throw-away hosts' interfaces without taking them over). It prints
# `nmcli -t -f DEVICE,TYPE,STATE device status` in nmcli(1)'s terse format for the host's
# interfaces: unmanaged when NetworkManager.conf's [keyfile] unmanaged-devices names them,
# "connected (externally)" for the others.
set -eu
unmanaged=$(cat /etc/NetworkManager/NetworkManager.conf /etc/NetworkManager/conf.d/*.conf 2>/dev/null |
	sed -n 's/^unmanaged-devices=//p' | tr ';' '\n' | sed -n 's/^interface-name://p')
for d in /sys/class/net/*; do
	n=${d##*/}
	state="connected (externally)"
	for u in $unmanaged; do
		# shellcheck disable=SC2254
		case $n in $u) state=unmanaged ;; esac
	done
	type=ethernet
	[ "$n" = lo ] && type=loopback
	echo "$n:$type:$state"
done
