# shellcheck shell=sh
# shellcheck disable=SC2153 # the K3S_* paths are set before this body (k3s.ShellVars)
# k3strap host facts preflight and doctor share: sections "@@ <name> [argument]" of the facts
# document (format 1), parsed by facts.Parse's section parsers — the same code for both. Run
# by gather.sh (preflight's facts, as the login user) and by the doctor's node script (as root),
# under any POSIX sh; nothing needs privilege. Every probe is best effort and bounded.
#
# What it prints (docs/architecture.md "facts"):
#   clock start           `date +%s.%N` (ClockSkew / clock-skew: k3s.ClockSkewWarn)
#   meminfo               /proc/meminfo
#   df DIR                `df -Pk` of the nearest existing parent of K3S_DATA_ROOT
#                         (Disk / disk-pressure)
#   addr ip|hostname-I|fib_trie   the host's addresses
#   hostname              the kernel's hostname
#   k3s-version BIN       `k3s --version` of the k3s on PATH or K3S_BIN
LC_ALL=C
export LC_ALL
PATH="${PATH:-/usr/bin:/bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

sec() { printf '\n@@ %s\n' "$*"; }
have() { command -v "$1" >/dev/null 2>&1; }
bounded() {
	if have timeout; then
		timeout 20 "$@"
	else
		"$@"
	fi
}

sec clock start
date +%s.%N 2>/dev/null

sec meminfo
cat /proc/meminfo 2>/dev/null

p=$K3S_DATA_ROOT
while [ ! -e "$p" ]; do
	p=${p%/*}
	[ -n "$p" ] || p=/
done
sec df "$p"
df -Pk "$p" 2>/dev/null || df -k "$p" 2>/dev/null

if have ip && out=$(ip -o addr show 2>/dev/null) && [ -n "$out" ]; then
	sec addr ip
	printf '%s\n' "$out"
elif out=$(hostname -I 2>/dev/null) && [ -n "$out" ]; then
	sec addr hostname-I
	printf '%s\n' "$out"
elif [ -r /proc/net/fib_trie ]; then
	sec addr fib_trie
	cat /proc/net/fib_trie 2>/dev/null
fi

sec hostname
if [ -r /proc/sys/kernel/hostname ]; then
	cat /proc/sys/kernel/hostname 2>/dev/null
else
	uname -n 2>/dev/null
fi

k3s_bin=
if have k3s; then
	k3s_bin=$(command -v k3s)
elif [ -x "$K3S_BIN" ]; then
	k3s_bin=$K3S_BIN
fi
sec k3s-version "$k3s_bin"
if [ -n "$k3s_bin" ]; then
	bounded "$k3s_bin" --version 2>/dev/null | head -n 2
fi
