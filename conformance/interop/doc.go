// Package interop checks rocelab's sample apps against the Linux kernel's Soft-RoCE
// (rdma_rxe) and rdma-core's and perftest's own tools, on the wire: a lab whose switch
// connects a soft-RNIC host to a QEMU VM running rxe (tools/rxe-peer, topology
// topologies/rxe-peer.yaml). Every case runs one side in the VM and the other in the
// lab host h1, both ways, over IPv4 and IPv6 GIDs, and checks the capture of the VM's
// port: every RoCEv2 frame decodes and verifies its ICRC with rocelab's decoder, and
// tshark dissects it without a malformed packet.
//
// It needs root, QEMU and the rxe-peer image; `make interop` provides them and runs it
// (`make test` does too when it runs as root).
package interop
