// Package network builds a topology into running nodes on one clock: a fabric.Switch per
// switch, an in-process link per topology link and an rnic.Device per host, with their
// forwarding and neighbour tables and the congestion control and telemetry the topology
// asks for (Build, Options, Network).
//
// It needs no kernel: the lab runtime (package lab) wraps a Network in namespaces, TAPs,
// a control socket and metrics on a real-time clock, and the virtual-time experiments
// (package experiment) run one on a virtual clock, so that both run the same nodes and
// experiment links neither netlink nor namespaces, zap or prometheus.
package network
