// Package cm holds the wire format of InfiniBand connection management as RoCEv2 carries
// it: the Management Datagram (MAD) header, the CM messages of IBTA chapter 12 (REQ, MRA,
// REJ, REP, RTU, DREQ, DREP, SIDR_REQ, SIDR_REP) and what the kernel's rdma_cm adds on top
// (the IP-based service IDs of the IBTA's "IP addressing annex" and the CMA header it puts
// first in a REQ's private data, naming the IP addresses and ports of the connection).
//
// CM MADs travel as UD SEND packets to the GSI QP (QPN 1) with a DETH carrying the GSI
// Q_Key (GSIQKey) and source QPN 1; the packet's payload is exactly one 256-byte MAD.
// roce.Packet decodes those packets; this package decodes their payload.
//
// Every type here is a view over bytes in the style of gVisor's header package: a
// []byte whose methods read and write fields in place, at the offsets the IBTA gives
// (bytes counted from the start of the MAD). Parse validates a MAD before any view is
// used; views assume the length Parse checked.
package cm
