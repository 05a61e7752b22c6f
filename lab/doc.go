// Package lab is rocelab's lab runtime: it turns a topology (fabric/topo) into running
// nodes on one clock and, for `rocelab up`, gives them a kernel side in real time.
//
// Build makes a fabric.Switch per switch, an in-process link per topology link and an
// rnic.Device per host, with the topology's congestion control and telemetry; the
// virtual-time studies of package experiment build their networks with it too. Up adds
// what a lab needs on a real machine, in order: a state record that names the lab
// process before anything exists (package netns), a network namespace and TAP per
// host, the nodes on clock.Real's loops, a relay per host between its TAP and its
// soft-RNIC (Device, AddTAPHost), the verbs services inside the namespaces, and a
// control socket that answers `rocelab status`, `rocelab capture` and the samplers of
// `rocelab experiment --lab` (Query, Request, Reply, Status, Counters).
//
// docs/architecture.md ("The lab runtime") is the reference for the order of these
// steps, the relay's contract and the control protocol; docs/netns.md for the kernel
// side.
package lab
