package netns

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"go.uber.org/zap"
)

// Down removes lab: it stops the lab process (unless that is the caller) and every
// other process of the lab, deletes the devices and namespaces the state file lists,
// its sockets, and last the state directory. It keeps going past failures, so one stuck
// object does not keep the rest alive, and returns them joined; the state directory
// then stays, so that a later Down or Clean can finish the job.
//
// The lab process must exit on SIGTERM without calling Down itself: Down holds the
// lab's lock while it waits for the process. A lab process that removes its own lab
// closes its TAPs first: an open TAP keeps its namespace alive, unnamed, until closed.
func (c *Cleaner) Down(lab string) (Report, error) { return c.down(lab, false) }

// down is Down; with onlyCrashed it removes the lab only if, under the lab's lock, its
// process is still found dead (a lab recreated under the same name is left alone).
func (c *Cleaner) down(lab string, onlyCrashed bool) (Report, error) {
	var rep Report
	unlock, err := c.Store.lock(lab)
	if err != nil {
		return rep, err
	}
	defer unlock()
	l, err := c.Store.Load(lab)
	if err != nil {
		return rep, err
	}
	if onlyCrashed && l.Running() {
		rep.Running = append(rep.Running, lab)
		return rep, nil
	}
	if onlyCrashed {
		// Processes inside a crashed lab's namespaces are its own (apps it ran);
		// a live process outside that holds one is not: the name is another lab's.
		held := false
		for _, h := range l.Hosts {
			_, outside, err := holders(h.Netns)
			if err != nil {
				return rep, err
			}
			if len(outside) > 0 {
				rep.InUse = append(rep.InUse, InUse{Netns: h.Netns, Lab: lab, Procs: outside})
				held = true
			}
		}
		if held {
			c.log().Warn("crashed lab's namespaces in use by live processes, left alone", zap.String("lab", lab))
			return rep, nil
		}
	}
	err = c.remove(l, &rep)
	return rep, err
}

// labRemoval is one lab being removed: what was done and what failed.
type labRemoval struct {
	*Cleaner
	lab  *Lab
	rep  *Report
	log  *zap.Logger
	errs []error
}

func (c *Cleaner) remove(l *Lab, rep *Report) error {
	r := &labRemoval{Cleaner: c, lab: l, rep: rep, log: c.log().With(zap.String("lab", l.Name))}

	// 1. Processes first: they hold namespaces, TAPs and sockets open.
	r.stopAll(r.processes())
	// 2. Devices outside the hosts' namespaces, then the namespaces with theirs inside.
	for _, d := range l.Devices {
		r.object("device", d.Name, d.Name, func(dryRun bool) error { return deleteDevice(d, dryRun) })
	}
	for _, h := range l.Hosts {
		mnt, _ := ViewPaths(h.Netns)
		r.object("host view", mnt, h.Netns, func(dryRun bool) error {
			if dryRun {
				_, err := os.Stat(mnt)
				return err
			}
			return removeViewPins(h.Netns)
		})
		r.object("namespace", h.Netns, h.Netns, func(dryRun bool) error {
			if dryRun {
				_, err := os.Stat(NamespacePath(h.Netns))
				return err
			}
			return DeleteNamespace(h.Netns)
		})
	}
	for _, s := range l.Sockets {
		r.object("socket", s, "", func(dryRun bool) error { return removeSocket(s, dryRun) })
	}
	if len(r.errs) > 0 {
		return errors.Join(r.errs...)
	}
	// 3. The record goes last: while anything is left, it says what.
	dir := c.Store.Dir(l.Name)
	r.object("state", dir, "", func(dryRun bool) error {
		if dryRun {
			return nil
		}
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("netns: remove lab %s state: %w", l.Name, err)
		}
		c.Store.unregisterIfEmpty()
		return nil
	})
	return errors.Join(r.errs...)
}

// object removes one object with del, which in a dry run only checks that it exists.
// A named object must carry rocelab's prefix (the second half of the tag, after the
// record); an object already gone was not removed now and is not reported.
func (r *labRemoval) object(kind, name, prefixed string, del func(dryRun bool) error) {
	if prefixed != "" && !strings.HasPrefix(prefixed, Prefix) {
		r.failed(kind, name, fmt.Errorf("netns: remove %s %s: no %q prefix, not rocelab's", kind, name, Prefix))
		return
	}
	err := del(r.DryRun)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		r.failed(kind, name, err)
	default:
		r.removed(kind, name)
	}
}

// processes lists the lab's live processes: the lab process, the recorded ones and
// any process inside the lab's namespaces, each once, never the caller.
func (r *labRemoval) processes() []Process {
	self := os.Getpid()
	seen := map[int]bool{self: true}
	var procs []Process
	add := func(p Process) {
		if !seen[p.PID] && p.Alive() {
			seen[p.PID] = true
			procs = append(procs, p)
		}
	}
	add(r.lab.Owner)
	for _, p := range r.lab.Processes {
		add(p)
	}
	for _, h := range r.lab.Hosts {
		if !strings.HasPrefix(h.Netns, Prefix) {
			continue // not ours: neither is what runs in it
		}
		inside, err := processesIn(h.Netns)
		if err != nil {
			r.failed("process", "in "+h.Netns, err)
		}
		for _, p := range inside {
			add(p)
		}
	}
	return procs
}

// stopAll stops procs in parallel, so that N processes ignoring SIGTERM cost one
// grace period, not N, and reports them in order.
func (r *labRemoval) stopAll(procs []Process) {
	type result struct {
		signalled bool
		err       error
	}
	results := make([]result, len(procs))
	if !r.DryRun {
		var wg sync.WaitGroup
		for i, p := range procs {
			wg.Go(func() {
				results[i].signalled, results[i].err = terminate(p, r.grace(), killWait+time.Duration(len(r.lab.Hosts))*killWaitPerHost)
			})
		}
		wg.Wait()
	}
	for i, p := range procs {
		switch res := results[i]; {
		case res.err != nil:
			r.failed("process", p.String(), res.err)
		case res.signalled || r.DryRun:
			r.removed("process", p.String())
		}
	}
}

func (r *labRemoval) removed(kind, name string) {
	r.log.Info("removed", zap.String("kind", kind), zap.String("name", name), zap.Bool("dry_run", r.DryRun))
	r.rep.Removed = append(r.rep.Removed, Removal{Lab: r.lab.Name, Kind: kind, Name: name})
}

func (r *labRemoval) failed(kind, name string, err error) {
	r.log.Warn("remove failed", zap.String("kind", kind), zap.String("name", name), zap.Error(err))
	r.errs = append(r.errs, err)
}

// deleteDevice deletes netdev d (in a dry run, only looks it up). A missing device or
// namespace is an error wrapping [os.ErrNotExist].
func deleteDevice(d Device, dryRun bool) error {
	h := &netlink.Handle{}
	if d.Netns != "" {
		if _, err := os.Stat(NamespacePath(d.Netns)); err != nil {
			return os.ErrNotExist // the namespace, and every device in it, is gone
		}
		nh, err := openNetlink(d.Netns)
		if err != nil {
			return fmt.Errorf("netns: delete device %s in %s: %w", d.Name, d.Netns, err)
		}
		defer nh.Close()
		h = nh
	}
	link, err := h.LinkByName(d.Name)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) {
		return os.ErrNotExist
	}
	if err == nil && !dryRun {
		err = h.LinkDel(link)
	}
	if err != nil {
		return fmt.Errorf("netns: delete device %s in %q: %w", d.Name, d.Netns, err)
	}
	return nil
}

// removeSocket removes the Unix socket at path (in a dry run, only checks it is one).
// Anything but a socket is left alone: a tampered record must not turn this into rm.
func removeSocket(path string, dryRun bool) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err == nil && fi.Mode().Type() != os.ModeSocket {
		err = errors.New("not a socket, left alone")
	}
	if err == nil && !dryRun {
		err = os.Remove(path)
	}
	if err != nil {
		return fmt.Errorf("netns: remove socket %s: %w", path, unwrapPathError(err))
	}
	return nil
}
