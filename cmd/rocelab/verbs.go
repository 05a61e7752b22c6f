package main

import (
	"github.com/rocelab/rocelab/lab"
	"github.com/rocelab/rocelab/network"
	"github.com/rocelab/rocelab/rnic/service"
)

// verbsServices starts a lab host's verbs service. The lab calls it on a thread inside
// the host's namespace, where the abstract socket it creates is scoped: apps that
// `rocelab exec` starts there find it through ROCELAB_LAB and ROCELAB_HOST.
func verbsServices(h *network.Host, l *lab.Lab) (lab.Closer, error) {
	return service.Listen(h.Device, service.Address(l.Name(), h.Name), service.WithBudget(l.VerbsBudget()))
}
