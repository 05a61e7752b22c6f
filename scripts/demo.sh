#!/usr/bin/env bash
# make demo: rocelab's main job, end to end. Each step prints what it shows.
set -euo pipefail
cd "$(dirname "$0")/.."
R=bin/rocelab
step() { printf '\n== %s\n' "$*"; }

step "1. The Linux kernel's Soft-RoCE on the wire, decoded by rocelab (ICRC verified on every packet)"
for f in write_bw read_bw atomic_bw ud_pingpong; do
  echo "-- roce/testdata/rxe/$f.pcap"
  $R decode --summary "roce/testdata/rxe/$f.pcap"
done

mkdir -p out
step "2. One frame as JSON (the RDMA WRITE First of write_bw; all frames in out/write_bw.jsonl)"
$R decode roce/testdata/rxe/write_bw.pcap > out/write_bw.jsonl
grep -m1 RC_RDMA_WRITE_FIRST out/write_bw.jsonl

step "3. HPCC++ (draft algorithm) replayed over a telemetry trace: a queue builds and drains"
$R hpcc replay < hpcc/replay/testdata/trace.jsonl > out/hpcc-replay.jsonl
awk 'NR%4==1' out/hpcc-replay.jsonl

step "4. Conformance suites: RoCEv2 wire format, INT-MD, IOAM, IFA, HPCC hop, telemetry probes"
$R conformance --junit out/conformance.xml > out/conformance.txt
tail -1 out/conformance.txt

step "5. HPCC++ vs DCQCN: a 16:1 incast through one 100 Gb/s switch, in virtual time"
for cc in hpcc dcqcn; do
  echo "-- --cc $cc (plots and CSV in out/incast-$cc)"
  $R experiment incast --senders 16 --cc "$cc" --plots --out "out/incast-$cc"
done

if [ "$(id -u)" != 0 ]; then
  step "6. A namespaced lab needs root (namespaces, TAPs): skipped. Everything above ran in virtual time in-process; sudo make demo adds the lab."
  exit 0
fi

step "6. A lab: two hosts in network namespaces, a Go switch, a soft-RNIC per host (real time)"
trap '$R down demo >/dev/null 2>&1 || true' EXIT
$R up -f topologies/two-hosts.yaml --name demo
$R status --lab demo
$R capture --lab demo s1:p1 -w out/demo-s1p1.pcapng --duration 12s &
CAP=$!
sleep 0.5

step "7. rdma-core's rc_pingpong exchange between h1 and h2 through the verbs services"
$R exec --lab demo -d h1 -- rc_pingpong -g 1 -n 500
$R exec --lab demo h2 -- rc_pingpong -g 1 -n 500 10.0.0.1

step "8. write_bw (perftest's ib_write_bw) between the two hosts (64 KiB messages)"
$R exec --lab demo -d h1 -- write_bw -x 1 -s 65536 -n 2000 --report_gbits >/dev/null
$R exec --lab demo h2 -- write_bw -x 1 -s 65536 -n 2000 --report_gbits 10.0.0.1 | tail -4

wait $CAP
step "9. What crossed switch port s1:p1 (towards h2; the capture printed how many frames it wrote and dropped), decoded: every RoCEv2 frame's ICRC verified"
$R decode --summary out/demo-s1p1.pcapng
$R down demo

step "10. HPCC++ closing its loop in a 1 Gb/s lab (h1, h2 -> h3, real write_bw processes), next to its virtual-time twin from the same topology file"
trap '$R down twin >/dev/null 2>&1 || true' EXIT
$R up -f topologies/incast-1g.yaml --name twin >/dev/null
$R experiment incast --lab twin --flow-size 4MiB --out out/twin-lab | grep -E "bottleneck|goodput"
$R experiment incast --topology-file topologies/incast-1g.yaml --flow-size 4MiB --out out/twin-virtual >/dev/null
$R experiment compare out/twin-virtual out/twin-lab | sed -n '/^metric/,/^jain/p'
$R down twin
trap - EXIT
