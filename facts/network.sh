# shellcheck shell=sh
# k3strap network facts: sections "@@ net-<name> [argument]" of the facts document (format 1),
# parsed by facts.parseNetwork. Run as root where it can (the rulesets need CAP_NET_ADMIN) by
# gather.sh (facts) and by the doctor's node script, under any POSIX sh. Every probe is best
# effort and bounded; nothing is changed.
#
# Argument: $1 is a resolv.conf path the host's K3s config names (resolv-conf), or empty.
# Host paths (K3S_DATA_DIR) are set before this text (k3s.ShellVars).
#
# What it prints, and from which tool (docs/failure-modes.md "Host networks"):
#   net-addr ip-j | ip-o      `ip -j -d addr show` (iproute2 JSON) or `ip -o addr` + `ip -o link`
#   net-route ip-j            `ip -j route show table main`; net-route6 the same for IPv6
#   net-fdb DEV / net-neigh DEV   flannel's VXLAN forwarding and neighbour entries (bridge, ip)
#   net-nft                   `nft -j list ruleset`
#   net-iptables BACKEND FAMILY   iptables-{nft,legacy}-save and ip6tables-{nft,legacy}-save
#   net-iptables-version      `iptables --version`
#   net-firewalld             firewall-cmd --state, --get-default-zone, --list-all-zones
#   net-ufw                   `ufw status verbose`
#   net-nm                    NetworkManager and nm-cloud-setup unit states (systemctl)
#   net-nmcli                 `nmcli -t -f DEVICE,TYPE,STATE device status`
#   net-nm-conf PATH          NetworkManager.conf and its conf.d files, in the order NM reads them
#   net-resolv PATH | net-resolv-absent PATH   the resolver files K3s may use
#   net-tools                 which interpreters the path check can use

nhave() { command -v "$1" >/dev/null 2>&1; }
nsec() { printf '\n@@ %s\n' "$*"; }
# nrun CMD...: run with a 15 s limit when timeout(1) exists.
nrun() {
	if nhave timeout; then
		timeout 15 "$@"
	else
		"$@"
	fi
}

if nhave ip; then
	if out=$(ip -j -d addr show 2>/dev/null) && [ -n "$out" ]; then
		nsec net-addr ip-j
		printf '%s\n' "$out"
		nsec net-route ip-j
		ip -j route show table main 2>/dev/null
		nsec net-route6 ip-j
		ip -j -6 route show table main 2>/dev/null
	else
		nsec net-addr ip-o
		ip -o addr show 2>/dev/null
		ip -o link show 2>/dev/null
	fi
	for d in flannel.1 flannel-v6.1; do
		[ -e "/sys/class/net/$d" ] || continue
		if nhave bridge; then
			nsec net-fdb "$d"
			bridge -j fdb show dev "$d" 2>/dev/null
		fi
		nsec net-neigh "$d"
		ip -j neigh show dev "$d" 2>/dev/null
	done
fi

# Rulesets. iptables-nft rules are read from iptables-nft-save: `nft -j` shows their matches
# only as opaque "xt" expressions.
if nhave nft; then
	nsec net-nft
	nrun nft -j list ruleset 2>&1
fi
for fam in ip ip6; do
	t=iptables
	[ "$fam" = ip6 ] && t=ip6tables
	for b in nft legacy; do
		if nhave "$t-$b-save"; then
			nsec net-iptables "$b" "$fam"
			nrun "$t-$b-save" 2>/dev/null
		fi
	done
	# iptables before 1.8 has one backend, legacy, and no -legacy name.
	if ! nhave "$t-legacy-save" && ! nhave "$t-nft-save" && nhave "$t-save"; then
		case $(iptables --version 2>/dev/null) in
		*nf_tables*) b=nft ;;
		*) b=legacy ;;
		esac
		nsec net-iptables "$b" "$fam"
		nrun "$t-save" 2>/dev/null
	fi
done
if nhave iptables; then
	nsec net-iptables-version
	iptables --version 2>/dev/null
fi

if nhave firewall-cmd; then
	nsec net-firewalld
	printf 'state=%s\n' "$(nrun firewall-cmd --state 2>&1 | head -n 1)"
	printf 'default-zone=%s\n' "$(nrun firewall-cmd --get-default-zone 2>/dev/null | head -n 1)"
	nrun firewall-cmd --list-all-zones 2>/dev/null
fi
if nhave ufw; then
	nsec net-ufw
	nrun ufw status verbose 2>&1
fi

if nhave systemctl; then
	nsec net-nm
	for u in NetworkManager.service nm-cloud-setup.service nm-cloud-setup.timer; do
		printf 'active %s %s\n' "$u" "$(nrun systemctl is-active "$u" 2>/dev/null | head -n 1)"
		printf 'enabled %s %s\n' "$u" "$(nrun systemctl is-enabled "$u" 2>/dev/null | head -n 1)"
	done
fi
if nhave nmcli; then
	nsec net-nmcli
	nrun nmcli -t -f DEVICE,TYPE,STATE device status 2>/dev/null
fi
# NetworkManager.conf(5): NetworkManager.conf, then the conf.d files of /usr/lib, /run and /etc
# by file name (a later directory's file hides an earlier one of the same name).
if [ -r /etc/NetworkManager/NetworkManager.conf ]; then
	nsec net-nm-conf /etc/NetworkManager/NetworkManager.conf
	cat /etc/NetworkManager/NetworkManager.conf 2>/dev/null
fi
for f in /usr/lib/NetworkManager/conf.d/*.conf /run/NetworkManager/conf.d/*.conf /etc/NetworkManager/conf.d/*.conf; do
	[ -r "$f" ] || continue
	nsec net-nm-conf "$f"
	cat "$f" 2>/dev/null
done

# The resolver files K3s chooses from (docs/k3s.md#dns), the one its config names, and the one
# it writes itself when none is usable.
for f in /etc/resolv.conf /run/systemd/resolve/resolv.conf ${1:+"$1"} "$K3S_DATA_DIR/agent/etc/resolv.conf"; do
	if [ -r "$f" ]; then
		l=
		[ -L "$f" ] && l=$(readlink "$f" 2>/dev/null)
		nsec net-resolv "$f" ${l:+"-> $l"}
		cat "$f" 2>/dev/null
	else
		nsec net-resolv-absent "$f"
	fi
done

nsec net-tools
for t in perl python3 /usr/libexec/platform-python; do
	if p=$(command -v "$t" 2>/dev/null); then
		printf '%s\n' "$p"
	fi
done
