package netns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.uber.org/zap"
)

// Clean removes the leftovers of crashed labs: every lab in the store (and, with
// Indexed, in every store the index records) whose lab process is gone (dead, a zombie,
// or its pid reused) is removed as by [Cleaner.Down]. Labs whose process runs are listed
// in Report.Running and left alone. Namespaces that carry rocelab's prefix but that no
// state file in those stores records are listed in Report.Foreign and left alone:
// without a record, nothing says they are rocelab's; those that live processes use (a
// lab of another state directory) are listed in Report.InUse instead. Host view pins
// ([ViewDir]) that no state file records are listed in Report.ForeignViews, and left
// alone too. A crashed lab one of whose namespaces a live process outside it holds (a
// lab of the same name under another state directory) is left alone too.
func (c *Cleaner) Clean() (Report, error) {
	var rep Report
	stores := []Store{c.Store}
	var errs []error
	if c.Indexed {
		indexed, err := IndexedStores()
		if err != nil {
			errs = append(errs, err)
		}
		own, _ := c.Store.indexedRoot()
		for _, s := range indexed {
			if s.Root != own {
				stores = append(stores, s)
			}
		}
	}
	recorded := map[string]bool{}
	for _, s := range stores {
		sc := *c
		sc.Store = s
		errs = append(errs, sc.cleanStore(&rep, recorded)...)
	}
	names, err := ListNamespaces()
	if err != nil {
		errs = append(errs, err)
	}
	for _, ns := range names {
		if !strings.HasPrefix(ns, Prefix) || recorded[ns] {
			continue
		}
		inside, outside, err := holders(ns)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if procs := append(inside, outside...); len(procs) > 0 {
			c.log().Warn("namespace named like rocelab's, not recorded here and in use, left alone", zap.String("netns", ns))
			rep.InUse = append(rep.InUse, InUse{Netns: ns, Procs: procs})
			continue
		}
		c.log().Warn("namespace named like rocelab's but not recorded, left alone", zap.String("netns", ns))
		rep.Foreign = append(rep.Foreign, ns)
	}
	views, err := os.ReadDir(ViewDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("netns: list host views: %w", err))
	}
	for _, v := range views {
		ns := strings.TrimSuffix(strings.TrimSuffix(v.Name(), ".mnt"), ".uts")
		if strings.HasPrefix(ns, Prefix) && !recorded[ns] {
			c.log().Warn("host view named like rocelab's but not recorded, left alone", zap.String("pin", v.Name()))
			rep.ForeignViews = append(rep.ForeignViews, filepath.Join(ViewDir, v.Name()))
		}
	}
	return rep, errors.Join(errs...)
}

// cleanStore removes the crashed labs of c.Store into rep, marking every namespace the
// store records (crashed or not) in recorded.
func (c *Cleaner) cleanStore(rep *Report, recorded map[string]bool) []error {
	labs, errs, err := c.Store.List()
	if err != nil {
		return []error{err}
	}
	for _, l := range labs {
		for _, h := range l.Hosts {
			recorded[h.Netns] = true
		}
		if l.Running() {
			c.log().Info("lab running, left alone", zap.String("lab", l.Name), zap.Int("pid", l.Owner.PID))
			rep.Running = append(rep.Running, l.Name)
			continue
		}
		labRep, err := c.down(l.Name, true)
		rep.Removed = append(rep.Removed, labRep.Removed...)
		rep.Running = append(rep.Running, labRep.Running...)
		rep.InUse = append(rep.InUse, labRep.InUse...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
