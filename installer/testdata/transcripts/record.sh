#!/usr/bin/env bash
# Records the host transcripts the installer's replay tests answer from (docs/development.md,
# "Host transcripts"): real commands of k3strap against three throw-away hosts of the harness
# running the K3s simulator, each scenario's exchanges written by the hidden
# --record-host-transcripts flag (secrets masked). Needs root and the harness's base image
# (`make setup`). Usage, from the repository root:
#   sudo bash installer/testdata/transcripts/record.sh [SCENARIO...]
# With SCENARIO names, only those are recorded (the others keep their transcripts byte for
# byte): a section of scenarios runs only when one of its scenarios is named, and in it the
# scenarios not named still run (the named ones need the state they leave) without recording.
# Environment: HARNESS_INSTANCE (default 1) and HARNESS_DIR as for e2e/harness/harness.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
out=$root/installer/testdata/transcripts
export HARNESS_INSTANCE=${HARNESS_INSTANCE:-1}
export HARNESS_DIR=${HARNESS_DIR:-/var/tmp/k3strap-e2e-$HARNESS_INSTANCE}
only=" $* "
# selected NAME: whether scenario NAME is to be recorded.
selected() { [ "$only" = "  " ] || [[ $only == *" $1 "* ]]; }
# section NAME...: whether any of the scenarios NAME is to be recorded.
section() {
  local s
  for s; do selected "$s" && return 0; done
  return 1
}
# Every scenario, by section (a name given that is none of them is refused before any host
# starts).
first=(sim-f1-preflight sim-f1-diagnosed sim-fresh-dryrun sim-1s2a sim-1s2a-rerun sim-drift-dryrun
  sim-drift-check sim-doctor-fix sim-drift-reconcile sim-doctor sim-conflict sim-rotate-certificates
  sim-rotate-token sim-preflight sim-kubeconfig sim-remove-node sim-reset)
suc=(sim-suc-stall sim-suc-watch)
cni=(sim-cni-flannel)
etcd=(sim-backup-to sim-backup-list sim-restore-missing sim-restore)
for name; do
  if [[ " ${first[*]} ${suc[*]} ${cni[*]} ${etcd[*]} " != *" $name "* ]]; then
    echo "record.sh: no scenario $name (the scenarios: ${first[*]} ${suc[*]} ${cni[*]} ${etcd[*]})" >&2
    exit 2
  fi
done
work=$(mktemp -d)
trap 'bash "$root/e2e/harness/harness.sh" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

bash "$root/e2e/harness/harness.sh" up 3 >/dev/null
eval "$(bash "$root/e2e/harness/harness.sh" env | sed 's/^/export /')"
(cd "$root" && go build -o "$work/k3strap" ./cmd/k3strap && make -s artifacts ARTIFACTS_DIR="$work/.artifacts" >/dev/null)

# inventory NAME W2_TIER [CONFIG_LINE]: the scenarios' inventory (the replay tests hold the
# same, see installer/replay_test.go replayCluster).
inventory() {
  cat > "$work/$1.yaml" <<YAML
apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: rec
spec:
  k3s:
    version: v1.36.3+k3s1
    install: airgap
    airgap:
      amd64:
        binary: .artifacts/k3s
        images: .artifacts/k3s-airgap-images-amd64.tar.zst
        checksums: .artifacts/sha256sum-amd64.txt
    config:
      disable: [traefik]
      kubelet-arg: [fail-cgroupv1=false${3:+, cloud-provider=external]
      disable-cloud-controller: true
      # (F1: docs/failure-modes.md)}${3:-]}
  ssh:
    user: root
    keyPath: $HARNESS_KEY
    knownHosts: $work/known_hosts
  hosts:
    - name: cp1
      address: $HARNESS_H1
      role: server
      labels: {topology.kubernetes.io/zone: lab}
    - name: w1
      address: $HARNESS_H2
      role: agent
      taints: ["dedicated=edge:NoSchedule"]
    - name: w2
      address: $HARNESS_H3
      role: agent
      labels: {tier: $2}
YAML
}
inventory cluster one
inventory drifted two
inventory f1 one f1

# record SCENARIO ARGS...: one k3strap run, its transcripts in $out/SCENARIO (exit code and the
# checksums of the artifacts it was recorded with kept); a scenario not selected runs unrecorded.
record() {
  local name=$1; shift
  if ! selected "$name"; then
    (cd "$work" && ./k3strap "$@" >"$work/$name.log" 2>&1) || true
    echo "$name: run, not recorded"
    return
  fi
  rm -rf "${out:?}/$name"
  local rc=0
  (cd "$work" && ./k3strap "$@" --record-host-transcripts "$out/$name" >"$work/$name.log" 2>&1) || rc=$?
  echo "$name: exit $rc"
  echo "$rc" > "$out/$name/exit"
  cp "$work/.artifacts/sha256sum-amd64.txt" "$out/$name/artifacts.sha256"
}
# run ARGS...: a k3strap run that sets a section's hosts up, never recorded (fails the script).
run() { (cd "$work" && ./k3strap "$@" >"$work/setup.log" 2>&1) || { cat "$work/setup.log"; exit 1; }; }
# sim CMD...: a command inside the first host (its K3s simulator's kubectl).
sim() { bash "$root/e2e/harness/harness.sh" exec 1 "$@"; }
if section "${first[@]}"; then
  # F1 (docs/failure-modes.md): refused by preflight, then diagnosed by the supervisor.
  record sim-f1-preflight preflight -f f1.yaml
  record sim-f1-diagnosed apply -f f1.yaml --ignore-preflight-errors=CloudController --stall-grace=5s --timeout=3m
  (cd "$work" && ./k3strap reset -f f1.yaml --yes >/dev/null)
  record sim-fresh-dryrun apply -f cluster.yaml --dry-run --kubeconfig-out rec.kubeconfig
  record sim-1s2a apply -f cluster.yaml --kubeconfig-out rec.kubeconfig
  record sim-1s2a-rerun apply -f cluster.yaml --kubeconfig-out rec.kubeconfig
  record sim-drift-dryrun apply -f drifted.yaml --dry-run --kubeconfig-out rec.kubeconfig
  record sim-drift-check check -f drifted.yaml
  record sim-doctor-fix doctor -f drifted.yaml --fix --yes --bundle bundle.tar.gz
  record sim-drift-reconcile apply -f drifted.yaml --reconcile-taints --kubeconfig-out rec.kubeconfig
  record sim-doctor doctor -f drifted.yaml
  # A label changed by hand (drift the config cannot repair), then a node written by someone else
  # between k3strap's read and its write: 409 Conflict, retried.
  bash "$root/e2e/harness/harness.sh" exec 1 sh -c '/usr/local/bin/k3s kubectl label node w2 tier=by-hand --overwrite >/dev/null && mkdir -p /etc/k3ssim && echo "conflictOnNextReplace: 1" >> /etc/k3ssim/sim.yaml'
  record sim-conflict apply -f drifted.yaml --reconcile-taints --kubeconfig-out rec.kubeconfig
  record sim-rotate-certificates rotate certificates -f cluster.yaml
  record sim-rotate-token rotate token -f cluster.yaml
  record sim-preflight preflight -f drifted.yaml
  record sim-kubeconfig kubeconfig -f drifted.yaml --kubeconfig-out rec2.kubeconfig
  record sim-remove-node remove-node -f drifted.yaml --yes w2
  record sim-reset reset -f drifted.yaml --yes
fi
# The upgrade through system-upgrade-controller (the simulator's stand-in, docs/upgrades.md):
# deployed and watched while w2 carries a taint set by hand that the Plans do not tolerate (the
# watch stalls, diagnosed), then, the taint gone, watched to the end.
sed 's/version: v1.36.3+k3s1/version: v1.36.4+k3s1/' "$work/cluster.yaml" > "$work/upgrade.yaml"
if section "${suc[@]}"; then
  run apply -f cluster.yaml --kubeconfig-out rec.kubeconfig
  sim /usr/local/bin/k3s kubectl taint node w2 by-hand=yes:NoSchedule >/dev/null
  record sim-suc-stall upgrade -f upgrade.yaml --via suc --stall-grace 5s
  sim /usr/local/bin/k3s kubectl taint node w2 by-hand- >/dev/null
  record sim-suc-watch upgrade -f upgrade.yaml --watch --stall-grace 20s
  run reset -f upgrade.yaml --yes
fi

# Standalone flannel (spec.cni, docs/networking.md): K3s without its flannel, the CNI rolled out
# by k3strap.
sed 's/^  ssh:$/  cni:\n    type: flannel-standalone\n  ssh:/' "$work/cluster.yaml" > "$work/cni.yaml"
if section "${cni[@]}"; then
  record sim-cni-flannel apply -f cni.yaml --kubeconfig-out rec.kubeconfig
  run reset -f cni.yaml --yes
fi

# Embedded etcd (two servers: cp1 and cp2 on the second host, w2 an agent): a snapshot copied to
# this machine (backup --to), the snapshots listed, a restore of a snapshot that does not exist,
# a change, the restore from the snapshot.
awk '/name: w1/{print "    - name: cp2"; getline; print; getline; print "      role: server"; getline; next} {print}' "$work/cluster.yaml" > "$work/ha.yaml"
if section "${etcd[@]}"; then
  run apply -f ha.yaml --kubeconfig-out rec.kubeconfig
  record sim-backup-to backup -f ha.yaml --name before --to backups
  record sim-backup-list backup list -f ha.yaml
  # A snapshot that is nowhere: refused before any server is stopped.
  record sim-restore-missing restore -f ha.yaml --snapshot nosuch --yes
  sim /usr/local/bin/k3s kubectl create namespace after-backup >/dev/null
  record sim-restore restore -f ha.yaml --snapshot before --yes
  run reset -f ha.yaml --yes
fi

if [ "$only" = "  " ]; then
  # The artifacts' checksums: the replay tests stand small files in for them and move the
  # hosts' recorded checksums of the real ones to the stand-ins' (a scenario's own
  # artifacts.sha256 first).
  cp "$work/.artifacts/sha256sum-amd64.txt" "$out/artifacts.sha256"
fi
