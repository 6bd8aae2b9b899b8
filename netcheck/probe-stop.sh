# shellcheck shell=sh
# k3strap path probe, stopping (netcheck.RunPaths): ends the detached probe program of run
# directory $1 and waits (up to 2 s) until it removed the directory, which it does after
# closing its listeners: the ports are free for K3s when this returns.
d=$1
if [ -r "$d/pid" ] && read -r p <"$d/pid" && kill "$p" 2>/dev/null; then
	n=200
	while [ -d "$d" ] && [ "$n" -gt 0 ]; do
		sleep 0.01 2>/dev/null || { sleep 1; n=$((n - 99)); }
		n=$((n - 1))
	done
	[ -d "$d" ] && kill -9 "$p" 2>/dev/null
fi
rm -rf "$d"
