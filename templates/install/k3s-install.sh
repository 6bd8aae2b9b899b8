#!/bin/sh
# k3s-install.sh — k3strap's installer for K3s.
#
# Written for k3strap. It follows the environment interface of the official K3s install script
# (https://get.k3s.io, see docs/k3s.md) so that the same variables mean the same things:
#   INSTALL_K3S_EXEC           "server ..." or "agent ..." (default server; agent when K3S_URL is set)
#   INSTALL_K3S_VERSION        release to download (online), e.g. v1.36.3+k3s1
#   INSTALL_K3S_CHANNEL        channel to resolve when no version is given (default stable)
#   INSTALL_K3S_SKIP_DOWNLOAD  true: the binary is already at $INSTALL_K3S_BIN_DIR/k3s (airgap)
#   INSTALL_K3S_SKIP_START     true: do not start or restart the service
#   INSTALL_K3S_SKIP_ENABLE    true: do not enable (nor daemon-reload, nor start) the service
#   INSTALL_K3S_FORCE_RESTART  true: restart even when nothing changed
#   INSTALL_K3S_BIN_DIR        default /usr/local/bin
#   INSTALL_K3S_SYSTEMD_DIR    default /etc/systemd/system
#   INSTALL_K3S_SYMLINK        skip | force (kubectl, crictl, ctr -> k3s)
#   GITHUB_URL                 where releases are downloaded from (default https://github.com/k3s-io/k3s/releases)
#   K3S_* CONTAINERD_* and proxy variables are written to the service's env file (mode 0600).
# It writes the systemd unit (Type=notify) or OpenRC script, the env file, k3s-killall.sh and the
# uninstall script, and restarts the service only when the binary, unit or env file changed.
set -e
set -o noglob

info()  { echo "[INFO]  $*"; }
fatal() { echo "[ERROR] $*" >&2; exit 1; }

BIN_DIR=${INSTALL_K3S_BIN_DIR:-/usr/local/bin}
SYSTEMD_DIR=${INSTALL_K3S_SYSTEMD_DIR:-/etc/systemd/system}
GITHUB_URL=${GITHUB_URL:-https://github.com/k3s-io/k3s/releases}
UPDATE_URL=https://update.k3s.io/v1-release/channels

[ "$(id -u)" -eq 0 ] || fatal "run as root"

# --- init system ---
if [ -x /sbin/openrc-run ]; then
    HAS_OPENRC=true
elif [ -d /run/systemd/system ] || command -v systemctl >/dev/null 2>&1; then
    HAS_SYSTEMD=true
else
    fatal "can not find systemd or openrc to use as a process supervisor for k3s"
fi

# --- command and service name ---
# shellcheck disable=SC2086 # word splitting of INSTALL_K3S_EXEC is intended (noglob is on)
set -- ${INSTALL_K3S_EXEC}
case "$1" in
    server|agent) CMD_K3S=$1; shift ;;
    *) if [ -n "${K3S_URL}" ]; then CMD_K3S=agent; else CMD_K3S=server; fi ;;
esac
if [ "${CMD_K3S}" = server ]; then SYSTEM_NAME=k3s; else SYSTEM_NAME=k3s-agent; fi
FILE_SERVICE=${SYSTEMD_DIR}/${SYSTEM_NAME}.service
FILE_ENV=${SYSTEMD_DIR}/${SYSTEM_NAME}.service.env
FILE_OPENRC=/etc/init.d/${SYSTEM_NAME}
KILLALL_SH=${BIN_DIR}/k3s-killall.sh
UNINSTALL_SH=${BIN_DIR}/${SYSTEM_NAME}-uninstall.sh

# ExecStart arguments, one per line, double-quoted with C-style escapes as systemd reads them.
exec_args() {
    printf '%s' "    ${CMD_K3S}"
    for a in "$@"; do
        printf ' \\\n    "%s"' "$(printf '%s' "$a" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g')"
    done
    printf '\n'
}
EXEC_ARGS=$(exec_args "$@")

# --- architecture ---
case "$(uname -m)" in
    amd64|x86_64) ARCH=amd64; SUFFIX= ;;
    arm64|aarch64) ARCH=arm64; SUFFIX=-arm64 ;;
    arm*) ARCH=arm; SUFFIX=-armhf ;;
    s390x) ARCH=s390x; SUFFIX=-s390x ;;
    *) fatal "unsupported architecture $(uname -m)" ;;
esac

# The hashes decide whether to restart; with INSTALL_K3S_SKIP_START nothing is restarted, so
# the binary (tens of MB) is not read twice for nothing.
installed_hashes() {
    [ "${INSTALL_K3S_SKIP_START}" = true ] && return 0
    for f in "${BIN_DIR}/k3s" "${FILE_SERVICE}" "${FILE_ENV}" "${FILE_OPENRC}"; do
        [ -f "$f" ] && sha256sum "$f"
    done 2>/dev/null || true
}
PRE_HASHES=$(installed_hashes)

# --- binary ---
download() { # url dest
    if command -v curl >/dev/null 2>&1; then
        curl -fsSL -o "$2" "$1"
    elif command -v wget >/dev/null 2>&1; then
        wget -qO "$2" "$1"
    else
        fatal "neither curl nor wget found to download $1"
    fi
}
if [ "${INSTALL_K3S_SKIP_DOWNLOAD}" = true ]; then
    info "Skipping k3s download and verify"
    [ -x "${BIN_DIR}/k3s" ] || fatal "executable k3s binary not found at ${BIN_DIR}/k3s"
else
    VERSION=${INSTALL_K3S_VERSION}
    if [ -z "${VERSION}" ]; then
        CHANNEL=${INSTALL_K3S_CHANNEL:-stable}
        command -v curl >/dev/null 2>&1 || fatal "curl is needed to resolve channel ${CHANNEL}"
        VERSION=$(curl -fsS -o /dev/null -w '%{url_effective}' -L "${UPDATE_URL}/${CHANNEL}" | sed -e 's|.*/||')
        [ -n "${VERSION}" ] || fatal "could not resolve K3s channel ${CHANNEL}"
    fi
    info "Using ${VERSION} as release"
    URL_VERSION=$(printf '%s' "${VERSION}" | sed 's/+/%2B/g')
    TMP=$(mktemp -d)
    trap 'rm -rf "${TMP}"' EXIT
    download "${GITHUB_URL}/download/${URL_VERSION}/sha256sum-${ARCH}.txt" "${TMP}/sums"
    download "${GITHUB_URL}/download/${URL_VERSION}/k3s${SUFFIX}" "${TMP}/k3s"
    WANT=$(grep -E " k3s${SUFFIX}\$" "${TMP}/sums" | awk '{print $1}')
    GOT=$(sha256sum "${TMP}/k3s" | awk '{print $1}')
    [ -n "${WANT}" ] && [ "${WANT}" = "${GOT}" ] || fatal "download sha256 ${GOT} does not match ${WANT}"
    chmod 0755 "${TMP}/k3s"
    mv -f "${TMP}/k3s" "${BIN_DIR}/k3s"
fi

# --- symlinks ---
for cmd in kubectl crictl ctr; do
    [ "${INSTALL_K3S_SYMLINK}" = skip ] && break
    if [ ! -e "${BIN_DIR}/${cmd}" ] || [ "${INSTALL_K3S_SYMLINK}" = force ]; then
        if [ "${INSTALL_K3S_SYMLINK}" = force ] || ! command -v "${cmd}" >/dev/null 2>&1; then
            ln -sf k3s "${BIN_DIR}/${cmd}"
        fi
    fi
done

# --- killall script ---
cat > "${KILLALL_SH}.tmp" <<'KILLALL'
#!/bin/sh
# Stops K3s and everything it started. Written by k3strap's k3s-install.sh.
[ "$(id -u)" -eq 0 ] || exec sudo "$0" "$@"
for service in /etc/systemd/system/k3s*.service; do
    [ -s "$service" ] && systemctl stop "$(basename "$service")"
done
for service in /etc/init.d/k3s*; do
    [ -x "$service" ] && "$service" stop
done
# K3s itself and the container shims it started (never this script or its callers, whose
# command lines may mention the k3s paths too).
for p in $(pgrep -f '^(/usr/local/bin/)?k3s (server|agent)|containerd-shim' 2>/dev/null); do
    [ "$p" != "$$" ] && kill -9 "$p" 2>/dev/null
done
for m in $(awk '$2 ~ "^/run/k3s|^/var/lib/rancher/k3s|^/var/lib/kubelet|^/run/netns/cni-" {print $2}' /proc/self/mounts | sort -r); do
    umount "$m" 2>/dev/null
done
for i in cni0 flannel.1 flannel-v6.1 flannel-wg flannel-wg-v6 kube-ipvs0; do
    ip link delete "$i" 2>/dev/null
done
rm -rf /var/lib/cni/ /run/flannel
if command -v iptables-save >/dev/null 2>&1; then
    iptables-save | grep -v KUBE- | grep -v CNI- | grep -iv flannel | iptables-restore
fi
exit 0
KILLALL
chmod 0755 "${KILLALL_SH}.tmp"
mv -f "${KILLALL_SH}.tmp" "${KILLALL_SH}"

# --- uninstall script ---
cat > "${UNINSTALL_SH}.tmp" <<UNINSTALL
#!/bin/sh
# Removes ${SYSTEM_NAME} and its data. Written by k3strap's k3s-install.sh.
[ "\$(id -u)" -eq 0 ] || exec sudo "\$0" "\$@"
${KILLALL_SH}
if command -v systemctl >/dev/null 2>&1; then
    systemctl disable ${SYSTEM_NAME} 2>/dev/null
    systemctl reset-failed ${SYSTEM_NAME} 2>/dev/null
fi
command -v rc-update >/dev/null 2>&1 && rc-update delete ${SYSTEM_NAME} default
rm -f ${FILE_SERVICE} ${FILE_ENV} ${FILE_OPENRC}
command -v systemctl >/dev/null 2>&1 && systemctl daemon-reload
rm -f ${UNINSTALL_SH}
if ls /etc/systemd/system/k3s*.service /etc/init.d/k3s* >/dev/null 2>&1; then
    echo "Additional k3s services installed, keeping the binary and data"
    exit 0
fi
for cmd in kubectl crictl ctr; do
    [ -L ${BIN_DIR}/\$cmd ] && rm -f ${BIN_DIR}/\$cmd
done
rm -rf /etc/rancher/k3s /run/k3s /run/flannel /var/lib/rancher/k3s /var/lib/kubelet
rm -f ${BIN_DIR}/k3s ${KILLALL_SH}
exit 0
UNINSTALL
chmod 0755 "${UNINSTALL_SH}.tmp"
mv -f "${UNINSTALL_SH}.tmp" "${UNINSTALL_SH}"

# --- env file (0600: it may hold K3S_TOKEN) ---
umask 077
{
    env | grep -E '^(K3S|CONTAINERD)_[A-Z0-9_]*=' || true
    for v in HTTP_PROXY HTTPS_PROXY NO_PROXY http_proxy https_proxy no_proxy; do
        eval "val=\${$v}"
        [ -n "${val}" ] && echo "${v}=${val}"
    done
} > "${FILE_ENV}.tmp"
chmod 0600 "${FILE_ENV}.tmp"
mv -f "${FILE_ENV}.tmp" "${FILE_ENV}"
umask 022

# --- service ---
if [ "${HAS_SYSTEMD}" = true ]; then
    cat > "${FILE_SERVICE}.tmp" <<SERVICE
[Unit]
Description=Lightweight Kubernetes
Documentation=https://k3s.io
Wants=network-online.target
After=network-online.target

[Install]
WantedBy=multi-user.target

[Service]
Type=notify
EnvironmentFile=-/etc/default/%N
EnvironmentFile=-/etc/sysconfig/%N
EnvironmentFile=-${FILE_ENV}
KillMode=process
Delegate=yes
User=root
LimitNOFILE=1048576
LimitNPROC=infinity
LimitCORE=infinity
TasksMax=infinity
TimeoutStartSec=0
Restart=always
RestartSec=5s
ExecStartPre=-/sbin/modprobe br_netfilter
ExecStartPre=-/sbin/modprobe overlay
ExecStart=${BIN_DIR}/k3s \\
${EXEC_ARGS}
SERVICE
    chmod 0644 "${FILE_SERVICE}.tmp"
    mv -f "${FILE_SERVICE}.tmp" "${FILE_SERVICE}"
else
    cat > "${FILE_OPENRC}.tmp" <<OPENRC
#!/sbin/openrc-run
depend() {
    after network-online
    want cgroups
}
start_pre() {
    rm -f /tmp/k3s.*
}
supervisor=supervise-daemon
name=${SYSTEM_NAME}
command="${BIN_DIR}/k3s"
command_args="$(printf '%s' "${EXEC_ARGS}" | tr -d '\\\n' | sed 's/  */ /g') >>/var/log/${SYSTEM_NAME}.log 2>&1"
output_log=/var/log/${SYSTEM_NAME}.log
error_log=/var/log/${SYSTEM_NAME}.log
pidfile="/var/run/${SYSTEM_NAME}.pid"
respawn_delay=5
respawn_max=0
set -o allexport
if [ -f /etc/environment ]; then . /etc/environment; fi
if [ -f ${FILE_ENV} ]; then . ${FILE_ENV}; fi
set +o allexport
OPENRC
    chmod 0755 "${FILE_OPENRC}.tmp"
    mv -f "${FILE_OPENRC}.tmp" "${FILE_OPENRC}"
fi

POST_HASHES=$(installed_hashes)

# As the official script: INSTALL_K3S_SKIP_ENABLE skips enabling, the daemon-reload and the
# start (the caller reloads and starts).
if [ "${INSTALL_K3S_SKIP_ENABLE}" = true ]; then
    info "Skipping service enable and start (INSTALL_K3S_SKIP_ENABLE)"
    exit 0
fi
if [ "${HAS_SYSTEMD}" = true ]; then
    systemctl enable "${SYSTEM_NAME}" >/dev/null 2>&1
    systemctl daemon-reload >/dev/null
else
    rc-update add "${SYSTEM_NAME}" default >/dev/null
fi
if [ "${INSTALL_K3S_SKIP_START}" = true ]; then
    info "Skipping service start (INSTALL_K3S_SKIP_START)"
    exit 0
fi
if [ "${PRE_HASHES}" = "${POST_HASHES}" ] && [ "${INSTALL_K3S_FORCE_RESTART}" != true ]; then
    info "No change detected so skipping service start"
    exit 0
fi
info "Starting ${SYSTEM_NAME}"
if [ "${HAS_SYSTEMD}" = true ]; then
    systemctl restart "${SYSTEM_NAME}"
else
    "${FILE_OPENRC}" restart
fi
