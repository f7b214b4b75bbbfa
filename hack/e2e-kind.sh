#!/usr/bin/env bash
# End to end on a real cluster (kind): what no test on our machines can show (no API server,
# no Docker there). NOT run by CI or by `pytest`; run it on a machine with Docker, kind >= 0.24,
# kubectl, helm (3.18+ or 4), jq, yq and curl:
#
#   hack/e2e-kind.sh            # create the cluster, build and load the image, run every check
#   KEEP=1 hack/e2e-kind.sh     # leave the cluster running afterwards
#
# Each check prints `PASS <name>` or `FAIL <name>: <why>`; the exit code is the number of failures.
set -uo pipefail
cd "$(dirname "$0")/.."

CLUSTER=${CLUSTER:-spark-autoscaler-e2e}
IMAGE=${IMAGE:-spark-autoscaler:0.1.0}
NS=analytics
SYS=spark-system
RELEASE=sa
failures=0

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; failures=$((failures + 1)); }
# wait_for NAME SECONDS COMMAND...: until COMMAND succeeds
wait_for() {
  local name=$1 seconds=$2; shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then fail "$name" "not within ${seconds}s"; return 1; fi
    sleep 3
  done
  pass "$name"
}
jsonpath() { kubectl -n "$NS" get ssapp rate -o "jsonpath=$1"; }

cleanup() { [ "${KEEP:-0}" = 1 ] || kind delete cluster --name "$CLUSTER" >/dev/null 2>&1; }
trap cleanup EXIT

# 1. a cluster whose CNI enforces NetworkPolicies (Calico), the prometheus-operator's CRDs
cat <<KIND | kind create cluster --name "$CLUSTER" --config - || exit 100
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking: {disableDefaultCNI: true, podSubnet: 192.168.0.0/16}
nodes: [{role: control-plane}, {role: worker}, {role: worker}]
KIND
kubectl apply -f https://raw.githubusercontent.com/projectcalico/calico/v3.28.2/manifests/calico.yaml
kubectl -n kube-system rollout status ds/calico-node --timeout=300s
kubectl apply --server-side -f https://github.com/prometheus-operator/prometheus-operator/releases/download/v0.77.1/stripped-down-crds.yaml

# 2. the image, built here and loaded into the nodes
docker build -f docker/Dockerfile -t "$IMAGE" . || exit 101
kind load docker-image "$IMAGE" --name "$CLUSTER"

# 3. an app namespace under the "restricted" Pod Security profile, with a CPU quota
kubectl create namespace "$NS"
kubectl label namespace "$NS" pod-security.kubernetes.io/enforce=restricted
kubectl -n "$NS" create quota cpu --hard=requests.cpu=6

# 4. the chart (Helm 3 and 4 render it alike: templates use Helm 3 functions only)
helm template "$RELEASE" helm/spark-autoscaler -n "$SYS" -f hack/e2e-values.yaml >/dev/null && pass helm-template || fail helm-template "render failed"
helm install "$RELEASE" helm/spark-autoscaler -n "$SYS" --create-namespace -f hack/e2e-values.yaml --wait --timeout 5m \
  && pass helm-install || fail helm-install "see above"
kubectl apply --dry-run=server -f <(helm template "$RELEASE" helm/spark-autoscaler -n "$SYS" -f hack/e2e-values.yaml \
  --set metrics.serviceMonitor.enabled=true --set metrics.prometheusRule.enabled=true | yq 'select(.kind == "ServiceMonitor" or .kind == "PrometheusRule")') \
  && pass monitors-accepted || fail monitors-accepted "the API server refused the ServiceMonitor or PrometheusRule"

# 5. the sample app: a ConfigMap pipeline with a Python UDF (file-loaded, pickled by value)
kubectl apply -f docs/examples/rate-source-app.yaml
wait_for app-ready 300 bash -c "[ \"\$(kubectl -n $NS get ssapp rate -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}')\" = True ]"
wait_for executors-running 180 bash -c "[ \"\$(kubectl -n $NS get ssapp rate -o jsonpath='{.status.executors.alive}')\" -ge 1 ]"
uid_before=$(kubectl -n "$NS" get pod rate-0 -o jsonpath='{.metadata.uid}')

# 6. a bound change is taken live: the daemon shows it, the pod is the same
kubectl -n "$NS" patch ssapp rate --type merge -p '{"spec":{"scaling":{"maxExecutors":3}}}'
kubectl -n "$NS" port-forward pod/rate-0 18090:8090 >/dev/null 2>&1 & pf=$!
sleep 3
wait_for live-bound-change 60 bash -c "curl -sf localhost:18090/api/v1/control | jq -e '.overrides.max_executors == 3'"
[ "$(kubectl -n "$NS" get pod rate-0 -o jsonpath='{.metadata.uid}')" = "$uid_before" ] && pass no-restart || fail no-restart "the pod was replaced"
curl -sf localhost:18090/api/v1/decisions?kind=operator | jq -e '.entries[0].who == "k8s-operator" and (.entries[0].details.note | test("generation"))' >/dev/null \
  && pass audited-with-generation || fail audited-with-generation "no k8s-operator entry with the generation"
kill $pf 2>/dev/null

# 7. more executors than the quota grants: not granted after requestTimeout, explained
kubectl -n "$NS" patch ssapp rate --type merge -p '{"spec":{"scaling":{"minExecutors":10,"maxExecutors":10,"requestTimeout":"1m"}}}'
wait_for not-granted-condition 300 bash -c "[ \"\$(kubectl -n $NS get ssapp rate -o jsonpath='{.status.conditions[?(@.type==\"ExecutorsGranted\")].status}')\" = False ]"
wait_for not-granted-event 120 bash -c "kubectl -n $NS get events --field-selector reason=ExecutorsNotGranted -o name | grep -q ."
kubectl -n "$NS" patch ssapp rate --type merge -p '{"spec":{"scaling":{"minExecutors":1,"maxExecutors":3,"requestTimeout":"5m"}}}'

# 8. an image change rolls the pod; the queries resume from their checkpoints
kubectl -n "$NS" patch ssapp rate --type merge -p '{"spec":{"imagePullPolicy":"IfNotPresent"}}'
wait_for rollout-started 60 bash -c "kubectl -n $NS get events --field-selector reason=RolloutStarted -o name | grep -q ."
wait_for rolled 300 bash -c "[ \"\$(kubectl -n $NS get pod rate-0 -o jsonpath='{.metadata.uid}')\" != $uid_before ] && [ \"\$(kubectl -n $NS get ssapp rate -o jsonpath='{.status.phase}')\" = Running ]"

# 9. least privilege: no Secrets for the operator, no Forbidden in the driver's log
[ "$(kubectl auth can-i --as=system:serviceaccount:$SYS:$RELEASE-spark-autoscaler-operator get secrets -n $NS)" = no ] \
  && pass operator-no-secrets || fail operator-no-secrets "the operator may read Secrets"
kubectl -n "$NS" logs rate-0 -c daemon | grep -q Forbidden && fail driver-rbac "the driver log has Forbidden" || pass driver-rbac

# 10. leader election: a second replica takes over when the leader goes
kubectl -n "$SYS" scale deploy "$RELEASE-spark-autoscaler-operator" --replicas=2
kubectl -n "$SYS" rollout status deploy "$RELEASE-spark-autoscaler-operator" --timeout=120s
leader=$(kubectl -n "$SYS" get lease "$RELEASE-spark-autoscaler-operator" -o jsonpath='{.spec.holderIdentity}')
kubectl -n "$SYS" delete pod "$leader" --wait=false
wait_for leader-failover 45 bash -c "h=\$(kubectl -n $SYS get lease $RELEASE-spark-autoscaler-operator -o jsonpath='{.spec.holderIdentity}'); [ -n \"\$h\" ] && [ \"\$h\" != $leader ]"

# 11. deleting the app deletes everything it owned (garbage collection, no finalizer)
kubectl -n "$NS" delete ssapp rate --wait=true --timeout=60s && pass delete-not-blocked || fail delete-not-blocked "the app's deletion hung"
wait_for children-collected 120 bash -c "[ -z \"\$(kubectl -n $NS get pods,sts,svc,cm -l app.kubernetes.io/instance=rate -o name)\" ]"

# 12. the CRD upgrade path the docs give
kubectl apply --server-side --force-conflicts -f helm/spark-autoscaler/crds/sparkstreamingapps.yaml && pass crd-upgrade || fail crd-upgrade "apply failed"

echo "failures: $failures"
exit "$failures"
