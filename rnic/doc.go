// Package rnic is rocelab's soft-RNIC: the device a host's applications drive through
// verbs, and the node that attaches to a fabric link exactly like a switch port. It is
// the HPCC++ draft's Figure 4 (draft-miao-tsv-hpcc, "HPCC++ module"):
//
//	                 verbs (device.go, pd.go, mr.go, cq.go, srq.go, ah.go, qp.go)
//	                        |  post_send / post_recv          ^ completions, events
//	                        v                                 |
//	   +-------------+   +------------------------------------+---+
//	   | HPCC++ / CC | ->| scheduler: pacing at R, window W,    |   |
//	   |   (cc.go)   |   | RR or DWRR, responses first          |   |
//	   +------^------+   | (scheduler.go)                       |   |
//	          |          +--------------+-----------------------+   |
//	telemetry |                         v                           |
//	  (hops)  |          Tx pipeline (tx.go): frames from package qp, telemetry
//	          |          request header or probe, AckReq, ECN-capable marking
//	          |                         |
//	          |                         v              port (port.go): serializes at the
//	          |                      link.Endpoint <-- line rate, hands frames to the link
//	          |                         |
//	          |          Rx pipeline (rx.go): ARP/NDP (arp.go), decode, strip telemetry,
//	          +--------- verify ICRC, demux by DestQP to package qp, answer telemetry
//	                     requests (responses / echo in ACKs / Rx-HPCC window), CNPs
//
// Every method of a Device and of the objects it creates runs on the device's event loop
// (clock.Loop): from the loop's callbacks, or from setup code before the clock runs.
// Another goroutine (the verbs service serving other processes, a benchmark's
// application) hands work to the loop with Device.Do. The data path therefore takes no
// locks and, in steady state, allocates nothing.
//
// Congestion control is chosen per device (Config.CC) and may be overridden per QP
// (QPInitAttr.CC): HPCC++ sender-based with telemetry in every data packet, the
// reference RoCEv2 variant with one telemetry-request probe per RTT, receiver-based
// Rx-HPCC, telemetry on every Nth packet, DCQCN, or none. docs/rnic.md describes the
// modes, the scheduler and the experiments built on them (package experiment).
package rnic
