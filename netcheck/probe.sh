# shellcheck shell=sh
# k3strap path probe launcher (netcheck.ProbeScript): runs the probe program with the first
# interpreter the host has: perl (perl-base is in every Debian and Ubuntu image), else python3
# (RHEL-family and SUSE images carry it for their package managers). Alpine and other BusyBox
# hosts have neither by default: the probe then says so and exits 3, and preflight names the
# host and what to install.
#
# Inputs (set by ProbeScript above this text): K3SP_PL and K3SP_PY, the two programs;
# K3SP_LIMIT, the seconds after which the program ends itself whatever happens (an alarm, so
# it also ends when the SSH connection dropped without closing its input); K3SP_TOOL, to force
# one interpreter (tests).
K3SP_LIMIT=${K3SP_LIMIT:-20}
export K3SP_LIMIT
for t in ${K3SP_TOOL:-perl python3 /usr/libexec/platform-python}; do
	command -v "$t" >/dev/null 2>&1 || continue
	case $t in
	perl) exec perl -e "$K3SP_PL" ;;
	*) exec "$t" -c "$K3SP_PY" ;;
	esac
done
echo "error no-interpreter: neither perl nor python3 is installed"
exit 3
