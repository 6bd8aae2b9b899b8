# shellcheck shell=sh
# k3strap path probe launcher (netcheck.ProbeScript): runs the probe program with the first
# interpreter the host has: perl (perl-base is in every Debian and Ubuntu image), else python3
# (RHEL-family and SUSE images carry it for their package managers). Alpine and other BusyBox
# hosts have neither by default: the probe then says so and exits 3, and preflight names the
# host and what to install.
#
# The programs are not on the command line: standard input starts with K3SP_PL_LEN bytes of
# probe.pl, then K3SP_PY_LEN bytes of probe.py (either may be 0), and the protocol's lines
# follow. The interpreter reads exactly those bytes itself (sysread, os.read: nothing of the
# protocol is buffered away), keeps its own program and runs it.
#
# Inputs (set by ProbeScript above this text): K3SP_PL_LEN and K3SP_PY_LEN; K3SP_LIMIT, the
# seconds after which the program ends itself whatever happens (an alarm, so it also ends when
# k3strap never comes back to stop it); K3SP_TOOL, to force one interpreter.
#
# The program's run directory (K3SP_DIR, root's own, under /run) is made here and named on the
# first line ("dir PATH"): the program keeps its output there once it detached from this
# session, and probe-send.sh, probe-collect.sh and probe-stop.sh find it there.
K3SP_LIMIT=${K3SP_LIMIT:-20}
K3SP_DIR=$(mktemp -d /run/k3strap-probe.XXXXXX 2>/dev/null || mktemp -d "${TMPDIR:-/tmp}/k3strap-probe.XXXXXX") || {
	echo "error no-dir: could not make a directory for the probe's output (mktemp -d under /run and /tmp)"
	exit 3
}
echo "dir $K3SP_DIR"
export K3SP_LIMIT K3SP_PL_LEN K3SP_PY_LEN K3SP_DIR
for t in ${K3SP_TOOL:-perl python3 /usr/libexec/platform-python}; do
	command -v "$t" >/dev/null 2>&1 || continue
	# The interpreter runs as a child, not in this shell's place: when it ends without having
	# detached (an error, its input ended), the run directory is still empty and goes with it.
	# A detached probe made its output file before it forked, so the directory stays.
	case $t in
	perl)
		perl -e '
my ($k3sp_pl, $k3sp_py) = ($ENV{K3SP_PL_LEN} || 0, $ENV{K3SP_PY_LEN} || 0);
my $k3sp_src = "";
while (length($k3sp_src) < $k3sp_pl + $k3sp_py) {
	my $r = sysread(STDIN, $k3sp_src, $k3sp_pl + $k3sp_py - length($k3sp_src), length($k3sp_src));
	if (!$r) { print "error short-program: the probe program did not arrive whole\n"; exit 3; }
}
if (!$k3sp_pl) { print "error no-program: no perl program was sent\n"; exit 3; }
eval substr($k3sp_src, 0, $k3sp_pl);
die $@ if $@;
'
		;;
	*)
		"$t" -c '
import os, sys
pl, py = int(os.environ.get("K3SP_PL_LEN") or 0), int(os.environ.get("K3SP_PY_LEN") or 0)
src = b""
while len(src) < pl + py:
    chunk = os.read(0, pl + py - len(src))
    if not chunk:
        print("error short-program: the probe program did not arrive whole", flush=True)
        sys.exit(3)
    src += chunk
if not py:
    print("error no-program: no python program was sent", flush=True)
    sys.exit(3)
exec(compile(src[pl:], "probe.py", "exec"), {"__name__": "__main__"})
'
		;;
	esac
	rc=$?
	rmdir "$K3SP_DIR" 2>/dev/null
	exit "$rc"
done
rmdir "$K3SP_DIR"
echo "error no-interpreter: neither perl nor python3 is installed"
exit 3
