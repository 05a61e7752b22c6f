#!/bin/bash
# k8s-check: apply `rocelab k8s render`'s objects to a real API server, read them back as
# it stores them, check them, and delete them (docs/kubernetes.md, "Checked against a
# real API server"). Opt-in (`make k8s-check`), not part of `make test`: building
# kube-apiserver takes ~9 minutes on 2 shared cores the first time (cached after).
# Needs Debian's etcd-server and a kubectl; there is no kubelet, so pods stay Pending:
# this checks the objects, not the lab they would run.
set -euo pipefail
ROCELAB=${ROCELAB:-bin/rocelab}
WORK=${K8S_CHECK_DIR:-out/k8s-check}
K8S_VERSION=${K8S_VERSION:-v1.37.2}
STAGING_VERSION=v0${K8S_VERSION#v1}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
command -v etcd >/dev/null || { echo "k8s-check: etcd not found (apt-get install etcd-server)"; exit 1; }
command -v kubectl >/dev/null || { echo "k8s-check: kubectl not found"; exit 1; }

# kube-apiserver from the k8s.io/kubernetes module: its staging modules are replaced by
# their published versions, as a module outside the kubernetes tree must.
API="$WORK/kube-apiserver"
if [ ! -x "$API" ]; then
	mod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
	src="$WORK/build"
	mkdir -p "$src"
	{
		printf 'module k8scheck\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$K8S_VERSION"
		sed -n 's#^\t\(k8s.io/[^ ]*\) => ./staging/.*#\t\1 => \1 '"$STAGING_VERSION"'#p' "$mod"
		printf ')\n'
	} >"$src/go.mod"
	printf '//go:build tools\n\npackage k8scheck\n\nimport _ "k8s.io/kubernetes/cmd/kube-apiserver"\n' >"$src/tools.go"
	start=$(date +%s)
	(cd "$src" && go mod tidy && go build -p 1 -o "$API" k8s.io/kubernetes/cmd/kube-apiserver)
	echo "k8s-check: built kube-apiserver $K8S_VERSION in $(($(date +%s) - start)) s"
fi

D=$(mktemp -d)
pids=()
cleanup() {
	# Throwaway servers whose data goes with $D: the API server's graceful stop
	# waits minutes for its watches, which this check does not need.
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$D"
}
trap cleanup EXIT
# Ports of their own, so that the check never meets another etcd or API server.
ETCD_PORT=${ETCD_PORT:-23790}
API_PORT=${API_PORT:-16443}
TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
openssl genrsa -out "$D/sa.key" 2048 2>/dev/null
echo "$TOKEN,admin,admin,system:masters" >"$D/tokens.csv"
start=$(date +%s.%N)
etcd --data-dir "$D/etcd" --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
	--advertise-client-urls "http://127.0.0.1:$ETCD_PORT" --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 10))" \
	>"$D/etcd.log" 2>&1 &
pids+=($!)
"$API" --etcd-servers="http://127.0.0.1:$ETCD_PORT" --secure-port="$API_PORT" --bind-address=127.0.0.1 \
	--cert-dir="$D/certs" --service-account-issuer=https://kubernetes.default.svc \
	--service-account-key-file="$D/sa.key" --service-account-signing-key-file="$D/sa.key" \
	--token-auth-file="$D/tokens.csv" --authorization-mode=AlwaysAllow \
	--service-cluster-ip-range=10.96.0.0/16 >"$D/apiserver.log" 2>&1 &
pids+=($!)
K=(kubectl --server="https://127.0.0.1:$API_PORT" --token="$TOKEN" --insecure-skip-tls-verify)
# /readyz answers once etcd and the API server's post-start hooks are up.
timeout 120 bash -c 'until "${@:2}" get --raw /readyz >/dev/null 2>&1; do kill -0 "$1" || exit 1; sleep 0.2; done' _ "${pids[1]}" "${K[@]}" ||
	{ tail -20 "$D/apiserver.log"; echo "k8s-check: the API server did not become ready"; exit 1; }
echo "k8s-check: etcd and kube-apiserver ready in $(echo "$(date +%s.%N) - $start" | bc) s"

fail() { echo "k8s-check: FAIL: $*"; exit 1; }
# No controller manager runs: the service account it would make, pods need.
"${K[@]}" create serviceaccount default >/dev/null
"${K[@]}" create namespace rdma >/dev/null
"${K[@]}" -n rdma create serviceaccount default >/dev/null
"$ROCELAB" k8s render -f topologies/two-machines.yaml --name demo --namespace rdma \
	--node-for a=node-a -o "$D" >/dev/null
# --validate=strict: the server rejects any field its schema does not know.
"${K[@]}" apply --validate=strict -f "$D/demo.yaml"

get() { "${K[@]}" -n rdma get "$1" -o jsonpath="$2"; }
for m in a b; do
	other=b; [ $m = b ] && other=a
	args=$(get pod/demo-$m '{.spec.containers[0].args}')
	want='["up","-f","/etc/rocelab/topology/topology.yaml","--name","demo","--machine","'$m'","--peer","'$other'=demo-'$other'.demo.rdma.svc","--secret-file","/etc/rocelab/secret/lab-secret","--foreground"]'
	[ "$args" = "$want" ] || fail "pod demo-$m args $args, want $want"
	[ "$(get pod/demo-$m '{.spec.hostname}.{.spec.subdomain}')" = "demo-$m.demo" ] || fail "pod demo-$m hostname"
	[ "$(get pod/demo-$m '{.spec.containers[0].securityContext.capabilities.add}')" = '["NET_ADMIN","SYS_ADMIN","NET_RAW"]' ] || fail "pod demo-$m capabilities"
	[ "$(get pod/demo-$m '{.spec.volumes[?(@.name=="tun")].hostPath.type}')" = CharDevice ] || fail "pod demo-$m /dev/net/tun"
	[ "$(get pod/demo-$m '{.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey}')" = kubernetes.io/hostname ] || fail "pod demo-$m anti-affinity"
done
[ "$(get pod/demo-a '{.spec.nodeSelector.kubernetes\.io/hostname}')" = node-a ] || fail "--node-for a=node-a"
[ "$(get svc/demo '{.spec.clusterIP} {.spec.publishNotReadyAddresses} {.spec.ports[*].port}')" = "None true 4789 4790" ] || fail "headless service"
"${K[@]}" -n rdma get configmap demo-topology -o jsonpath='{.data.topology\.yaml}' >"$D/stored.yaml"
"$ROCELAB" k8s render -f "$D/stored.yaml" --name demo --namespace rdma -o - >/dev/null || fail "the stored topology does not parse"
grep -q 'address: demo-b.demo.rdma.svc' "$D/stored.yaml" || fail "stored topology addresses"
[ "$(get secret/demo-secret '{.data.lab-secret}' | base64 -d | wc -c)" = 64 ] || fail "lab secret"

"${K[@]}" delete -f "$D/demo.yaml"
left=$("${K[@]}" -n rdma get pods,services,configmaps,secrets -l rocelab.dev/lab=demo -o name)
[ -z "$left" ] || fail "left after kubectl delete: $left"
echo "k8s-check: PASS (kubectl $(kubectl version --client -o json | sed -n 's/.*"gitVersion": "\(.*\)".*/\1/p' | head -1), kube-apiserver $K8S_VERSION, etcd $(etcd --version | sed -n 's/etcd Version: //p'))"
