#!/bin/bash
# run.sh SCENARIO TOOL [N] [TIMER]
#
#   SCENARIO  a  16:1 incast, 500 KB a sender, HPCC   (17-host star)
#             b  16:1 incast, 50 MB a sender, HPCC
#             c  320-host fat tree (simulation/mix/fat.txt), flows-fat.txt, HPCC
#             d  the same fat tree under DCQCN
#             a0 b0 c0 d0  like a b c d, with the simulator's queue-length
#                monitor switched off (QLEN_MON_START 5 s, after
#                SIMULATOR_STOP_TIME 4 s; see README). Same flows, same FCTs;
#                rocelab's counterparts are the same commands as a b c d.
#   TOOL      ns3      the single-binary simulator, $NS3_BIN (default out/third)
#             rocelab  $ROCELAB_BIN (default rocelab.bin, a frozen copy)
#   N         repetitions, one after another (default 1)
#   TIMER     time (default): /usr/bin/time -f '%e s wall %U user %S sys %M KB'
#             cpu: python3 cpu.py (rusage, 0.1 ms resolution)
#
# Environment:
#   NS3REF_SRC   the simulator's checkout (the directory holding simulation/); required
#   NS3REF_WORK  where runs/, results.tsv and flows-fat.txt go (default out/ns3ref)
#   NS3_BIN      the simulator (default $NS3REF_WORK/build/third, as build.sh makes it)
#   ROCELAB_BIN  rocelab (default the repository's bin/rocelab)
#
# Runs are NOT niced (they are the measurement). Each ns3 run writes its
# config/outputs under runs/<scenario>/; one result line per run is printed
# and appended to results.tsv:
#   utc-time scenario tool wall-s user-s sys-s cpu-s maxrss-KB flows-finished packets
# packets = data + ACK packets the simulator sends: sum over flows of
# ceil(size/1000) (PACKET_PAYLOAD_SIZE 1000), times 2 because the config's
# L2_ACK_INTERVAL 1 makes the receiver ACK every in-order data packet
# (rdma-hw.cc ReceiverCheckSeq: milestone = 1 byte). No losses (PFC, error
# rate 0), so no NACKs/retransmissions; CNPs ride on ACKs; PFC pauses and
# the qlen monitor are not packets.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
WORK=${NS3REF_WORK:-$REPO/out/ns3ref}
mkdir -p "$WORK"
SCEN=$1
TOOL=$2
BASE=${SCEN%0}   # a0 -> a
N=${3:-1}
TIMER=${4:-time}
NS3_BIN=${NS3_BIN:-$WORK/build/third}
ROCELAB_BIN=${ROCELAB_BIN:-$REPO/bin/rocelab}
SIMDIR=${NS3REF_SRC:?NS3REF_SRC: the simulator checkout (the directory holding simulation/)}/simulation
RUNDIR=$WORK/runs/$SCEN
# The fat tree's flows: WebSearch at 30 % for 5 ms among 320 hosts, as rocelab draws them.
FATFLOWS=$WORK/flows-fat.txt
[ -s "$FATFLOWS" ] || "$ROCELAB_BIN" experiment flows --cdf websearch --load 0.3 --duration 5ms --hosts 320 --seed 1 > "$FATFLOWS"
mkdir -p "$RUNDIR"

# --- input files for the simulator ---------------------------------------
star_topology() {  # 17 hosts (0-16) on one switch (17), 100 Gb/s, 1 us
    echo "18 1 17"
    echo "17"
    for i in $(seq 0 16); do echo "$i 17 100Gbps 0.001ms 0"; done
}
incast_flows() {   # hosts 0-15 -> host 16, priority 3, dport 100, at 2.0 s
    echo 16
    for i in $(seq 0 15); do echo "$i 16 3 100 $1 2"; done
}

case $BASE in
    a)    SIZE=500000;   CC=hp ;;
    b)    SIZE=50000000; CC=hp ;;
    c)    CC=hp ;;
    d)    CC=dcqcn ;;
    *) echo "unknown scenario $SCEN" >&2; exit 2 ;;
esac
case $BASE in
    a|b)    TOPO=$RUNDIR/topology.txt; FLOWS=$RUNDIR/flows.txt
            star_topology > "$TOPO"; incast_flows "$SIZE" > "$FLOWS" ;;
    c|d)    TOPO=$SIMDIR/mix/fat.txt; FLOWS=$FATFLOWS ;;
esac
# ENABLE_TRACE is 0, so the trace node list only has to exist; ids beyond
# the topology are skipped by third.cc.
TRACE=$SIMDIR/mix/trace.txt
CFG=$RUNDIR/config.txt
python3 "$HERE/mkconfig.py" "$SIMDIR/run.py" "$CC" "$TOPO" "$FLOWS" "$TRACE" "$RUNDIR" > "$CFG"
if [ "$SCEN" != "$BASE" ]; then
    sed -i 's/^QLEN_MON_START .*/QLEN_MON_START 5000000000/' "$CFG"
fi
PACKETS=$(awk 'NR>1{p+=int(($5+999)/1000)} END{print 2*p}' "$FLOWS")

# --- the command ------------------------------------------------------------
case $TOOL in
    ns3) CMD=("$NS3_BIN" "$CFG") ;;
    rocelab)
        case $BASE in
            a) CMD=("$ROCELAB_BIN" experiment incast --senders 16 --preset ns3 --json) ;;
            b) CMD=("$ROCELAB_BIN" experiment incast --senders 16 --flow-size 50MB --preset ns3 --json) ;;
            c) CMD=("$ROCELAB_BIN" experiment mix --preset ns3 --cc hpcc --topology-file "$SIMDIR/mix/fat.txt" --flows "$FATFLOWS" --json) ;;
            d) CMD=("$ROCELAB_BIN" experiment mix --preset ns3 --cc dcqcn --topology-file "$SIMDIR/mix/fat.txt" --flows "$FATFLOWS" --json) ;;
            *) echo "no rocelab counterpart for $SCEN" >&2; exit 2 ;;
        esac ;;
    *) echo "unknown tool $TOOL" >&2; exit 2 ;;
esac

cd "$RUNDIR"   # rocelab writes no files with --json; the simulator's go to $RUNDIR
for i in $(seq 1 "$N"); do
    [ "$TOOL" = ns3 ] && rm -f "$RUNDIR/fct.txt"
    T=$(date -u +%H:%M:%S)
    if [ "$TIMER" = cpu ]; then
        python3 "$HERE/cpu.py" 1 "${CMD[@]}" < /dev/null | while read -r line; do
            echo "$T $SCEN $TOOL cpu.py: $line"
            printf '%s\t%s\t%s\tcpu.py\t%s\n' "$T" "$SCEN" "$TOOL" "$line" >> "$WORK/results.tsv"
        done
        continue
    fi
    OUTF=$RUNDIR/stdout.txt; [ "$TOOL" = rocelab ] && OUTF=/dev/null   # as the reference commands
    /usr/bin/time -f '%e %U %S %M' -o "$RUNDIR/time.txt" "${CMD[@]}" > "$OUTF" 2> "$RUNDIR/stderr.txt" || {
        echo "$T $SCEN $TOOL FAILED, see $RUNDIR/stderr.txt" >&2; tail -3 "$RUNDIR/stderr.txt" >&2; continue; }
    read -r WALL USR SYS RSS < <(tail -1 "$RUNDIR/time.txt")
    CPU=$(echo "$USR $SYS" | awk '{printf "%.2f", $1+$2}')
    if [ "$TOOL" = ns3 ]; then
        FIN=$(wc -l < "$RUNDIR/fct.txt")
    else
        FIN=-   # rocelab's summary goes to /dev/null in the reference commands
    fi
    echo "$T $SCEN $TOOL: $WALL s wall $USR user $SYS sys = $CPU CPU-s, $RSS KB peak RSS, $FIN flows finished, $PACKETS data+ACK packets"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$T" "$SCEN" "$TOOL" "$WALL" "$USR" "$SYS" "$CPU" "$RSS" "$FIN" "$PACKETS" >> "$WORK/results.tsv"
done
