#!/bin/sh
# STAND-IN for firewalld's firewall-cmd (k3strap e2e tests; firewalld itself cannot run in the
# throw-away hosts). It keeps a zone configuration in /etc/k3strap-standin/firewalld and, on
# --reload, installs the nftables rules firewalld 1.x installs for it, simplified to the part a
# packet's fate depends on: table inet firewalld, filter_INPUT and filter_FORWARD accepting
# established traffic and loopback, sending each packet to its zone (by source, else the
# default zone), and rejecting what no zone accepts with icmpx admin-prohibited. It prints what
# the real tool prints for the options k3strap and the tests use: --state, --get-default-zone,
# --list-all-zones (firewall-cmd(1)), --permanent [--zone=Z] --add-port=P/PROTO,
# --add-source=CIDR, --add-service=S, --reload.
set -eu
S=/etc/k3strap-standin/firewalld
mkdir -p "$S"
[ -f "$S/public.services" ] || echo ssh > "$S/public.services"
touch "$S/public.ports" "$S/trusted.sources"
zone=public
for a in "$@"; do
	case $a in
	--zone=*) zone=${a#--zone=} ;;
	esac
done
list() { tr '\n' ' ' < "$1" | sed 's/ $//'; }
port_rules() {
	while read -r s; do
		case $s in ssh) echo "    tcp dport 22 accept" ;; esac
	done < "$S/public.services"
	while read -r p; do
		[ -n "$p" ] || continue
		echo "    ${p#*/} dport ${p%/*} accept"
	done < "$S/public.ports"
}
reload() {
	srcs=$(list "$S/trusted.sources" | sed 's/ /, /g')
	{
		echo "table inet firewalld {"
		echo "  chain filter_INPUT { type filter hook input priority filter + 10; policy accept;"
		echo "    ct state { established, related } accept"
		echo "    iifname \"lo\" accept"
		echo "    jump filter_INPUT_ZONES"
		echo "    reject with icmpx admin-prohibited"
		echo "  }"
		echo "  chain filter_FORWARD { type filter hook forward priority filter + 10; policy accept;"
		echo "    ct state { established, related } accept"
		echo "    iifname \"lo\" accept"
		[ -n "$srcs" ] && echo "    ip saddr { $srcs } accept" && echo "    ip daddr { $srcs } accept"
		echo "    reject with icmpx admin-prohibited"
		echo "  }"
		echo "  chain filter_INPUT_ZONES {"
		[ -n "$srcs" ] && echo "    ip saddr { $srcs } goto filter_IN_trusted"
		echo "    goto filter_IN_public"
		echo "  }"
		echo "  chain filter_IN_public {"
		port_rules
		echo "  }"
		echo "  chain filter_IN_trusted {"
		echo "    accept"
		echo "  }"
		echo "}"
	} > "$S/ruleset.nft"
	nft delete table inet firewalld 2>/dev/null || true
	nft -f "$S/ruleset.nft"
}
case "$*" in
--state) echo running ;;
--get-default-zone) echo public ;;
--list-all-zones)
	printf 'public (default, active)\n  target: default\n  icmp-block-inversion: no\n  interfaces: eth0\n  sources: \n  services: %s\n  ports: %s\n  protocols: \n  forward: yes\n  masquerade: no\n  forward-ports: \n  source-ports: \n  icmp-blocks: \n  rich rules: \n\n' "$(list "$S/public.services")" "$(list "$S/public.ports")"
	printf 'trusted%s\n  target: ACCEPT\n  icmp-block-inversion: no\n  interfaces: \n  sources: %s\n  services: \n  ports: \n  protocols: \n  forward: yes\n  masquerade: no\n  forward-ports: \n  source-ports: \n  icmp-blocks: \n  rich rules: \n' "$([ -s "$S/trusted.sources" ] && echo ' (active)')" "$(list "$S/trusted.sources")"
	;;
--reload) reload; echo success ;;
*)
	for a in "$@"; do
		case $a in
		--add-port=*) echo "${a#--add-port=}" >> "$S/$zone.ports" ;;
		--add-source=*) echo "${a#--add-source=}" >> "$S/$zone.sources" ;;
		--add-service=*) echo "${a#--add-service=}" >> "$S/$zone.services" ;;
		esac
	done
	echo success
	;;
esac
