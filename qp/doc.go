// Package qp implements RDMA queue pairs: the QP state machine of ibv_modify_qp(3) and
// the RC, UC and UD transport engines of IBTA vol. 1 ch. 9–10, wire-compatible with the
// Linux kernel's Soft-RoCE (rxe), and XRC's two halves (annex A14): RC's requester and
// responder in the XRC opcode space, the responder's receive queue, CQ and memory those
// of the XRC SRQ each request names.
//
// A QP is a pure, deterministic state machine. It never starts goroutines, opens sockets
// or reads a clock: the caller (package rnic, or a test harness) drives it with events
// and time passed in as nanoseconds on any monotonic timeline:
//
//  1. Verbs: Modify (ibv_modify_qp), PostSend, PostRecv.
//  2. Received frames: Receive (a decoded, ICRC-checked packet) or ReceiveFrame.
//  3. Time: NextDeadline tells when the QP next needs OnTimer (retransmission and RNR
//     timers).
//  4. Transmission is pulled: the caller's scheduler asks NextResponse (ACKs, NAKs, read
//     responses, atomic ACKs — drain these first) and NextRequest (requests, gated by the
//     caller's congestion window against InFlightBytes and its pacer). Each call builds
//     one whole Ethernet frame into the caller's buffer without allocating.
//  5. Completions go to the CompletionQueue interfaces given in Config, as ibv_wc values.
//
// Inside, each QP has three engines, named as in IBTA and rxe:
//
//   - the requester (requester.go) turns send work requests into request packets,
//     segmenting by path MTU and assigning PSNs;
//   - the completer (completer.go) consumes ACKs, NAKs, read responses and atomic ACKs,
//     retires work requests in order, and runs go-back-N retransmission, the transport
//     timer and RNR back-off;
//   - the responder (responder.go) executes incoming requests against Memory and the
//     receive queue, detects duplicates and sequence errors, and queues responses.
//
// Memory (memory.go) and shared receive queues (recvqueue.go) are interfaces, so the
// rnic supplies real memory regions and SRQs while tests supply fakes. docs/transport.md
// describes the transport in prose, with the differences from rxe.
package qp
