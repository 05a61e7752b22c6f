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
  $R experiment incast --senders 16 --cc "$cc" --out "out/incast-$cc"
done
