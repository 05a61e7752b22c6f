package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/rocelab/rocelab/lab"
)

// printBudgets prints what each host's verbs clients make the lab process hold against
// the host's share of the lab's budget (docs/verbs-service.md, Budgets), if the lab
// reports budgets.
func printBudgets(out io.Writer, st lab.Status) {
	var w *tabwriter.Writer
	for _, h := range st.Hosts {
		if h.Verbs == nil || h.Verbs.Budget == nil {
			continue
		}
		if w == nil {
			fmt.Fprintln(out)
			w = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "VERBS BUDGET\tDESCRIPTORS\tMAPPINGS\tMAPPED\tMEMORY\t(the host's clients' use / its share; a client's is half)")
		}
		b := h.Verbs.Budget
		fmt.Fprintf(w, "%s\t%d/%d\t%d/%d\t%s/%s\t%s/%s\t\n", h.Name, b.Used.FDs, b.Host.FDs, b.Used.Maps, b.Host.Maps,
			sizeOf(b.Used.MapBytes), sizeOf(b.Host.MapBytes), sizeOf(b.Used.Memory), sizeOf(b.Host.Memory))
	}
	if w != nil {
		w.Flush()
	}
}

// sizeOf formats n bytes in the largest binary unit that still shows it as 10 or more.
func sizeOf(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	i := 0
	for n >= 10<<10 && i < len(units)-1 {
		n >>= 10
		i++
	}
	return fmt.Sprintf("%d %s", n, units[i])
}
