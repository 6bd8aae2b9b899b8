# shellcheck shell=sh
# k3strap path probe, sending (netcheck.RunPaths): hands the detached probe program (probe.sh,
# probe.pl "detach") the protocol lines on standard input — probes and "go" — as a command
# file it picks up within 50 ms. $1 is the run directory probe.sh named, $2 a sequence number.
# The idle and sent marks go first, so that probe-collect.sh waits for this round's; then
# SIGUSR1 wakes the program so that it starts at once instead of at its next look.
d=$1
[ -e "$d/pid" ] || {
	echo "error gone: the probe on this host has ended (its time limit passed, or it was stopped)"
	exit 3
}
rm -f "$d/idle" "$d/sent"
cat >"$d/.cmd" && mv "$d/.cmd" "$d/cmd.$2" || exit
read -r p <"$d/pid" && kill -USR1 "$p" 2>/dev/null
exit 0
