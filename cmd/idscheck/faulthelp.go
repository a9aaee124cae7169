package main

import (
	"fmt"
	"strings"

	"github.com/idscheck/idscheck/faults"
	"github.com/idscheck/idscheck/harness"
)

// chaosFaultsHelp is the end of chaos -h: every fault --faults can name
// against profile p, one line each, from the code's own lists (faults.
// Catalog: the network faults, the storm, the crash, the replicas' and
// their store's; the workload's own; the bundled server's failpoints).
func chaosFaultsHelp(p harness.Profile) string {
	storms := faults.Config{StormMin: 2, StormMax: 100} // as chaos draws them: --storm-max, the workload's own bounds
	if w := p.Chaos; w != nil {
		if w.StormMin > 0 {
			storms.StormMin = w.StormMin
		}
		if w.StormMax > 0 {
			storms.StormMax = w.StormMax
		}
	}
	list := faults.Catalog(storms)
	var fps []faults.Fault
	if w := p.Chaos; w != nil {
		if w.Faults != nil {
			list = append(list, w.Faults(nil, nil)...)
		}
		for _, f := range faults.All(faults.Config{Failpoints: w.Failpoints, FailpointAddr: "-"}) {
			if f.Kind() == faults.KindFailpoint {
				fps = append(fps, f)
			}
		}
	}
	var kinds []string
	for _, k := range faults.Kinds {
		kinds = append(kinds, string(k))
	}
	s := fmt.Sprintf("\nFaults (--faults names them, or a kind: %s; each needs what it says):\n", strings.Join(kinds, ", ")) + faults.Describe(list, "  ")
	if len(fps) > 0 {
		s += fmt.Sprintf("The bundled %s server's failpoints (failpoint/<name>; a --target has none):\n", p.Name) + faults.Describe(fps, "  ")
	}
	return s
}
