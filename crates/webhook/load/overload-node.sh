#!/bin/sh
# Overload as deployed: overload.sh's load (the realistic Pod, ?timeout=$TIMEOUT,
# wrk 4.1 closed-loop, overload.lua counting answers inside the deadline)
# sent to one replica of the installed Deployment, by its Pod address, from
# inside the test node's network namespace: the image, the kubelet's Pod,
# cluster mode with the typical set of make-load.py applied as CRs.
#
#   crates/webhook/load/overload-node.sh NODE_DIR [DURATION] [CONNECTIONS...]
#       (defaults: 15s, then 64 256 640: overload.sh's 1x, 4x, 10x)
#
# NODE_DIR is a running `tests/k8s/node up NODE_DIR IMAGE.tar` with the
# install applied (kubectl apply --server-side -k of an overlay with the
# image). Nothing is pinned: the replica, wrk and the node's own components
# share the machine's cores. Per point it prints wrk's output, the answers
# inside the deadline, the replica's shed and request counters (/metrics,
# cumulative over the points), its RSS (now, and the peak since it started),
# and its restart count.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
node=$(cd "${1:?usage: overload-node.sh NODE_DIR [DURATION] [CONNECTIONS...]}" && pwd)
shift
duration=${1:-15s}
[ $# -gt 0 ] && shift
connections=${*:-64 256 640}
timeout=${TIMEOUT:-1s}
command -v wrk >/dev/null || { echo "overload-node.sh: needs wrk (apt-get install wrk)" >&2; exit 2; }
bin=$("$root/tests/k8s/provision" | tail -n1)
kubectl() { "$bin/kubectl" --kubeconfig "$node/kubeconfig" "$@"; }
record=$(grep -l "^DIR=$node\$" /run/sartor-node/*.record 2>/dev/null | head -n1) ||
    { echo "overload-node.sh: no node runs in $node" >&2; exit 2; }
netns=$(sed -n 's/^ID=//p' "$record")
inside() { ip netns exec "$netns" "$@"; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 "$here/make-load.py" "$work" >/dev/null
kubectl apply -f "$work/typical/100.yaml" >/dev/null 2>&1
pod=$(kubectl get pods -n sartor-system -l app.kubernetes.io/name=sartor \
    -o jsonpath='{.items[0].metadata.name}')
ip=$(kubectl get pod "$pod" -n sartor-system -o jsonpath='{.status.podIP}')
metrics() { inside curl -s "http://$ip:8888/metrics"; }
# Every mutator of the set enforced by this replica before the first point.
for _ in $(seq 120); do
    enforced=$(metrics | sed -n 's/^sartor_mutators{kind="[A-Za-z]*",state="enforced"} //p' |
        awk '{n += $1} END {print n + 0}')
    [ "$enforced" -ge 100 ] && break
    sleep 0.5
done
# The replica's process on the host, by its POD_NAME.
pid=
for p in /proc/[0-9]*; do
    case "$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null)" in
        "/usr/local/bin/sartor serve"*)
            tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qx "POD_NAME=$pod" && pid=${p#/proc/} ;;
    esac
done
[ -n "$pid" ] || { echo "overload-node.sh: no process of $pod found" >&2; exit 1; }
deadline_ms=$(python3 -c "
import re, sys
units = {'ms': 1, 's': 1000, 'm': 60000}
print(sum(float(n) * units[u] for n, u in re.findall(r'([0-9.]+)(ms|s|m)', sys.argv[1])))" "$timeout")
echo "replica: $pod ($ip, pid $pid), $enforced mutators enforced; ?timeout=$timeout; $duration per point"
echo "image: $(kubectl get pod "$pod" -n sartor-system -o jsonpath='{.status.containerStatuses[0].imageID}')"
for c in $connections; do
    echo
    echo "== $c connections"
    REVIEW="$work/review.json" DEADLINE_MS=$deadline_ms inside wrk -t1 -c"$c" -d"$duration" \
        --timeout 5s --latency -s "$here/overload.lua" "https://$ip:8443/v1/mutate?timeout=$timeout"
    metrics | grep -E '^sartor_admission_(shed_total|requests_total\{endpoint="mutate")' || true
    echo "RSS peak / now: $(awk '/VmRSS|VmHWM/ {printf "%s %s ", $2, $3}' "/proc/$pid/status")"
    echo "restarts: $(kubectl get pod "$pod" -n sartor-system -o jsonpath='{.status.containerStatuses[0].restartCount}')"
done
