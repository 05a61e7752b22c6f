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

step "2. One frame as JSON (the RDMA WRITE First of write_bw)"
$R decode roce/testdata/rxe/write_bw.pcap | grep -m1 RC_RDMA_WRITE_FIRST

step "3. HPCC++ (draft algorithm) replayed over a telemetry trace: a queue builds and drains"
$R hpcc replay < hpcc/replay/testdata/trace.jsonl | awk 'NR%4==1'
