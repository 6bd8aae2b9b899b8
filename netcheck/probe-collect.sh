# shellcheck shell=sh
# k3strap path probe, collecting (netcheck.RunPaths): waits up to $3 ticks of 50 ms for the
# detached probe program's mark $5 — sent (its connects ended, every datagram probe's first
# copy out) or idle (its round is over; it also means sent) — prints what it printed after
# the first $2 bytes of its output, and with $4 = 1 goes on to stop it: netcheck appends
# probe-stop.sh, which takes the same $1.
d=$1 n=$3
[ -e "$d/pid" ] || {
	echo "error gone: the probe on this host has ended (its time limit passed, or it was stopped)"
	exit 3
}
while [ ! -e "$d/$5" ] && [ ! -e "$d/idle" ] && [ "$n" -gt 0 ]; do
	sleep 0.05 2>/dev/null || { sleep 1; n=$((n - 19)); }
	n=$((n - 1))
done
tail -c "+$(($2 + 1))" "$d/out"
[ "$4" = 1 ] || exit 0
