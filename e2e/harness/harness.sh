#!/usr/bin/env bash
# harness.sh — throw-away Debian "hosts" on this machine for k3strap's end-to-end tests.
#
# A host is a systemd-nspawn --boot container (systemd is PID 1, real OpenSSH sshd as ssh.service)
# over an overlayfs root whose lower layer is one shared debootstrap'ed Debian (the "base"), with its
# own network namespace, hostname, machine-id, SSH host keys and cgroup in every hierarchy.
# Everything stays on this machine: no forwarding out of the bridges (nft guard), no NAT.
#
# Usage (as root):
#   harness.sh deps                  apt-get install debootstrap systemd-container nftables iproute2
#                                    openssh-client tinyproxy busybox-static dropbear-bin when missing
#   harness.sh base [KIND]           build the base image of host kind KIND (default bookworm) once
#                                    (debootstrap: bookworm ~70 s; trixie and openrc measured
#                                    2-7 min each on the loaded 2-core machine)
#   harness.sh up N                  N hosts h1..hN, returns when all answer SSH; idempotent; an
#                                    existing set of another size/topology/kind is torn down first
#   HARNESS_KIND=trixie|openrc harness.sh up N
#                                    hosts of another kind (below); its base is built first if
#                                    missing
#   HARNESS_TOPOLOGY=bastion harness.sh up N
#                                    h0 = bastion on the public and the private net, h1..hN only
#                                    on the private net (reachable via h0, e.g. ssh -J)
#   harness.sh env                   KEY=VALUE lines: HARNESS_DIR HARNESS_STATE_DIR HARNESS_KEY
#                                    HARNESS_SSH_CONFIG HARNESS_INSTANCE HARNESS_TOPOLOGY
#                                    HARNESS_KIND HARNESS_N
#                                    HARNESS_H<i> [HARNESS_BASTION]
#                                    (HARNESS_SSH_CONFIG: for ssh -F, applies to -J jump hosts too)
#   harness.sh exec i CMD...         run CMD inside host i as root (no SSH); stdin is passed on
#   harness.sh stop i | start i      graceful poweroff | boot again (filesystem kept)
#   harness.sh kill i                hard crash (SIGKILL to the host's PID 1)
#   harness.sh reset i               wipe host i's filesystem back to the base (keeps SSH host keys
#                                    and machine-id), give it a fresh network namespace (same
#                                    address; loss/rate kept; nft rules, uplink and MTU gone) and
#                                    boot it again
#   harness.sh cut i | heal i        unplug | replug host i's network cable(s)
#   harness.sh loss i PCT            host i loses PCT % of its packets, each direction (nftables
#                                    numgen random in the host's namespace; 0 ends it)
#   harness.sh rate i KBYTES         host i receives at most KBYTES kB/s (nftables limit, excess
#                                    dropped; 0 ends it). Loss and rate survive reset, not down.
#   harness.sh nft i ARGS...         run `nft ARGS...` in host i's network namespace (stdin passed on:
#                                    `nft i -f -` loads a ruleset, e.g. a table that drops a port;
#                                    the rules are real, the host's own nft sees them)
#   harness.sh ipv6 i                host i gets an IPv6 address too (opt-in, off by default):
#                                    PUB6::(10+i)/64 on eth0 (PUB6 = fd00:123:<instance>, a ULA),
#                                    the bridge PUB6::1/64 and a default IPv6 route via it; kept
#                                    across stop/start; reset takes it away (first boot), down too
#   harness.sh uplink i              a second cable for host i: wan0 on the uplink bridge
#                                    (<prefix>br2, 10.(143+k).0.0/24, k = HARNESS_INSTANCE < 10,
#                                    10.(173+k) for k >= 10), and host
#                                    i's default route moved to it (a multi-homed edge host: the
#                                    uplink has the default route, the plant network the inventory
#                                    address); nothing on the uplink bridge is routed anywhere
#   harness.sh mtu i MTU             host i's eth0 MTU (its end of the cable): larger packets from
#                                    the other hosts are dropped without an ICMP (a black hole), as
#                                    on a smaller-MTU link; the host's own TCP adapts (MSS)
#   harness.sh regen-hostkey i       new SSH host keys for host i (host-key-mismatch tests)
#   harness.sh cloudinit-layer       build $HARNESS_DIR/layer-cloudinit once: Debian's cloud-init
#                                    package installed over the base (an overlay layer holding
#                                    only what the package adds; apt from HARNESS_MIRROR)
#   harness.sh firstboot i SEEDDIR   host i becomes a fresh cloud-init host: its disk wiped as by
#                                    reset, the cloud-init layer under it, SEEDDIR's files
#                                    (user-data, meta-data: a NoCloud seed) in
#                                    /var/lib/cloud/seed/nocloud, then booted; nothing logs in.
#                                    The host stays a cloud-init host across stop/start/kill
#                                    until reset or down
#   harness.sh kernel-mask i F...    host i sees a kernel without features F (see below)
#   harness.sh kernel-unmask i       host i sees the machine's kernel again
#   harness.sh sysctl-hold           set the machine sysctls a real K3s kubelet needs
#                                    (vm.overcommit_memory=1 kernel.panic=10 kernel.panic_on_oops=1,
#                                    fs.inotify.max_user_instances=8192: every host's systemd and
#                                    every K3s share the machine's per-user limit, 128 by default),
#                                    saving the old values once (machine-wide, in
#                                    /run/k3strap-harness-sysctl, shared by every harness)
#   harness.sh sysctl-release        put the saved values back (also done by down)
#   harness.sh down                  remove every host, netns, veth, bridge, nft table, mount;
#                                    restore held sysctls; always safe, idempotent
#   harness.sh purge                 down + delete the base, key and password (other files in
#                                    $HARNESS_DIR are left alone)
#
# Environment: HARNESS_DIR (default /var/tmp/k3strap-e2e), HARNESS_INSTANCE (0..19, see below),
#   HARNESS_TOPOLOGY (flat|bastion),
#   HARNESS_KIND (bookworm|trixie|openrc, read by up), HARNESS_MIRROR (Debian mirror),
#   HARNESS_BASE_ROOTFS (copy this already-debootstrapped rootfs instead of running debootstrap;
#   HARNESS_BASE_ROOTFS_TRIXIE and HARNESS_BASE_ROOTFS_OPENRC for the other kinds),
#   HARNESS_WAIT (seconds to wait for SSH, default 60),
#   HARNESS_RSA=1 (also an RSA host key), HARNESS_DEBUG=1 (timestamps of the boot steps).
#
# One harness per machine and HARNESS_INSTANCE: names (k3st-* for instance 0, k3i<k>-* for the
# others) and addresses depend only on the instance, not on HARNESS_DIR. Hosts keep running after the script returns (own session, own cgroup k3st-h<i> in every
# hierarchy) until stop/kill/down. `up` returns once each host's sshd answers and one root key
# login worked; reset/start return once sshd answers (banner).
#
# Host details: nspawn hides /sys/module from containers, so every host gets the machine's
# /sys/module bind-mounted read-only (what a real host sees; kernel-mask edits that view).
# /etc/resolv.conf names the host's gateway (no DNS server there: lookups fail at once instead
# of timing out). /proc/sys/net is writable (per network namespace), capabilities are all kept.
# For a real K3s: /var/lib/rancher is bound from $HARNESS_DIR/hosts/h<i>/rancher on the machine's
# own filesystem (containerd's overlayfs snapshotter cannot stack on the overlay root; reset wipes
# it), a oneshot unit remounts the cgroup v1 controllers read-write and creates /dev/kmsg, and the
# image has iptables, conntrack, ipset and nftables (the test binary lacks K3s's bundled tools).
# For its pods (runc): the @keyring system calls are allowed and K3s's containerd clamps the pods'
# oom_score_adj to its own (this machine withholds CAP_SYS_RESOURCE); see k3s_quirks.
#
# Addresses: public bridge k3stbr0 = 10.123.0.1/24 in the machine's root namespace, host i =
#   10.123.0.(10+i). Bastion topology: private bridge in its own namespace (k3st-priv; nothing of
#   the root namespace is on it, not even an IPv6 link-local), h0 = 10.123.0.10 + 10.124.0.1,
#   h<i> = 10.124.0.(10+i) with default route via 10.124.0.1. /etc/hosts lists every host by name.
#
# Host kinds: bookworm (Debian 12, systemd; $HARNESS_DIR/base), trixie (Debian 13, systemd 257,
#   iptables on nf_tables; $HARNESS_DIR/base-trixie), openrc (Debian 12 booted by sysvinit with
#   OpenRC as its rc, no systemd; $HARNESS_DIR/base-openrc). Every kind has the users, keys and
#   K3s prep below; on openrc the prep is an OpenRC service of the boot runlevel, the containerd
#   quirk runs from /etc/conf.d/k3s and k3s-agent, and `stop` is `telinit 0` inside the host.
# Base: root login by key only; users `deploy` (sudo NOPASSWD) and `pwuser` (sudo asks for the
#   password in $HARNESS_DIR/pwuser.password, 0600, random per harness directory and shared by
#   every kind's base; SSH password login is allowed for pwuser only). All three accept
#   $HARNESS_DIR/id_ed25519.
#
# Kernel masks: `kernel-mask i F...` replaces host i's mask with exactly F... . Inside host i's
#   mount namespace only, /proc/config.gz is over-mounted by a copy of the machine's config where the
#   feature's symbols read "# CONFIG_X is not set" (non-bool dependants such as CONFIG_IP_SET_MAX
#   are dropped, as a real .config would), and /sys/module is replaced by a tmpfs re-exposing every
#   module directory except the feature's. The mask survives stop/start/kill/reset (it is the
#   "machine's kernel", not its disk) until kernel-unmask. This machine has no /proc/modules
#   (CONFIG_MODULES unset, all built in), so there is nothing to hide there. Feature names are
#   case-insensitive, with or without CONFIG_:
#     ip_set  | IP_SET            CONFIG_IP_SET, CONFIG_IP_SET_*, CONFIG_NETFILTER_XT_SET
#                                 (xt_set depends on ip_set); modules ip_set, ip_set_*, xt_set
#     ip_set_<type>               CONFIG_IP_SET_<TYPE> (e.g. ip_set_hash_ip -> IP_SET_HASH_IP);
#                                 module ip_set_<type>
#     xt_set  | NETFILTER_XT_SET  CONFIG_NETFILTER_XT_SET; module xt_set
#     vxlan   | VXLAN             CONFIG_VXLAN; module vxlan
#     wireguard | WIREGUARD       CONFIG_WIREGUARD; module wireguard
#     overlay | OVERLAY_FS        CONFIG_OVERLAY_FS; module overlay
#     br_netfilter | BRIDGE_NETFILTER   CONFIG_BRIDGE_NETFILTER; module br_netfilter
#     bridge  | BRIDGE            CONFIG_BRIDGE, CONFIG_BRIDGE_*; modules bridge, br_netfilter
#     veth    | VETH              CONFIG_VETH; module veth
#     nf_conntrack | NF_CONNTRACK CONFIG_NF_CONNTRACK; module nf_conntrack
#     xt_conntrack                CONFIG_NETFILTER_XT_MATCH_CONNTRACK; module xt_conntrack
#     xt_comment                  CONFIG_NETFILTER_XT_MATCH_COMMENT; module xt_comment
#     xt_multiport                CONFIG_NETFILTER_XT_MATCH_MULTIPORT; module xt_multiport
#     xt_mark                     CONFIG_NETFILTER_XT_MARK, _MATCH_MARK, _TARGET_MARK; module xt_mark
#     ip_vs   | IP_VS             CONFIG_IP_VS, CONFIG_IP_VS_*; modules ip_vs, ip_vs_*
#     nf_tables | NF_TABLES       CONFIG_NF_TABLES, CONFIG_NFT_*; modules nf_tables, nft_*
#     ip_tables | IP_NF_IPTABLES  CONFIG_IP_NF_IPTABLES; module ip_tables
#     anything else X             CONFIG_<X upper-case>; module <x lower-case>
set -euo pipefail

HD=${HARNESS_DIR:-/var/tmp/k3strap-e2e}
MIRROR=${HARNESS_MIRROR:-http://deb.debian.org/debian}
# iptables, conntrack and ipset: a real K3s built without its bundled k3s-root needs them on the
# host; nftables: the hosts' own rulesets (firewall tests, facts); iputils-ping: path MTU probes.
COMMON_PKGS=sudo,iproute2,procps,kmod,ca-certificates,iptables,conntrack,ipset,nftables,iputils-ping
BASE_STAMP="k3strap-harness-base 3"
# Host kinds (HARNESS_KIND, chosen at `up`; every host of an instance is of one kind), each over
# its own base image, built once on first use (or by `base KIND`) and shared by every instance:
#   bookworm  Debian 12, systemd as PID 1 ($HD/base; the default, what every test used so far)
#   trixie    Debian 13, systemd 257 as PID 1, iptables 1.8.11 on its nf_tables backend (iptables-legacy is
#             there, not the default)
#             ($HD/base-trixie)
#   openrc    Debian 12 with sysvinit-core as PID 1 and OpenRC as its rc (Debian's `openrc`
#             package; no systemd installed), sshd started by OpenRC ($HD/base-openrc)
KINDS="bookworm trixie openrc"
suite_of() { case $1 in trixie) echo trixie;; *) echo bookworm;; esac; }
init_of()  { case $1 in openrc) echo openrc;; *) echo systemd;; esac; }
pkgs_of() {
  case $1 in
    openrc) echo "openssh-server,$COMMON_PKGS";;
    *)      echo "openssh-server,systemd,systemd-sysv,dbus,$COMMON_PKGS";;
  esac
}
# The OpenRC kind's init comes in a second step, by apt inside the new root: debootstrap's own
# resolver takes the first alternative of sysvinit-core's "sysv-rc | file-rc | openrc" whatever
# --include and --exclude say, and openrc conflicts with sysv-rc.
INIT_PKGS_OPENRC="sysvinit-core openrc"
base_of()  { if [ "$1" = bookworm ]; then echo "$HD/base"; else echo "$HD/base-$1"; fi; }
# (a kind's own revision follows its name)
stamp_of() {
  case $1 in bookworm) echo "$BASE_STAMP";; openrc) echo "$BASE_STAMP openrc 4";; *) echo "$BASE_STAMP $1";; esac
}
valid_kind() { [[ " $KINDS " == *" ${1:-} "* ]] || die "unknown host kind '${1:-}' (one of: $KINDS)"; }
# Instances: HARNESS_INSTANCE=k (0..19, default 0) is a second, independent set of hosts on the same
# machine, sharing only the base image, the key and the held sysctls: its own prefix, addresses
# (10.(123+2k).0.0/24 public, 10.(124+2k).0.0/24 private for k < 10; 10.(143+2k) and
# 10.(144+2k) for k >= 10, above every uplink net of k < 10), state under $HD/i<k> and lock.
INST=${HARNESS_INSTANCE:-0}
[[ $INST =~ ^(1?[0-9])$ ]] || { echo "HARNESS_INSTANCE must be 0..19" >&2; exit 2; }
NETBASE=$((INST < 10 ? 123 + 2 * INST : 143 + 2 * INST))   # the public net's second octet
UPLINK_OCTET=$((INST < 10 ? 143 + INST : 173 + INST))       # the uplink net's (cmd_uplink)
if [ "$INST" = 0 ]; then
  P=k3st                      # prefix of every netns / link / nft table we create
  SD=$HD                      # this instance's state: hosts/, state/, ssh_config, lock
else
  P=k3i$INST
  SD=$HD/i$INST
fi
BR=${P}br0                    # public bridge, root namespace
PRIVNS=${P}-priv              # namespace holding the private bridge
PRIVBR=br1
PUB=10.$NETBASE.0
PRIV=10.$((NETBASE + 1)).0
PUB6=fd00:123:$INST:                # IPv6 public net (opt-in, cmd_ipv6): PUB6:1/64 bridge, PUB6:(10+i) host i
KEY=$HD/id_ed25519
SSH_OPTS=(-i "$KEY" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR
          -o ConnectTimeout=1 -o BatchMode=yes)
CG_CTRLS="cpu cpuacct cpuset memory devices freezer blkio pids systemd unified"

log() { printf '[harness %s] %s\n' "$(date +%T.%3N)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
debug() { [ -z "${HARNESS_DEBUG:-}" ] || log "$@"; }
[ "$(id -u)" = 0 ] || die "must run as root"

# ---------------------------------------------------------------- state & naming
hdir()   { echo "$SD/hosts/h$1"; }
hns()    { echo "$P-h$1"; }
pubveth(){ echo "${P}v$1"; }    # root-namespace end of host i's public cable
privveth(){ echo "${P}p$1"; }   # k3st-priv end of host i's private cable
topology(){ [ -f "$SD/state/topology" ] && cat "$SD/state/topology" || echo flat; }
kind()    { [ -f "$SD/state/kind" ] && cat "$SD/state/kind" || echo bookworm; }
count()   { [ -f "$SD/state/n" ] && cat "$SD/state/n" || echo 0; }
indexes() { local n; n=$(count); [ "$(topology)" = bastion ] && echo 0; [ "$n" -gt 0 ] && seq 1 "$n"; true; }
addr_of() {   # the address a client uses for host i (public, or private behind the bastion)
  if [ "$(topology)" = bastion ] && [ "$1" != 0 ]; then echo "$PRIV.$((10 + $1))"; else echo "$PUB.$((10 + $1))"; fi
}
gateway_of() {
  if [ "$(topology)" = bastion ] && [ "$1" != 0 ]; then echo "$PRIV.1"; else echo "$PUB.1"; fi
}
valid_index() {
  [[ ${1:-} =~ ^[0-9]+$ ]] || die "bad host index '${1:-}'"
  [ -d "$(hdir "$1")" ] || die "no host h$1 (run up first)"
}
ns_exists() { mountpoint -q "/run/netns/$1"; }
ms_since() { local a=${1/[.,]/} b=${EPOCHREALTIME/[.,]/}; echo $(( (b - a) / 1000 )); }
with_lock() { mkdir -p "$SD"; exec 9>"$SD/.script.lock"; flock 9; }
base_lock() { mkdir -p "$HD"; exec 8>"$HD/.base.lock"; flock 8; }

# ---------------------------------------------------------------- deps & base
cmd_deps() {
  local need=()
  command -v debootstrap >/dev/null || need+=(debootstrap)
  command -v systemd-nspawn >/dev/null || need+=(systemd-container)
  command -v nft >/dev/null || need+=(nftables)
  command -v ip >/dev/null || need+=(iproute2)
  command -v ssh >/dev/null || need+=(openssh-client)
  # The proxy test (e2e/real_proxy_test.go): a real HTTP proxy, and a static wget for hosts
  # whose image has no curl or wget.
  command -v tinyproxy >/dev/null || need+=(tinyproxy)
  [ -x /bin/busybox ] || need+=(busybox-static)
  # Dropbear for the hosts-without-SFTP test (e2e/nosftp_test.go copies it into a host; the
  # package runs no service on the machine).
  [ -x /usr/sbin/dropbear ] || need+=(dropbear-bin)
  [ ${#need[@]} -eq 0 ] && return 0
  log "apt-get install ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
}

base_configure() {   # $1 = rootfs, $2 = kind; idempotent
  local B=$1 k=${2:-bookworm} u pw
  [ -f "$KEY" ] || ssh-keygen -q -t ed25519 -N '' -C k3strap-harness -f "$KEY"
  rm -f "$B"/etc/ssh/ssh_host_*                         # per host, made at create
  cat > "$B/etc/ssh/sshd_config.d/k3strap-harness.conf" <<'EOF'
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UseDNS no
MaxStartups 100
MaxSessions 64
Match User pwuser
    PasswordAuthentication yes
EOF
  for u in deploy pwuser; do
    chroot "$B" id -u "$u" >/dev/null 2>&1 || chroot "$B" useradd -m -s /bin/bash "$u"
  done
  echo 'deploy ALL=(ALL:ALL) NOPASSWD: ALL' > "$B/etc/sudoers.d/deploy"
  echo 'pwuser ALL=(ALL:ALL) ALL' > "$B/etc/sudoers.d/pwuser"
  chmod 0440 "$B/etc/sudoers.d/deploy" "$B/etc/sudoers.d/pwuser"
  # One password per harness directory: every kind's base takes the one already there.
  if [ -s "$HD/pwuser.password" ]; then pw=$(cat "$HD/pwuser.password")
  else pw=$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 20); fi
  (umask 077; printf '%s\n' "$pw" > "$HD/pwuser.password.new")
  printf 'pwuser:%s\n' "$pw" | chroot "$B" chpasswd        # via stdin, never argv
  echo 'root:*' | chroot "$B" chpasswd -e
  install -d -m 700 "$B/root/.ssh"
  install -m 600 "$KEY.pub" "$B/root/.ssh/authorized_keys"
  for u in deploy pwuser; do
    install -d -m 700 "$B/home/$u/.ssh"
    install -m 600 "$KEY.pub" "$B/home/$u/.ssh/authorized_keys"
    chroot "$B" chown -R "$u:$u" "/home/$u/.ssh"
  done
  if [ "$(init_of "$k")" = openrc ]; then base_configure_openrc "$B"; else base_configure_systemd "$B"; fi
  : > "$B/etc/machine-id"; rm -f "$B/var/lib/dbus/machine-id" "$B/etc/hostname"
  mv "$HD/pwuser.password.new" "$HD/pwuser.password"
  stamp_of "$k" > "$B/.harness-ready"
}

base_configure_systemd() {   # $1 = rootfs
  local B=$1 u
  # Nothing in a test host needs these; they slow the boot or fail inside a container.
  for u in systemd-timesyncd.service apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer \
           e2scrub_reap.service e2scrub_all.timer fstrim.timer man-db.timer systemd-pstore.service \
           systemd-networkd-wait-online.service getty@tty1.service console-getty.service; do
    ln -sf /dev/null "$B/etc/systemd/system/$u"
  done
  # What a real K3s needs inside an nspawn host on a cgroup v1 machine: nspawn mounts the v1
  # controller hierarchies read-only and gives no /dev/kmsg; the kubelet needs both.
  cat > "$B/etc/systemd/system/harness-k3s-prep.service" <<'UNIT'
[Unit]
Description=throw-away host prep for a real K3s: cgroup v1 controllers rw, /dev/kmsg
DefaultDependencies=no
Before=sysinit.target
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'for c in cpu cpuacct cpuset memory devices freezer blkio pids; do mountpoint -q /sys/fs/cgroup/$c && mount -o remount,bind,rw /sys/fs/cgroup/$c; done; [ -e /dev/kmsg ] || mknod -m 600 /dev/kmsg c 1 11; true'
[Install]
WantedBy=sysinit.target
UNIT
  mkdir -p "$B/etc/systemd/system/sysinit.target.wants"
  ln -sf ../harness-k3s-prep.service "$B/etc/systemd/system/sysinit.target.wants/harness-k3s-prep.service"
}

# The OpenRC kind: sysvinit's /sbin/init runs OpenRC (Debian's /etc/inittab of the openrc
# package); no getty (a container has no terminals to give them), the same K3s prep as the
# systemd kind's unit as an OpenRC service of the boot runlevel, and sshd in the default runlevel.
# Debian's sysinit scripts (mountkernfs.sh) mount a fresh sysfs over nspawn's /sys, which is a
# tmpfs to their eyes: it hides the cgroup hierarchies nspawn mounted under /sys/fs/cgroup (K3s:
# "failed to find memory cgroup") and the machine's /sys/module the harness binds; the prep
# unmounts it first. At shutdown (stop: runlevel 0) Debian's umountroot remounts the root
# read-only, which is the machine's overlay mount: mount_root makes it writable again.
base_configure_openrc() {   # $1 = rootfs
  local B=$1
  sed -i -E 's/^([0-9]+:[0-9]+:respawn:.*getty.*)$/#\1/' "$B/etc/inittab"
  cat > "$B/etc/init.d/harness-k3s-prep" <<'RC'
#!/sbin/openrc-run
# k3strap e2e harness (test hosts only): cgroup v1 controllers rw and /dev/kmsg for a real K3s
# (see harness.sh base_configure_systemd: harness-k3s-prep.service).
description="throw-away host prep for a real K3s"
depend() { before *; }
start() {
  while [ "$(awk '$2 == "/sys"' /proc/self/mounts | wc -l)" -gt 1 ]; do umount -R /sys 2>/dev/null || umount -l /sys || break; done
  for c in cpu cpuacct cpuset memory devices freezer blkio pids; do
    mountpoint -q /sys/fs/cgroup/$c && mount -o remount,bind,rw /sys/fs/cgroup/$c
  done
  [ -e /dev/kmsg ] || mknod -m 600 /dev/kmsg c 1 11
  return 0
}
RC
  chmod 0755 "$B/etc/init.d/harness-k3s-prep"
  [ -e "$B/etc/runlevels/boot/harness-k3s-prep" ] || chroot "$B" rc-update add harness-k3s-prep boot >/dev/null
  [ -e "$B/etc/runlevels/default/ssh" ] || chroot "$B" rc-update add ssh default >/dev/null
}

cmd_base() {   # [KIND]: build the base image of host kind KIND (default bookworm) once
  local k=${1:-bookworm}
  valid_kind "$k"
  base_lock
  local B; B=$(base_of "$k")
  [ "$(cat "$B/.harness-ready" 2>/dev/null)" = "$(stamp_of "$k")" ] && return 0
  local hs
  for hs in "$HD/hosts" "$HD"/i[0-9]/hosts; do
    [ -d "$hs" ] && [ -n "$(ls -A "$hs")" ] \
      && [ "$(cat "${hs%/hosts}/state/kind" 2>/dev/null || echo bookworm)" = "$k" ] \
      && die "$k hosts exist in $hs; run down (every HARNESS_INSTANCE) before rebuilding the $k base"
  done
  local T=$B.tmp t0=$SECONDS src="" dlog=$HD/debootstrap.log
  [ "$k" = bookworm ] || dlog=$HD/debootstrap-$k.log
  case $k in
    bookworm) src=${HARNESS_BASE_ROOTFS:-};;
    trixie) src=${HARNESS_BASE_ROOTFS_TRIXIE:-};;
    openrc) src=${HARNESS_BASE_ROOTFS_OPENRC:-};;
  esac
  rm -rf "$T"
  if [ -n "$src" ]; then
    log "base $k: copying $src"
    cp -a "$src" "$T"
  else
    command -v debootstrap >/dev/null || die "debootstrap missing (run: $0 deps)"
    log "base $k: debootstrap --variant=minbase $(suite_of "$k") ($MIRROR)"
    debootstrap --variant=minbase --include="$(pkgs_of "$k")" "$(suite_of "$k")" "$T" "$MIRROR" \
      > "$dlog" 2>&1 || { tail -20 "$dlog" >&2; die "debootstrap of the $k base failed"; }
    if [ "$(init_of "$k")" = openrc ]; then
      log "base $k: apt-get install $INIT_PKGS_OPENRC"
      # shellcheck disable=SC2086
      chroot "$T" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        $INIT_PKGS_OPENRC >> "$dlog" 2>&1 || { tail -20 "$dlog" >&2; die "installing OpenRC into the $k base failed"; }
      chroot "$T" apt-get clean
    fi
  fi
  [ -x "$T/usr/sbin/sshd" ] && [ -x "$T/usr/bin/sudo" ] || die "$k base rootfs lacks sshd/sudo"
  if [ "$(init_of "$k")" = openrc ]; then
    [ -x "$T/sbin/openrc-run" ] && [ -x "$T/sbin/init" ] || die "$k base rootfs lacks OpenRC/sysvinit"
  else
    [ -x "$T/lib/systemd/systemd" ] || die "$k base rootfs lacks systemd"
  fi
  base_configure "$T" "$k"
  rm -rf "$B"; mv "$T" "$B"
  log "base $k ready in $((SECONDS - t0)) s"
}

# cloudinit-layer: $HD/layer-cloudinit is the upper directory of an overlay over the base in
# which apt-get installed Debian's cloud-init (no recommends): a lower layer holding only what
# the package adds (its whiteouts included), shared by every instance like the base. The
# package's own units are kept; cloud-init finds a NoCloud seed in /var/lib/cloud/seed/nocloud.
CI_STAMP="k3strap-harness-cloudinit 1 ($BASE_STAMP)"
cmd_cloudinit_layer() {
  [ "$(cat "$HD/base/.harness-ready" 2>/dev/null)" = "$BASE_STAMP" ] || cmd_base
  base_lock
  [ "$(cat "$HD/layer-cloudinit/.harness-cloudinit" 2>/dev/null)" = "$CI_STAMP" ] && return 0
  local T=$HD/layer-cloudinit.tmp W=$HD/layer-cloudinit.work M=$HD/layer-cloudinit.mnt t0=$SECONDS rc=0
  umount "$M" 2>/dev/null || true
  rm -rf "$T" "$W" "$M"; mkdir -p "$T" "$W" "$M"
  mount -t overlay "$P-cloudinit" -o "lowerdir=$HD/base,upperdir=$T,workdir=$W" "$M"
  cp /etc/resolv.conf "$M/etc/resolv.conf.harness"
  log "cloudinit-layer: apt-get install cloud-init ($MIRROR)"
  (
    mount -t proc proc "$M/proc"
    trap 'umount "$M/proc"' EXIT
    mv "$M/etc/resolv.conf" "$M/etc/resolv.conf.keep" 2>/dev/null || true
    cp "$M/etc/resolv.conf.harness" "$M/etc/resolv.conf"
    echo "deb $MIRROR $(suite_of bookworm) main" > "$M/etc/apt/sources.list"
    chroot "$M" env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
    chroot "$M" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      cloud-init >/dev/null
    r=$?
    rm -f "$M/etc/resolv.conf"; mv "$M/etc/resolv.conf.keep" "$M/etc/resolv.conf" 2>/dev/null || true
    chroot "$M" apt-get clean
    rm -rf "$M/var/lib/apt/lists"/* "$M/etc/resolv.conf.harness"
    exit $r
  ) > "$HD/cloudinit-layer.log" 2>&1 || rc=$?
  umount "$M"
  rmdir "$M"; rm -rf "$W"
  [ "$rc" = 0 ] || { tail -20 "$HD/cloudinit-layer.log" >&2; rm -rf "$T"; die "cloudinit-layer: apt-get failed"; }
  [ -x "$T/usr/bin/cloud-init" ] || die "cloudinit-layer: no /usr/bin/cloud-init after the install"
  echo "$CI_STAMP" > "$T/.harness-cloudinit"
  rm -rf "$HD/layer-cloudinit"; mv "$T" "$HD/layer-cloudinit"
  log "cloudinit-layer ready in $((SECONDS - t0)) s"
}

# firstboot i SEEDDIR: host i as a brand-new cloud-init box with SEEDDIR as its NoCloud seed.
cmd_firstboot() {
  local i=$1 seed=$2 d t0=$EPOCHREALTIME; d=$(hdir "$i")
  # sshd waits for cloud-init's network stage (Before=sshd.service): a first boot answers later.
  local HARNESS_WAIT=${HARNESS_WAIT:-240}
  [ -f "$seed/user-data" ] && [ -f "$seed/meta-data" ] || die "firstboot: $seed has no user-data and meta-data"
  cmd_cloudinit_layer
  with_lock
  cmd_kill "$i"
  umount "$d/root" 2>/dev/null || umount -l "$d/root" 2>/dev/null || true
  rm -rf "$d/upper" "$d/work" "$d/rancher"
  : > "$SD/state/cloudinit.h$i"
  net_reset "$i"
  prepare "$i"
  install -d -m 0700 "$d/root/var/lib/cloud/seed/nocloud"
  cp -a "$seed"/. "$d/root/var/lib/cloud/seed/nocloud/"
  # The harness wires the host's network and SSH itself: cloud-init leaves both alone (no
  # fallback DHCP config, host keys and root's authorized_keys kept).
  install -d "$d/root/etc/cloud/cloud.cfg.d"
  printf '%s\n' '# k3strap e2e harness (harness.sh cmd_firstboot): network and SSH are the harness'"'"'s' \
    'network: {config: disabled}' 'ssh_deletekeys: false' 'disable_root: false' 'locale: false' \
    > "$d/root/etc/cloud/cloud.cfg.d/90-k3strap-harness.cfg"
  start_one "$i"
  log "h$i first boot (cloud-init) in $(ms_since "$t0") ms"
}

# ---------------------------------------------------------------- network
net_up() {
  if ! ip link show "$BR" >/dev/null 2>&1; then
    ip link add "$BR" type bridge
    ip addr add "$PUB.1/24" dev "$BR"
    ip link set "$BR" up
  fi
  # Guard: nothing from/to the bridge is routed anywhere else; the private net is never routed
  # out of the machine (the root namespace has no route to it but the default one).
  nft list table inet "$P" >/dev/null 2>&1 || nft -f - <<EOF
table inet $P {
  chain forward_guard { type filter hook forward priority -10; policy accept;
    iifname "$BR" oifname != "$BR" drop
    oifname "$BR" iifname != "$BR" drop
  }
  chain output_guard { type filter hook output priority -10; policy accept;
    ip daddr $PRIV.0/24 reject with icmp type admin-prohibited
  }
}
EOF
  if [ "$(topology)" = bastion ] && ! ns_exists "$PRIVNS"; then
    ip netns add "$PRIVNS"
    ip -n "$PRIVNS" link add "$PRIVBR" type bridge
    ip -n "$PRIVNS" link set "$PRIVBR" up
  fi
}

# host_mac i NET: the MAC of host i's interface on net 0 (public) or 1 (private), the same at
# every create: a reset gives the host new cables (net_reset), and peers and the machine still
# hold the old MAC for its address in their neighbour tables for a while.
host_mac() { printf '02:6b:%02x:%02x:%02x:%02x' "$INST" "$2" $(($1 / 256)) $(($1 % 256)); }
host_net() {   # netns + cable(s) for host i
  local i=$1 n; n=$(hns "$i")
  ns_exists "$n" && return 0
  ip netns add "$n"
  ip -n "$n" link set lo up
  if [ "$(topology)" = flat ] || [ "$i" = 0 ]; then
    ip link add "$(pubveth "$i")" type veth peer name eth0 address "$(host_mac "$i" 0)" netns "$n"
    ip link set "$(pubveth "$i")" master "$BR" up
    ip -n "$n" addr add "$PUB.$((10 + i))/24" dev eth0
    ip -n "$n" link set eth0 up
    ip -n "$n" route add default via "$PUB.1"
  fi
  [ -f "$SD/state/ipv6.h$i" ] && host_ipv6 "$i"
  if [ "$(topology)" = bastion ]; then
    local dev=eth0 a="$PRIV.$((10 + i))"
    [ "$i" = 0 ] && { dev=eth1; a="$PRIV.1"; }
    ip link add "$(privveth "$i")" netns "$PRIVNS" type veth peer name "$dev" address "$(host_mac "$i" 1)" netns "$n"
    ip -n "$PRIVNS" link set "$(privveth "$i")" master "$PRIVBR" up
    ip -n "$n" addr add "$a/24" dev "$dev"
    ip -n "$n" link set "$dev" up
    [ "$i" = 0 ] || ip -n "$n" route add default via "$PRIV.1"   # K3s wants a default route
  fi
}

# host_ipv6 i: host i's IPv6 address on eth0 and its default route (nodad: usable at once; the
# addresses are unique by construction). The bridge gets PUB6:1 the first time. The guard table
# is inet, so its forward rules hold for IPv6 as for IPv4: nothing leaves the bridge.
host_ipv6() {
  local i=$1 n; n=$(hns "$i")
  ip addr replace "${PUB6}:1/64" dev "$BR" nodad
  ip -n "$n" addr replace "${PUB6}:$(printf %x $((10 + i)))/64" dev eth0 nodad
  ip -n "$n" -6 route replace default via "${PUB6}:1" dev eth0
}
cmd_ipv6() {
  local i=$1
  ns_exists "$(hns "$i")" || die "h$i: no such host (up first)"
  mkdir -p "$SD/state"; : > "$SD/state/ipv6.h$i"
  host_ipv6 "$i"
}

etc_hosts() {   # /etc/hosts content for host i
  local i=$1 j
  printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n'
  for j in $(indexes); do
    if [ "$(topology)" = bastion ]; then
      if [ "$j" = 0 ]; then echo "$PRIV.1 h0"; else echo "$PRIV.$((10 + j)) h$j"; fi
    else echo "$PUB.$((10 + j)) h$j"; fi
  done
  [ "$(topology)" = bastion ] && [ "$i" = 0 ] && echo "$PUB.10 h0-public"
  true
}

# ---------------------------------------------------------------- host filesystem
identity() {   # host i's SSH host keys + machine-id, kept outside its overlay
  local d; d=$(hdir "$1")
  mkdir -p "$d/id"
  [ -s "$d/id/machine-id" ] || tr -d - < /proc/sys/kernel/random/uuid > "$d/id/machine-id"
  if [ ! -f "$d/id/ssh_host_ed25519_key" ]; then new_hostkeys "$1"; fi
}
new_hostkeys() {
  local d t; d=$(hdir "$1")
  rm -f "$d/id"/ssh_host_*
  for t in ed25519 ecdsa ${HARNESS_RSA:+rsa}; do
    ssh-keygen -q -t "$t" -N '' -C "root@h$1" -f "$d/id/ssh_host_${t}_key"
  done
}
mount_root() {
  local d lower; d=$(hdir "$1"); lower=$(base_of "$(kind)")
  # A cloud-init host (cmd_firstboot) has the cloud-init layer over the base.
  [ -f "$SD/state/cloudinit.h$1" ] && lower=$HD/layer-cloudinit:$lower
  mkdir -p "$d/upper" "$d/work" "$d/root"
  mountpoint -q "$d/root" || mount -t overlay "$P-h$1" \
    -o "lowerdir=$lower,upperdir=$d/upper,workdir=$d/work" "$d/root"
  # a host whose shutdown remounted its root read-only (the openrc kind's umountroot) boots
  # read-write again, as a real machine does
  case ,$(findmnt -n -o OPTIONS "$d/root"), in *,ro,*) mount -o remount,rw "$d/root";; esac
}
seed() {   # write host i's identity into its (mounted) root
  local i=$1 d R; d=$(hdir "$i"); R=$d/root
  echo "h$i" > "$R/etc/hostname"
  etc_hosts "$i" > "$R/etc/hosts"
  # No DNS server anywhere: name the gateway, which answers port-unreachable at once, instead
  # of the machine's resolver (unreachable from here: every lookup would time out).
  rm -f "$R/etc/resolv.conf"
  printf 'nameserver %s\noptions timeout:1 attempts:1\n' "$(gateway_of "$i")" > "$R/etc/resolv.conf"
  cp "$d/id/machine-id" "$R/etc/machine-id"
  cp -p "$d/id"/ssh_host_* "$R/etc/ssh/"
}
# What this machine withholds from a real K3s's containers, made up for in host i's root (written
# at every create, so no base change; reset writes it again):
# - CAP_SYS_RESOURCE is in no bounding set here (not even the machine's root), so no process can
#   lower an oom_score_adj below 0, and runc fails every pod sandbox (the CRI asks -998 for it):
#   "failed to update /proc/self/oom_score_adj: Permission denied". A vendor drop-in of both K3s
#   units runs a script before K3s starts that gives K3s's containerd restrict_oom_score_adj
#   (containerd CRI runtime option: the adjustment is clamped to containerd's own, as for
#   rootless) through the config-v3.toml.d/ directory K3s's generated config.toml imports. It
#   sits in /usr/lib (not /etc), so K3s's install and uninstall scripts never see it, and it
#   writes nothing when the host has the capability.
# - The kernel keyring is not namespaced, so nspawn's seccomp filter refuses keyctl with EPERM
#   and runc fails "unable to join session keyring" (runc only tolerates ENOSYS): boot allows
#   the @keyring system calls.
k3s_quirks() {
  local R=$1 u
  install -d "$R/usr/lib/k3strap-harness"
  cat > "$R/usr/lib/k3strap-harness/k3s-containerd-prep" <<'SCRIPT'
#!/bin/sh
# k3strap e2e harness (test hosts only): see harness.sh k3s_quirks.
bnd=$(awk '/^CapBnd:/ {print $2}' /proc/self/status)
[ $(( (0x$bnd >> 24) & 1 )) = 1 ] && exit 0     # CAP_SYS_RESOURCE present: nothing to make up
d=/var/lib/rancher/k3s/agent/etc/containerd/config-v3.toml.d
mkdir -p "$d"
printf "# k3strap e2e harness: this machine withholds CAP_SYS_RESOURCE (see harness.sh k3s_quirks)\n[plugins.'io.containerd.cri.v1.runtime']\n  restrict_oom_score_adj = true\n" > "$d/90-k3strap-harness.toml"
SCRIPT
  chmod 0755 "$R/usr/lib/k3strap-harness/k3s-containerd-prep"
  for u in k3s k3s-agent; do
    install -d "$R/usr/lib/systemd/system/$u.service.d"
    printf '[Service]\nExecStartPre=-/usr/lib/k3strap-harness/k3s-containerd-prep\n' \
      > "$R/usr/lib/systemd/system/$u.service.d/90-k3strap-harness.conf"
  done
  # OpenRC has no drop-ins: openrc-run sources /etc/conf.d/<service> before every action of
  # the service install.sh writes (/etc/init.d/k3s, k3s-agent), so the script runs from there
  # (K3s's install and uninstall scripts leave /etc/conf.d alone).
  if [ -x "$R/sbin/openrc-run" ]; then
    install -d "$R/etc/conf.d"
    for u in k3s k3s-agent; do
      printf '# k3strap e2e harness (test hosts only): see harness.sh k3s_quirks\n/usr/lib/k3strap-harness/k3s-containerd-prep || true\n' \
        > "$R/etc/conf.d/$u"
    done
  fi
}
prepare() {   # host i's disk: identity, overlay, seed; idempotent, parallel-safe
  local i=$1
  mkdir -p "$(hdir "$i")"
  identity "$i"; mount_root "$i"; seed "$i"; k3s_quirks "$(hdir "$i")/root"
  mkdir -p "$(hdir "$i")/rancher"
}
create() { prepare "$1"; host_net "$1"; }

# ---------------------------------------------------------------- cgroups
# Each host gets its own cgroup in every v1 hierarchy and in the unified one. Without it nspawn's
# payload cgroup is shared by all hosts and one host's systemd manages (and kills) the units of
# the others.
cg_path() { local c=$1 k=$1 rel; [ "$c" = systemd ] && k=name=systemd
  if [ "$c" = unified ]; then rel=$(awk -F: '$1=="0"{print $3}' /proc/self/cgroup)
  else rel=$(awk -F: -v c="$k" '$2==c{print $3}' /proc/self/cgroup); fi
  echo "/sys/fs/cgroup/$c${rel%/}"; }
cg_enter() {   # move the calling (sub)shell into host $1's cgroups
  local n=$1 c b p
  for c in $CG_CTRLS; do
    [ -d "/sys/fs/cgroup/$c" ] || continue
    b=$(cg_path "$c"); p=$b/$n; mkdir -p "$p"
    [ "$c" = cpuset ] && { cat "$b/cpuset.cpus" > "$p/cpuset.cpus"; cat "$b/cpuset.mems" > "$p/cpuset.mems"; }
    echo "$BASHPID" > "$p/cgroup.procs"
  done
}
cg_thaw() {   # thaw the k3st-h* cgroups matching $1: a frozen task (runc freezes a container while it
  # creates or pauses it; a host torn down then leaves it so) takes SIGKILL only once thawed
  local f
  for f in $(find /sys/fs/cgroup/freezer /sys/fs/cgroup/unified -maxdepth 12 -path "*/$1/*" \( -name freezer.state -o -name cgroup.freeze \) 2>/dev/null); do
    case $f in
    *freezer.state) grep -q FROZEN "$f" 2>/dev/null && echo THAWED > "$f" 2>/dev/null ;;
    *) [ "$(cat "$f" 2>/dev/null)" = 1 ] && echo 0 > "$f" 2>/dev/null ;;
    esac
  done; true
}
cg_kill() {   # SIGKILL every process in host cgroup $1 (systemd hierarchy) until it is empty
  local n=$1 root k pids
  root=$(cg_path systemd)/$n
  [ -d "$root" ] || return 0
  cg_thaw "$n"
  for k in $(seq 1 100); do
    pids=$(find "$root" -name cgroup.procs -exec cat {} + 2>/dev/null)
    pids=$(for q in $pids; do alive "$q" && echo "$q"; done)
    [ -n "$pids" ] || return 0
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    sleep 0.02
  done
  log "$n: processes survive SIGKILL: $pids"
}
cg_remove_all() {   # remove every k3st-h* cgroup tree: ours, and any an earlier run made from another cgroup
  local c p pids
  cg_thaw "$P-h*"
  for c in $CG_CTRLS; do
    [ -d "/sys/fs/cgroup/$c" ] || continue
    for p in $(find "/sys/fs/cgroup/$c" -maxdepth 5 -type d -name "$P-h*" 2>/dev/null); do
      [ -d "$p" ] || continue
      pids=$(find "$p" -name cgroup.procs -exec cat {} + 2>/dev/null)
      # shellcheck disable=SC2086
      [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
      find "$p" -depth -type d -exec rmdir {} \; 2>/dev/null
    done
  done; true
}

# ---------------------------------------------------------------- lifecycle
# alive PID: exists and is not a zombie (this machine's PID 1 reaps orphans only every second or so)
alive() { local s; s=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) && [ -n "$s" ] && [ "$s" != Z ]; }
starttime() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20; }
running() {   # host i's systemd-nspawn is alive; $d/start guards against a recycled PID
  local d p; d=$(hdir "$1")
  [ -f "$d/pid" ] && p=$(cat "$d/pid") && alive "$p" \
    && [ "$(starttime "$p")" = "$(cat "$d/start" 2>/dev/null)" ]
}
init_comm() { if [ "$(init_of "$(kind)")" = openrc ]; then echo init; else echo systemd; fi; }
leader() {     # PID (root pid namespace) of host i's PID 1 (systemd, or sysvinit's init)
  local d p c g m; d=$(hdir "$1"); m=$(init_comm)
  running "$1" || return 1
  p=$(cat "$d/pid")
  for c in $(pgrep -P "$p"); do
    [ "$(cat "/proc/$c/comm" 2>/dev/null)" = "$m" ] && { echo "$c"; return 0; }
    for g in $(pgrep -P "$c"); do
      [ "$(cat "/proc/$g/comm" 2>/dev/null)" = "$m" ] && { echo "$g"; return 0; }
    done
  done
  return 1
}
boot() {
  local i=$1 d; d=$(hdir "$i")
  running "$i" && return 0
  (
    cg_enter "$(hns "$i")"
    # /proc/sys/net writable (it is per network namespace); the rest of /proc/sys stays read-only.
    SYSTEMD_NSPAWN_API_VFS_WRITABLE=network \
    exec setsid systemd-nspawn --quiet --boot -D "$d/root" --machine="h$i" --hostname="h$i" \
      --network-namespace-path="/run/netns/$(hns "$i")" --register=no --keep-unit \
      --link-journal=no --resolv-conf=off --timezone=off --console=read-only --capability=all \
      --system-call-filter=@keyring \
      --bind-ro=/sys/module --bind="$d/rancher:/var/lib/rancher"
  ) </dev/null >"$d/console.log" 2>&1 8>&- 9>&- &   # fd 8, 9 = our locks: the host must not hold them
  starttime $! > "$d/start"
  echo $! > "$d/pid"
  debug "h$i: nspawn started"
}
wait_ready() {   # leader up -> kernel mask applied -> SSH answers
  local i=$1 d t0=$SECONDS a; d=$(hdir "$i"); a=$(addr_of "$i")
  until leader "$i" >/dev/null; do
    running "$i" || { tail -20 "$d/console.log" >&2; die "h$i: systemd-nspawn exited"; }
    (( SECONDS - t0 > ${HARNESS_WAIT:-60} )) && die "h$i: no systemd"
    sleep 0.05
  done
  debug "h$i: systemd up"
  if [ -s "$d/kmask" ]; then kmask_apply "$i"; fi
  # sshd answering with its banner on the host's own address; a full login would add ~0.4 s
  # (the first login of a fresh host starts logind's user session)
  until ip netns exec "$(hns "$i")" timeout 2 bash -c \
      'exec 3<>"/dev/tcp/$1/22" && read -r -t 1 l <&3 && [[ $l == SSH-2.0-* ]]' _ "$a" 2>/dev/null; do
    running "$i" || { tail -20 "$d/console.log" >&2; die "h$i: systemd-nspawn exited"; }
    (( SECONDS - t0 > ${HARNESS_WAIT:-60} )) && { tail -30 "$d/console.log" >&2; die "h$i: ssh not up"; }
    sleep 0.1
  done
}
parallel() {   # parallel FUNC i... ; fails if any fails
  local f=$1 i pids=() rc=0; shift
  for i in "$@"; do "$f" "$i" & pids+=($!); done
  for i in "${pids[@]}"; do wait "$i" || rc=1; done
  return $rc
}
start_one() { boot "$1"; wait_ready "$1"; }
verify_login() {   # one real key login as root, from inside the host's own network namespace
  ip netns exec "$(hns "$1")" ssh "${SSH_OPTS[@]}" -o ConnectTimeout=5 "root@$(addr_of "$1")" true \
    </dev/null || die "h$1: sshd answers but root key login fails"
}

write_ssh_config() {   # for `ssh -F`: also applies to -J jump hosts, unlike -o options
  cat > "$SD/ssh_config" <<EOF
Host *
    IdentityFile $KEY
    IdentitiesOnly yes
    StrictHostKeyChecking no
    UserKnownHostsFile /dev/null
    BatchMode yes
    LogLevel ERROR
    ConnectTimeout 5
EOF
}
cmd_up() {
  local n=${1:-} topo=${HARNESS_TOPOLOGY:-flat} k=${HARNESS_KIND:-bookworm} t0=$EPOCHREALTIME i
  [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] || die "usage: up N (1..200)"
  case $topo in flat|bastion) ;; *) die "HARNESS_TOPOLOGY must be flat or bastion";; esac
  valid_kind "$k"
  if [ "$(cat "$(base_of "$k")/.harness-ready" 2>/dev/null)" != "$(stamp_of "$k")" ]; then cmd_base "$k"; fi
  with_lock
  if [ -d "$SD/hosts" ] && { [ "$(topology)" != "$topo" ] || [ "$(count)" != "$n" ] || [ "$(kind)" != "$k" ]; }; then
    log "replacing $(count) $(topology) $(kind) hosts by $n $topo $k hosts"; down_all
  fi
  mkdir -p "$SD/state" "$SD/hosts"
  echo "$topo" > "$SD/state/topology"; echo "$n" > "$SD/state/n"; echo "$k" > "$SD/state/kind"
  write_ssh_config
  net_up
  # shellcheck disable=SC2046
  parallel prepare $(indexes)
  # ip netns add is not safe to run in parallel (it may bind-mount /run/netns over itself)
  for i in $(indexes); do host_net "$i"; done
  # shellcheck disable=SC2046
  parallel start_one $(indexes)
  # shellcheck disable=SC2046
  parallel verify_login $(indexes)
  log "$n $topo $k hosts up in $(ms_since "$t0") ms"
}

cmd_stop() {   # graceful: nspawn turns SIGTERM into a poweroff of the host's systemd
  local i=$1 d p k; d=$(hdir "$i")
  if running "$i"; then
    p=$(cat "$d/pid")
    # sysvinit has no handler for the signal nspawn sends (SIGRTMIN+3): its own runlevel 0
    # (OpenRC's shutdown, then halt) instead
    if [ "$(init_of "$(kind)")" = openrc ]; then host_exec "$i" telinit 0 || kill -TERM "$p"
    else kill -TERM "$p"; fi
    for k in $(seq 1 150); do alive "$p" || break; sleep 0.1; done
    alive "$p" && { log "h$i: poweroff timed out, killing"; cmd_kill "$i"; }
  fi
  rm -f "$d/pid"
}
cmd_kill() {   # hard crash: SIGKILL PID 1 of the host; its pid namespace dies with it
  local i=$1 d p l k; d=$(hdir "$i")
  if running "$i"; then
    p=$(cat "$d/pid")
    l=$(leader "$i") && kill -KILL "$l" 2>/dev/null || true
    for k in $(seq 1 100); do alive "$p" || break; sleep 0.02; done
  fi
  cg_kill "$(hns "$i")"   # whatever is left in the host's cgroup (nspawn included)
  rm -f "$d/pid"
}
cmd_start() { local i=$1; create "$i"; start_one "$i"; }
net_reset() {   # host i gets a fresh network namespace: the kernel state a killed host leaves
  # there (a K3s's flannel.1 VXLAN device holding UDP 8472, cni0, veths, iptables and nft rules,
  # conntrack) is not on its disk and would outlive a reset. Loss and rate rules are re-applied.
  local i=$1
  # ip netns add is not safe in parallel (resets of several hosts run at once): serialise.
  exec 6>"$SD/.net.lock"; flock 6
  ip netns del "$(hns "$i")" 2>/dev/null || true
  rm -f "$SD/state/ipv6.h$i"    # IPv6 is opt-in per test: a reset host is back to IPv4 only
  ip link del "$(pubveth "$i")" 2>/dev/null || true
  if [ "$(topology)" = bastion ]; then ip -n "$PRIVNS" link del "$(privveth "$i")" 2>/dev/null || true; fi
  host_net "$i"
  if [ -f "$SD/state/loss.h$i" ] || [ -f "$SD/state/rate.h$i" ]; then link_rules "$i"; fi
  flock -u 6; exec 6>&-
}
cmd_reset() {
  local i=$1 d t0=$EPOCHREALTIME; d=$(hdir "$i")
  cmd_kill "$i"; debug "h$i: killed"
  umount "$d/root" 2>/dev/null || umount -l "$d/root"
  rm -rf "$d/upper" "$d/work" "$d/rancher"
  rm -f "$SD/state/cloudinit.h$i"   # back to a plain host (cmd_firstboot)
  net_reset "$i"
  create "$i"; start_one "$i"
  log "h$i reset in $(ms_since "$t0") ms"
}

cmd_cut() {
  local i=$1 v=$(pubveth "$1")
  ip link show "$v" >/dev/null 2>&1 && ip link set "$v" down
  [ "$(topology)" = bastion ] && ip -n "$PRIVNS" link set "$(privveth "$i")" down
  true
}
cmd_heal() {
  local i=$1 v=$(pubveth "$1")
  ip link show "$v" >/dev/null 2>&1 && ip link set "$v" up
  [ "$(topology)" = bastion ] && ip -n "$PRIVNS" link set "$(privveth "$i")" up
  true
}

# uplink i: host i gets wan0 on the uplink bridge and its default route there.
cmd_uplink() {
  local i=$1 n up br gw v
  n=$(hns "$i"); up=10.$UPLINK_OCTET.0; br=${P}br2; gw=$up.1; v=${P}u$i
  ns_exists "$n" || die "h$i has no network namespace (harness up first)"
  if ! ip link show "$br" >/dev/null 2>&1; then
    ip link add "$br" type bridge
    ip addr add "$gw/24" dev "$br"
    ip link set "$br" up
  fi
  # nothing from or to the uplink bridge is routed anywhere (as the public bridge's guard)
  nft list table inet "${P}up" >/dev/null 2>&1 || printf '%s\n' \
    "table inet ${P}up {" \
    "  chain forward_guard { type filter hook forward priority -10; policy accept;" \
    "    iifname \"$br\" drop" \
    "    oifname \"$br\" drop" \
    "  }" \
    "}" | nft -f -
  if ! ip -n "$n" link show wan0 >/dev/null 2>&1; then
    ip link del "$v" 2>/dev/null || true
    ip link add "$v" type veth peer name wan0 netns "$n"
    ip link set "$v" master "$br" up
    ip -n "$n" addr add "$up.$((10 + i))/24" dev wan0
    ip -n "$n" link set wan0 up
  fi
  ip -n "$n" route replace default via "$gw" dev wan0
}

cmd_mtu() {
  [[ "${2:-}" =~ ^[0-9]+$ ]] && [ "$2" -ge 576 ] && [ "$2" -le 9000 ] || die "usage: mtu i MTU (576-9000)"
  ip -n "$(hns "$1")" link set eth0 mtu "$2"
}

cmd_nft() {
  local i=$1; shift
  ip netns exec "$(hns "$i")" nft "$@"
}

# Link quality of host i: a table in the host's own network namespace (loopback untouched),
# rebuilt from $SD/state/{loss,rate}.h<i>.
link_rules() {
  local i=$1 n loss rate in="" out=""
  n=$(hns "$i")
  ns_exists "$n" || die "h$i has no network namespace (harness up first)"
  loss=$(cat "$SD/state/loss.h$i" 2>/dev/null || echo 0)
  rate=$(cat "$SD/state/rate.h$i" 2>/dev/null || echo 0)
  ip netns exec "$n" nft delete table inet "${P}link" 2>/dev/null || true
  [ "$loss" = 0 ] && [ "$rate" = 0 ] && return 0
  if [ "$loss" != 0 ]; then
    in="iifname != \"lo\" numgen random mod 100 < $loss drop"
    out="oifname != \"lo\" numgen random mod 100 < $loss drop"
  fi
  [ "$rate" = 0 ] || in="$in
    iifname != \"lo\" limit rate over $rate kbytes/second burst $((rate / 4 + 64)) kbytes drop"
  ip netns exec "$n" nft -f - <<EOF
table inet ${P}link {
  chain in { type filter hook input priority -5; policy accept;
    $in
  }
  chain out { type filter hook output priority -5; policy accept;
    $out
  }
}
EOF
}
cmd_loss() {
  [[ "${2:-}" =~ ^[0-9]+$ ]] && [ "$2" -le 100 ] || die "usage: loss i PCT (0-100)"
  mkdir -p "$SD/state"; echo "$2" > "$SD/state/loss.h$1"; link_rules "$1"
}
cmd_rate() {
  [[ "${2:-}" =~ ^[0-9]+$ ]] || die "usage: rate i KBYTES (kB/s, 0 = unlimited)"
  mkdir -p "$SD/state"; echo "$2" > "$SD/state/rate.h$1"; link_rules "$1"
}

cmd_regen_hostkey() {
  local i=$1 d; d=$(hdir "$i")
  new_hostkeys "$i"
  if mountpoint -q "$d/root"; then
    rm -f "$d/root/etc/ssh"/ssh_host_*; cp -p "$d/id"/ssh_host_* "$d/root/etc/ssh/"
  fi
  if running "$i"; then
    host_exec "$i" systemctl restart ssh.service
    wait_ready "$i"
  fi
}

host_exec() {   # run argv inside host i (all its namespaces, its root and cwd /)
  local i=$1 l n=0 m; shift; m=$(init_comm)
  # Right after a boot the process found may be gone a moment later (nspawn's start-up):
  # look again until its namespaces are there (at most 10 s).
  while :; do
    l=$(leader "$i") || die "h$i is not running"
    [ -e "/proc/$l/ns/cgroup" ] && [ "$(cat "/proc/$l/comm" 2>/dev/null)" = "$m" ] && break
    n=$((n + 1)); [ "$n" -lt 40 ] || die "h$i: its $m ($l) keeps going away"
    sleep 0.25
  done
  nsenter -t "$l" -m -u -i -n -p -C -r -w \
    env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
      USER=root LOGNAME=root TERM=dumb LANG=C.UTF-8 "$@"
}
cmd_exec() { [ $# -ge 2 ] || die "usage: exec i CMD..."; valid_index "$1"; host_exec "$@"; }

# ---------------------------------------------------------------- kernel masks
kfeature() {   # prints two lines for feature $1: config symbols (ERE pieces), module globs
  local f=$1; f=${f#CONFIG_}; f=${f#config_}
  local l=${f,,} u=${f^^}
  case $l in
    ip_set)                       echo "IP_SET IP_SET_[A-Z0-9_]* NETFILTER_XT_SET"; echo "ip_set ip_set_* xt_set";;
    xt_set|netfilter_xt_set)      echo "NETFILTER_XT_SET"; echo "xt_set";;
    ip_set_*)                     echo "$u"; echo "$l";;
    vxlan)                        echo "VXLAN"; echo "vxlan";;
    wireguard)                    echo "WIREGUARD"; echo "wireguard";;
    overlay|overlay_fs)           echo "OVERLAY_FS"; echo "overlay";;
    br_netfilter|bridge_netfilter) echo "BRIDGE_NETFILTER"; echo "br_netfilter";;
    bridge)                       echo "BRIDGE BRIDGE_[A-Z0-9_]*"; echo "bridge br_netfilter";;
    veth)                         echo "VETH"; echo "veth";;
    nf_conntrack)                 echo "NF_CONNTRACK"; echo "nf_conntrack";;
    xt_conntrack|netfilter_xt_match_conntrack) echo "NETFILTER_XT_MATCH_CONNTRACK"; echo "xt_conntrack";;
    xt_comment|netfilter_xt_match_comment)     echo "NETFILTER_XT_MATCH_COMMENT"; echo "xt_comment";;
    xt_multiport|netfilter_xt_match_multiport) echo "NETFILTER_XT_MATCH_MULTIPORT"; echo "xt_multiport";;
    xt_mark)                      echo "NETFILTER_XT_MARK NETFILTER_XT_MATCH_MARK NETFILTER_XT_TARGET_MARK"; echo "xt_mark";;
    ip_vs)                        echo "IP_VS IP_VS_[A-Z0-9_]*"; echo "ip_vs ip_vs_*";;
    nf_tables)                    echo "NF_TABLES NFT_[A-Z0-9_]*"; echo "nf_tables nft_*";;
    ip_tables|ip_nf_iptables)     echo "IP_NF_IPTABLES"; echo "ip_tables";;
    *)                            echo "$u"; echo "$l";;
  esac
}
kmask_apply() {   # apply $d/kmask (one feature a line) inside host i's mount namespace
  local i=$1 d l f s m syms="" mods="" re gen; d=$(hdir "$i")
  while read -r f; do
    [ -n "$f" ] || continue
    { read -r s; read -r m; } < <(kfeature "$f")
    syms+=" $s"; mods+=" $m"
  done < "$d/kmask"
  re=$(echo $syms | tr ' ' '|')
  gen=$d/kmask.config.gz
  [ -r /proc/config.gz ] || die "this machine has no /proc/config.gz"
  zcat /proc/config.gz | sed -E -e "s/^CONFIG_($re)=[ym]\$/# CONFIG_\\1 is not set/" \
                              -e "/^CONFIG_($re)=/d" | gzip -n > "$gen"
  l=$(leader "$i") || die "h$i is not running"
  kmask_clear "$l"
  nsenter -t "$l" -m -p sh -c 'mkdir -p /run/k3strap-harness && cat > /run/k3strap-harness/config.gz' < "$gen"
  # Private mounts only: a shared /sys/module would propagate the tmpfs onto the saved view too.
  # shellcheck disable=SC2016
  nsenter -t "$l" -m -p bash -euc '
    S=/run/k3strap-harness
    mount --bind -o ro $S/config.gz /proc/config.gz
    mkdir -p $S/sysmodule
    mount --make-private /sys/module
    mount --bind /sys/module $S/sysmodule
    mount --make-private $S/sysmodule
    mount -t tmpfs -o mode=755 k3strap-kmask /sys/module
    shopt -s nullglob
    for m in $S/sysmodule/*; do
      n=${m##*/}; hide=0
      for g in $1; do [[ $n == $g ]] && hide=1; done
      [ $hide = 1 ] && continue
      mkdir /sys/module/$n; mount --bind $m /sys/module/$n
    done
    mount -o remount,ro /sys/module
    umount $S/sysmodule; rmdir $S/sysmodule' kmask "$mods" || die "h$i: kernel mask failed"
}
kmask_clear() {   # $1 = leader pid
  # shellcheck disable=SC2016
  nsenter -t "$1" -m -p bash -c '
    while [ "$(stat -f -c %T /sys/module)" = tmpfs ]; do umount -R /sys/module || exit 1; done
    while findmnt -n --mountpoint /proc/config.gz >/dev/null; do umount /proc/config.gz || exit 1; done
    findmnt -rn -o TARGET | grep "^/run/k3strap-harness/" | sort -r | xargs -r umount -l
    rm -rf /run/k3strap-harness' || die "kernel unmask failed"
}
cmd_kernel_mask() {
  local i=$1 d f; shift; d=$(hdir "$i")
  [ $# -ge 1 ] || die "usage: kernel-mask i FEATURE..."
  for f in "$@"; do [[ $f =~ ^[A-Za-z0-9_]+$ ]] || die "bad feature name '$f'"; done
  printf '%s\n' "$@" > "$d/kmask"
  if running "$i"; then kmask_apply "$i"; fi
}
cmd_kernel_unmask() {
  local i=$1 d l; d=$(hdir "$i")
  rm -f "$d/kmask" "$d/kmask.config.gz"
  if l=$(leader "$i"); then kmask_clear "$l"; fi
  true
}

# ---------------------------------------------------------------- machine sysctls for a real K3s
# The kubelet writes these kernel sysctls unless they already hold its values, and /proc/sys is
# read-only inside a host: they are set on the machine while real-K3s tests run and put back
# afterwards. They are machine state, so their bookkeeping is too, whatever HARNESS_DIR is: the
# old values are saved once in $SYSCTL_DIR/saved, every holder (harness dir + instance) has a
# file in $SYSCTL_DIR/holders, and the last release (or down) restores the saved values.
K3S_SYSCTLS="vm.overcommit_memory=1 kernel.panic=10 kernel.panic_on_oops=1 fs.inotify.max_user_instances=8192"
SYSCTL_DIR=/run/k3strap-harness-sysctl
holder() { echo "$SD" | md5sum | cut -c1-16; }
sysctl_lock() { mkdir -p "$SYSCTL_DIR/holders"; exec 7>"$SYSCTL_DIR/.lock"; flock 7; }
cmd_sysctl_hold() {
  local kv k
  sysctl_lock
  # Saved once; a key an older harness did not hold is added to what it saved.
  touch "$SYSCTL_DIR/saved"
  for kv in $K3S_SYSCTLS; do
    k=${kv%%=*}
    grep -q "^$k=" "$SYSCTL_DIR/saved" || echo "$k=$(sysctl -n "$k")" >> "$SYSCTL_DIR/saved"
  done
  echo "$SD" > "$SYSCTL_DIR/holders/$(holder)"
  for kv in $K3S_SYSCTLS; do sysctl -q -w "$kv" >/dev/null; done
}
cmd_sysctl_release() {
  local kv
  [ -d "$SYSCTL_DIR" ] || return 0
  sysctl_lock
  rm -f "$SYSCTL_DIR/holders/$(holder)"
  [ -n "$(ls -A "$SYSCTL_DIR/holders" 2>/dev/null)" ] && return 0
  if [ -s "$SYSCTL_DIR/saved" ]; then
    while read -r kv; do [ -n "$kv" ] && sysctl -q -w "$kv" >/dev/null; done < "$SYSCTL_DIR/saved"
  fi
  rm -f "$SYSCTL_DIR/saved"
}

# ---------------------------------------------------------------- env, down, purge
cmd_env() {
  local i
  echo "HARNESS_DIR=$HD"
  echo "HARNESS_STATE_DIR=$SD"
  echo "HARNESS_KEY=$KEY"
  echo "HARNESS_SSH_CONFIG=$SD/ssh_config"
  echo "HARNESS_INSTANCE=$INST"
  echo "HARNESS_TOPOLOGY=$(topology)"
  echo "HARNESS_KIND=$(kind)"
  echo "HARNESS_N=$(count)"
  for i in $(indexes); do [ "$i" = 0 ] || echo "HARNESS_H$i=$(addr_of "$i")"; done
  [ "$(topology)" = bastion ] && echo "HARNESS_BASTION=$PUB.10"
  true
}

down_all() {   # caller holds the lock
  local d i n m
  if [ -d "$SD/hosts" ]; then
    for d in "$SD"/hosts/h*; do [ -d "$d" ] && { i=${d##*/h}; cmd_kill "$i" & }; done
    wait
  fi
  for d in "$(cg_path systemd)/$P"-h*; do [ -d "$d" ] && cg_kill "${d##*/}"; done
  # mounts: our overlays (and anything below them), deepest first
  findmnt -rn -o TARGET | { grep "^$SD/hosts/" || true; } | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
  for n in $(ls /run/netns 2>/dev/null | grep "^$P-"); do
    ip netns del "$n" 2>/dev/null || true
  done
  cg_remove_all
  for n in $(ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | grep "^$P"); do
    ip link del "$n" 2>/dev/null || true
  done
  nft delete table inet "$P" 2>/dev/null || true
  nft delete table inet "${P}up" 2>/dev/null || true
  # A host that is still exiting can keep its overlay busy for a moment: retry for ~10 s.
  local try
  for try in $(seq 1 50); do
    rm -rf "$SD/hosts" "$SD/state" 2>/dev/null && return 0
    findmnt -rn -o TARGET | { grep "^$SD/hosts/" || true; } | sort -r | while read -r m; do
      umount -l "$m" 2>/dev/null || true
    done
    sleep 0.2
  done
  rm -rf "$SD/hosts" "$SD/state"
}
cmd_down()  { with_lock; down_all; cmd_sysctl_release; }
cmd_purge() {   # only what the harness made; other files in $HD stay
  with_lock; down_all
  for k in $KINDS; do rm -rf "$(base_of "$k")" "$(base_of "$k").tmp" "$HD/debootstrap-$k.log"; done
  rm -rf "$HD/layer-cloudinit" "$HD/layer-cloudinit.tmp" "$KEY" "$KEY.pub" "$HD/pwuser.password" "$SD/ssh_config" \
         "$HD/debootstrap.log" "$SD/.script.lock" "$SD/.go-test.lock" "$HD/.base.lock"
  [ "$SD" = "$HD" ] || rmdir "$SD" 2>/dev/null || true
  rmdir "$HD" 2>/dev/null || true
}

# ---------------------------------------------------------------- main
c=${1:-}; shift || true
case $c in
  deps|base|up|env|down|purge) "cmd_$c" "$@" ;;
  sysctl-hold|sysctl-release) "cmd_${c//-/_}" ;;
  exec) cmd_exec "$@" ;;
  stop|start|kill|reset|cut|heal|regen-hostkey|kernel-unmask)
    [ $# -eq 1 ] || die "usage: $c i"; valid_index "$1"; "cmd_${c//-/_}" "$1" ;;
  kernel-mask) valid_index "${1:-}"; cmd_kernel_mask "$@" ;;
  loss|rate|mtu) [ $# -eq 2 ] || die "usage: $c i VALUE"; valid_index "$1"; "cmd_$c" "$1" "$2" ;;
  uplink) [ $# -eq 1 ] || die "usage: uplink i"; valid_index "$1"; cmd_uplink "$1" ;;
  ipv6) [ $# -eq 1 ] || die "usage: ipv6 i"; valid_index "$1"; with_lock; cmd_ipv6 "$1" ;;
  nft) [ $# -ge 2 ] || die "usage: nft i ARGS..."; valid_index "$1"; cmd_nft "$@" ;;
  cloudinit-layer) cmd_cloudinit_layer ;;
  firstboot) [ $# -eq 2 ] || die "usage: firstboot i SEEDDIR"; valid_index "$1"; cmd_firstboot "$1" "$2" ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 2 ;;
esac
