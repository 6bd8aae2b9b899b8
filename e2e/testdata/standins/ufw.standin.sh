#!/bin/sh
# STAND-IN for ufw (k3strap e2e tests; the throw-away hosts have no ufw package). It keeps its
# rules in /etc/k3strap-standin/ufw and installs the iptables rules ufw installs for them
# through iptables-nft (Ubuntu's default backend), simplified to what a packet's fate depends
# on: default deny incoming and routed (the INPUT and FORWARD policies DROP), ufw-before-input
# accepting loopback and established traffic, ufw-user-input / ufw-user-forward holding the
# allows. It prints `ufw status verbose` as ufw(8) does and takes `allow PORT/PROTO`,
# `allow proto P from ADDR to any port N`, `allow from CIDR to any`, `route allow from CIDR`,
# `enable`.
set -eu
S=/etc/k3strap-standin/ufw
mkdir -p "$S"
[ -f "$S/rules" ] || echo "allow 22/tcp" > "$S/rules"
apply() {
	for c in INPUT FORWARD; do
		iptables -F "$c" 2>/dev/null || true
	done
	for c in ufw-before-input ufw-user-input ufw-user-forward; do
		iptables -F "$c" 2>/dev/null || true
		iptables -X "$c" 2>/dev/null || true
	done
	for c in ufw-before-input ufw-user-input ufw-user-forward; do iptables -N "$c"; done
	iptables -A INPUT -j ufw-before-input
	iptables -A INPUT -j ufw-user-input
	iptables -A FORWARD -j ufw-user-forward
	iptables -A ufw-before-input -i lo -j ACCEPT
	iptables -A ufw-before-input -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
	while read -r l; do
		# shellcheck disable=SC2086
		set -- $l
		case "$*" in
		"allow proto "*" from "*" to any port "*) iptables -A ufw-user-input -p "$3" -s "$5" --dport "$9" -j ACCEPT ;;
		"allow from "*" to any") iptables -A ufw-user-input -s "$3" -j ACCEPT ;;
		"route allow from "*) iptables -A ufw-user-forward -s "$4" -j ACCEPT ;;
		"allow "*/*) iptables -A ufw-user-input -p "${2#*/}" --dport "${2%/*}" -j ACCEPT ;;
		esac
	done < "$S/rules"
	iptables -P INPUT DROP
	iptables -P FORWARD DROP
}
case "$*" in
"status verbose")
	echo "Status: active"
	echo "Logging: on (low)"
	echo "Default: deny (incoming), allow (outgoing), deny (routed)"
	echo "New profiles: skip"
	echo
	printf '%-26s %-11s %s\n' To Action From
	printf '%-26s %-11s %s\n' -- ------ ----
	while read -r l; do
		# shellcheck disable=SC2086
		set -- $l
		case "$*" in
		"allow proto "*" from "*" to any port "*) printf '%-26s %-11s %s\n' "$9/$3" "ALLOW IN" "$5" ;;
		"allow from "*" to any") printf '%-26s %-11s %s\n' Anywhere "ALLOW IN" "$3" ;;
		"route allow from "*) printf '%-26s %-11s %s\n' Anywhere "ALLOW FWD" "$4" ;;
		"allow "*/*) printf '%-26s %-11s %s\n' "$2" "ALLOW IN" Anywhere ;;
		esac
	done < "$S/rules"
	;;
enable) apply; echo "Firewall is active and enabled on system startup" ;;
*) echo "$*" >> "$S/rules"; apply; echo "Rule added" ;;
esac
