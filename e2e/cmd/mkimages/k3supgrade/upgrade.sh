#!/bin/sh
# k3strap's rancher/k3s-upgrade script (e2e/cmd/mkimages; NOT upstream's file): written here from
# the documented behaviour of github.com/rancher/k3s-upgrade, whose source is not on the test
# machines. system-upgrade-controller runs it in a privileged pod with the host's PID
# namespace and the host's / at /host:
#   upgrade            replace the host's k3s binary with /opt/k3s (the release this image
#                      holds) and restart K3s; nothing to do when the binary is that release
#   prepare PLAN       wait until the Plan PLAN (the server Plan) applies to no node
# It does not verify the servers' versions before an agent upgrade (upstream's prepare does).
set -eu

NEW=/opt/k3s

info() { echo "[k3s-upgrade] $*"; }
fatal() {
	echo "[k3s-upgrade] ERROR: $*" >&2
	exit 1
}

# k3s_pid prints the PID of the host's `k3s server` or `k3s agent` process.
k3s_pid() {
	for d in /proc/[0-9]*; do
		set -- $(tr '\0' ' ' <"$d/cmdline" 2>/dev/null) ""
		case "$1" in k3s | */k3s) ;; *) continue ;; esac
		case "$2" in server | agent) echo "${d#/proc/}"; return 0 ;; esac
	done
	return 1
}

upgrade() {
	pid=$(k3s_pid) || fatal "no k3s server or agent process on this host"
	# K3s rewrites its process title: the command line may be one string "/usr/local/bin/k3s
	# server ..." as well as separate arguments; the binary is its first word either way.
	set -- $(tr '\0' ' ' <"/proc/$pid/cmdline")
	bin=$1
	case "$bin" in /*) ;; *) fatal "k3s (pid $pid) was started as $bin, not by an absolute path" ;; esac
	host_bin=/host$bin
	[ -f "$host_bin" ] || fatal "$bin not found on the host"
	new_sum=$(sha256sum "$NEW" | cut -d ' ' -f 1)
	old_sum=$(sha256sum "$host_bin" | cut -d ' ' -f 1)
	if [ "$new_sum" = "$old_sum" ]; then
		info "$bin is already this release (sha256 $new_sum): nothing to replace"
		exit 0
	fi
	cp -p "$host_bin" "$host_bin.bak"
	cp "$NEW" "$host_bin.new"
	chmod 0755 "$host_bin.new"
	mv -f "$host_bin.new" "$host_bin"
	info "replaced $bin (sha256 $old_sum, kept as $bin.bak) by sha256 $new_sum; restarting k3s (pid $pid)"
	# The service manager (systemd's Restart=always, OpenRC's supervise-daemon) starts the new binary.
	kill -9 "$pid"
}

prepare() {
	plan=${1:-}
	[ -n "$plan" ] || fatal "prepare needs the server Plan's name"
	ns=$(cat /var/run/secrets/kubernetes.io/serviceaccount/namespace)
	while :; do
		if name=$("$NEW" kubectl get plan "$plan" -n "$ns" -o 'jsonpath={.metadata.name}' 2>/dev/null) && [ -n "$name" ]; then
			applying=$("$NEW" kubectl get plan "$plan" -n "$ns" -o 'jsonpath={.status.applying}')
			[ -z "$applying" ] && break
			info "waiting for Plan $plan to finish on $applying"
		else
			info "Plan $plan does not exist yet"
		fi
		sleep 5
	done
	info "Plan $plan applies to no node"
}

case "${1:-}" in
upgrade) upgrade ;;
prepare)
	shift
	prepare "$@"
	;;
*) fatal "usage: upgrade.sh upgrade | prepare PLAN" ;;
esac
