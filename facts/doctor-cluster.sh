# shellcheck shell=sh
# The cluster's view through the server's own `k3s kubectl`: nodes, pods, events, DaemonSets,
# Deployments, Jobs and HelmCharts of every namespace, each as one JSON line.
# ParseClusterView reads it.
for r in nodes pods events daemonsets deployments jobs helmcharts.helm.cattle.io; do
  echo "@$r"
  "$K3S_BIN" kubectl get "$r" -A -o json 2>&1 | tr -d '\n'; echo
done
echo "@end"
