# shellcheck shell=sh
# k3s certificate rotate (K3s stopped); its log's tail on failure.
log="$K3STRAP_DIR/certificate-rotate.log"
"$K3S_BIN" certificate rotate >/dev/null 2>"$log" || { tail -n 5 "$log" >&2; exit 1; }
