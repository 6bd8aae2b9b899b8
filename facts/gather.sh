# shellcheck shell=sh
# shellcheck disable=SC2153 # the K3S_* paths are set before this body (k3s.ShellVars)
# k3strap facts gatherer (document format 1). Parsed by facts.Parse; see parse.go.
#
# Runs as the SSH login user under any POSIX sh (dash, busybox ash, bash) with what a minimal
# Debian, Alpine or RHEL host has. It prints ONE document on stdout:
#   @k3strap-facts 1
#   @@ <section> [argument]      section header; the lines up to the next header are its body
#   ...                          raw file contents or key=value lines, parsed in Go
#   @@ end                       the document is complete
# The shell stays dumb: it copies files and command output, Go does the parsing.
# facts.Script sends this body without its comment lines, as a function whose output goes
# through `gzip -c` when the host has gzip (facts.Parse reads both).
#
# Inputs (set by facts.Script above this text):
#   K3STRAP_PW_STDIN=1   read one line from stdin: the sudo password (never put on a command line)
#   K3STRAP_HOST_SH      the host facts doctor shares (host.sh), run as the login user
#   K3STRAP_NETWORK_SH   the network script (network.sh), run as root where possible
#   K3STRAP_RESOLV_CONF  the resolv.conf the host's K3s config names, or empty
#   "$@"                 files whose sha256 is reported (read with privilege)
# Never exits early; every probe is best effort.

LC_ALL=C
export LC_ALL
PATH="${PATH:-/usr/bin:/bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
export PATH

k3strap_pw=
if [ "${K3STRAP_PW_STDIN:-0}" = 1 ]; then
	IFS= read -r k3strap_pw || :
fi
# Nothing below may read the caller's stdin.
exec </dev/null

sec() { printf '\n@@ %s\n' "$*"; }
# body FILE: copy a file into the current section.
body() { cat "$1" 2>/dev/null; }
have() { command -v "$1" >/dev/null 2>&1; }
# bounded CMD...: run CMD with a 20 s limit when timeout(1) exists (a hung systemctl or k3s
# binary must not hang the whole run).
bounded() {
	if have timeout; then
		timeout 20 "$@"
	else
		"$@"
	fi
}

printf '@k3strap-facts 1\n'

# The host facts doctor gathers too (host.sh, in $K3STRAP_HOST_SH): the clock (read again at
# the end; Go averages both, facts.Host.SetClockSkew), memory, free disk under K3s's data root,
# addresses, hostname, the K3s binary's version.
sh -c "$K3STRAP_HOST_SH" k3strap-host

rel=$(uname -r 2>/dev/null)
sec uname
printf 'machine=%s\nrelease=%s\n' "$(uname -m 2>/dev/null)" "$rel"

for f in /etc/os-release /usr/lib/os-release; do
	if [ -r "$f" ]; then
		sec os-release "$f"
		body "$f"
		break
	fi
done

sec init
if [ -d /run/systemd/system ]; then
	echo systemd
elif [ -x /sbin/openrc-run ]; then
	echo openrc
else
	echo none
fi

# --- privilege: root, sudo without password, sudo with the password from stdin.
uid=$(id -u 2>/dev/null)
sudo_mode=
sudo_msg=
if [ "$uid" = 0 ]; then
	sudo_mode=root
elif ! have sudo; then
	sudo_mode=unavailable
	sudo_msg='sudo is not installed'
elif sudo_msg=$(sudo -n true 2>&1); then
	sudo_mode=nopasswd
	sudo_msg=
elif [ "${K3STRAP_PW_STDIN:-0}" = 1 ]; then
	if sudo_msg=$(printf '%s\n' "$k3strap_pw" | sudo -S -p '' true 2>&1); then
		sudo_mode=password
		sudo_msg=
	else
		case $sudo_msg in
		*'try again'* | *'incorrect password'* | *'password is required'* | *'no password'*) sudo_mode=bad-password ;;
		*) sudo_mode=denied ;;
		esac
	fi
else
	case $sudo_msg in
	*'password is required'*) sudo_mode=needs-password ;;
	*) sudo_mode=denied ;;
	esac
fi
sec sudo
printf 'user=%s\nmode=%s\n' "$(id -un 2>/dev/null)" "$sudo_mode"
if [ -n "$sudo_msg" ]; then
	printf '%s\n' "$sudo_msg" | sed 's/^/message=/'
fi

# priv CMD...: run CMD as root the way the check above found.
priv() {
	case $sudo_mode in
	root) "$@" ;;
	nopasswd) sudo -n "$@" ;;
	password) printf '%s\n' "$k3strap_pw" | sudo -S -p '' "$@" ;;
	*) return 126 ;;
	esac
}

# privfeed DATA CMD...: CMD as root (as priv) with the line DATA on its standard input, behind
# the password line where sudo reads one. A script run as root goes this way, not as an
# argument: an argument shows in the process list and in sudo's log (docs/ssh.md).
privfeed() {
	k3strap_feed=$1
	shift
	case $sudo_mode in
	root) printf '%s\n' "$k3strap_feed" | "$@" ;;
	nopasswd) printf '%s\n' "$k3strap_feed" | sudo -n "$@" ;;
	password) printf '%s\n%s\n' "$k3strap_pw" "$k3strap_feed" | sudo -S -p '' "$@" ;;
	*) return 126 ;;
	esac
}

# --- kernel
gz=
if have zcat; then
	gz="zcat"
elif have gzip; then
	gz='gzip -dc'
fi
if [ -r /proc/config.gz ] && [ -n "$gz" ]; then
	sec kernel-config /proc/config.gz
	$gz /proc/config.gz 2>/dev/null | grep '^CONFIG_'
elif [ -r "/boot/config-$rel" ]; then
	sec kernel-config "/boot/config-$rel"
	grep '^CONFIG_' "/boot/config-$rel"
else
	sec kernel-config
fi

if [ -e /proc/modules ]; then
	sec modules /proc/modules
	body /proc/modules
else
	sec modules
fi

if [ -d /sys/module ]; then
	sec sys-module /sys/module
	ls /sys/module 2>/dev/null
else
	sec sys-module
fi

moddir=
for d in "/lib/modules/$rel" "/usr/lib/modules/$rel"; do
	if [ -d "$d" ]; then
		moddir=$d
		break
	fi
done
if [ -n "$moddir" ] && [ -r "$moddir/modules.builtin" ]; then
	sec modules-builtin "$moddir/modules.builtin"
	sed 's|.*/||' "$moddir/modules.builtin" 2>/dev/null
else
	sec modules-builtin
fi
if [ -n "$moddir" ] && [ -r "$moddir/modules.dep" ]; then
	sec modules-dep "$moddir/modules.dep"
	sed -e 's/:.*//' -e 's|.*/||' "$moddir/modules.dep" 2>/dev/null
else
	sec modules-dep
fi

sec namespaces
ls /proc/self/ns 2>/dev/null

if [ -r /proc/sys/kernel/keys/root_maxkeys ]; then
	sec root-maxkeys
	body /proc/sys/kernel/keys/root_maxkeys
fi

# --- cgroups
sec cgroup-mounts
grep cgroup /proc/self/mounts 2>/dev/null
if [ -r /sys/fs/cgroup/cgroup.controllers ]; then
	sec cgroup-controllers /sys/fs/cgroup/cgroup.controllers
	body /sys/fs/cgroup/cgroup.controllers
fi
if [ -r /proc/cgroups ]; then
	sec proc-cgroups
	body /proc/cgroups
fi

# --- disk (memory and free space under the data root: host.sh)
# Free space wherever k3strap writes (preflight's UploadSpace): the binary and K3s's scripts,
# k3strap's own files, K3s's configuration and data, the staging directory of a login user
# other than root, the install script's temporary directory. One line per directory:
# DIR AVAILABLE-KiB MOUNT-POINT MOUNT-OPTIONS (of its nearest existing parent).
sec space
for d in "$K3S_BIN_DIR" "$K3STRAP_DIR" "$K3S_CONFIG_DIR" "$K3S_DATA_ROOT" /var/tmp /tmp; do
	p=$d
	while [ ! -e "$p" ]; do
		p=${p%/*}
		[ -n "$p" ] || p=/
	done
	line=$(df -Pk "$p" 2>/dev/null | awk 'NR > 1 { print $(NF-2), $NF }')
	[ -n "$line" ] || continue
	opts=$(awk -v m="${line#* }" '$2 == m { o = $4 } END { print o }' /proc/self/mounts 2>/dev/null)
	printf '%s %s %s\n' "$d" "$line" "${opts:--}"
done

# --- network: listening sockets (TCP state 0A = LISTEN, UDP state 07 = unconnected)
for t in tcp tcp6; do
	if [ -r "/proc/net/$t" ]; then
		sec net "$t"
		grep ' 0A ' "/proc/net/$t" 2>/dev/null
	fi
done
for t in udp udp6; do
	if [ -r "/proc/net/$t" ]; then
		sec net "$t"
		grep ' 07 ' "/proc/net/$t" 2>/dev/null
	fi
done

if [ -r /proc/net/route ]; then
	sec route /proc/net/route
	body /proc/net/route
fi
if [ -r /proc/net/ipv6_route ]; then
	sec route6 /proc/net/ipv6_route
	grep '^00000000000000000000000000000000 00 ' /proc/net/ipv6_route 2>/dev/null
fi

# --- identity (the hostname: host.sh)
for f in /etc/machine-id /var/lib/dbus/machine-id; do
	if [ -r "$f" ]; then
		sec machine-id "$f"
		body "$f"
		break
	fi
done

# --- an existing K3s
sec k3s-units
for u in k3s k3s-agent; do
	for f in "$K3S_SYSTEMD_DIR/$u.service" "/usr/lib/systemd/system/$u.service" "/lib/systemd/system/$u.service" "$K3S_INITD_DIR/$u"; do
		[ -e "$f" ] || continue
		printf 'unit %s %s\n' "$u" "$f"
		case $f in
		/etc/init.d/*)
			if [ -e "/run/openrc/started/$u" ]; then a=active; else a=inactive; fi
			if [ -e "/etc/runlevels/default/$u" ]; then e=enabled; else e=disabled; fi
			;;
		*)
			a=
			e=
			if have systemctl; then
				a=$(bounded systemctl is-active "$u.service" 2>/dev/null)
				e=$(bounded systemctl is-enabled "$u.service" 2>/dev/null)
			fi
			;;
		esac
		printf 'active %s %s\nenabled %s %s\n' "$u" "${a:-unknown}" "$u" "${e:-unknown}"
		break
	done
done

sec k3s-files
if [ -e "$K3S_SUBNET_ENV" ]; then echo 'subnet-env present'; else echo 'subnet-env absent'; fi

# --- SELinux: the mode (getenforce, /sys/fs/selinux/enforce) and the k3s-selinux policy.
sec selinux
if have getenforce; then
	printf 'getenforce=%s\n' "$(getenforce 2>/dev/null | head -n 1)"
fi
if [ -r /sys/fs/selinux/enforce ]; then
	printf 'enforce=%s\n' "$(head -c 1 /sys/fs/selinux/enforce 2>/dev/null)"
fi
if have rpm && rpm -q k3s-selinux >/dev/null 2>&1; then
	echo policy=rpm
elif have semodule && priv semodule -l 2>/dev/null | grep -q '^k3s'; then
	echo policy=semodule
fi

# --- privileged reads, in one privileged shell: sha256 of the caller's files, the server token.
if [ "$sudo_mode" = root ] || [ "$sudo_mode" = nopasswd ] || [ "$sudo_mode" = password ]; then
	sec privileged "$sudo_mode"
	# shellcheck disable=SC2016 # expanded by the privileged shell
	priv sh -c '
for f in "$@"; do
	if [ -e "$f" ]; then
		if h=$(sha256sum <"$f" 2>/dev/null) && [ -n "$h" ]; then
			printf "sha %s %s\n" "${h%% *}" "$f"
		else
			printf "error %s\n" "$f"
		fi
	else
		printf "missing %s\n" "$f"
	fi
done
if [ -e "$K3S_SERVER_TOKEN" ]; then echo "token present"; else echo "token absent"; fi
echo done
' k3strap-facts "$@" 2>/dev/null
else
	sec privileged skipped
fi
# --- network (network.sh, in $K3STRAP_NETWORK_SH): as root when possible, since the rulesets
# need it; without root the rest is still gathered.
if [ "$sudo_mode" = root ] || [ "$sudo_mode" = nopasswd ] || [ "$sudo_mode" = password ]; then
	# shellcheck disable=SC2016 # expanded by the privileged shell
	privfeed "$K3STRAP_NETWORK_SH" sh -c 'eval "$(cat)"' k3strap-network "${K3STRAP_RESOLV_CONF:-}"
else
	sh -c "$K3STRAP_NETWORK_SH" k3strap-network "${K3STRAP_RESOLV_CONF:-}"
fi
k3strap_pw=

sec clock end
date +%s.%N 2>/dev/null

sec end
