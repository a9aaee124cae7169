package faults

import (
	"fmt"
	"strings"
)

// Summarizer is a Fault that says in one line what it does to the target,
// with the parameters it is built with (idscheck chaos -h lists them).
type Summarizer interface {
	Summary() string
}

// Catalog is every fault the harness injects by name, in the order chaos
// -h lists them: the explicit list (All of c, without its failpoints),
// then the fault of a target of several replicas (replica-crash) and
// those between the replicas and their store (StoreFaultNames). The
// failpoints belong to the target (failpoint/<name>) and are not listed.
func Catalog(c Config) []Fault {
	c.Failpoints = nil
	return append(All(c), &ReplicaCrash{}, &StorePartition{}, &StoreLostReply{}, &StoreRestart{})
}

// CatalogNames are the names of Catalog, in its order.
func CatalogNames() []string {
	list := Catalog(Config{})
	out := make([]string, len(list))
	for i, f := range list {
		out[i] = f.Name()
	}
	return out
}

// Describe lists the faults of list one a line: its name, its kind and
// its Summary (a fault without one says only its kind), each line
// starting with indent.
func Describe(list []Fault, indent string) string {
	width := 0
	for _, f := range list {
		width = max(width, len(f.Name()))
	}
	var b strings.Builder
	for _, f := range list {
		summary := ""
		if s, ok := f.(Summarizer); ok {
			summary = s.Summary()
		}
		fmt.Fprintf(&b, "%s%-*s  %-9s  %s\n", indent, width, f.Name(), f.Kind(), summary)
	}
	return b.String()
}

// stream names a toxic's stream for a summary.
func stream(s string) string {
	if s == "upstream" {
		return "requests"
	}
	return "responses"
}

// Summary of Latency.
func (f *Latency) Summary() string {
	return fmt.Sprintf("%s delayed %s ± %s", stream(f.Stream), f.Delay, f.Jitter)
}

// Summary of Bandwidth.
func (f *Bandwidth) Summary() string {
	return fmt.Sprintf("%s throttled to %d KB/s", stream(f.Stream), f.KBps)
}

// Summary of Slicer.
func (f *Slicer) Summary() string {
	return fmt.Sprintf("%s cut into segments of %d ± %d bytes, %s apart", stream(f.Stream), f.AverageSize, f.SizeVariation, f.Delay)
}

// Summary of ResetPeer.
func (f *ResetPeer) Summary() string {
	if f.Stream == "upstream" {
		return "every connection reset (TCP RST) as its request arrives"
	}
	return "every connection reset (TCP RST) once the request reached the target: the reply never comes"
}

// Summary of Blackhole.
func (f *Blackhole) Summary() string {
	return "every byte to the target dropped: requests never arrive, connections look open"
}

// Summary of LostResponse.
func (f *LostResponse) Summary() string {
	return "every byte from the target dropped: requests are processed, their replies lost"
}

// Summary of Partition.
func (f *Partition) Summary() string {
	return "the target cut off: new connections refused, open ones closed, then healed"
}

// Summary of Truncate.
func (f *Truncate) Summary() string {
	return fmt.Sprintf("%s cut off after %d bytes of each connection", stream(f.Stream), f.Bytes)
}

// Summary of DuplicateStorm.
func (f *DuplicateStorm) Summary() string {
	return fmt.Sprintf("%d to %d identical requests released at once behind one barrier (--storm-max)", f.Min, f.Max)
}

// Summary of Crash.
func (f *Crash) Summary() string {
	return "the target process idscheck starts killed (SIGKILL), kept down, restarted on its data"
}

// Summary of ReplicaCrash.
func (f *ReplicaCrash) Summary() string {
	return "one replica of several idscheck starts killed (SIGKILL), kept down while the others serve, restarted (--replicas N, or \"replicas\" with \"cmd\")"
}

// Summary of StorePartition.
func (f *StorePartition) Summary() string {
	return "one replica cut from the store by its proxy (its queries fail, the others go on), then healed (--store-proxy)"
}

// Summary of StoreLostReply.
func (f *StoreLostReply) Summary() string {
	return "the store's replies to one replica dropped after it ran the statement (a commit it cannot confirm), its connections closed (--store-proxy)"
}

// Summary of StoreRestart.
func (f *StoreRestart) Summary() string {
	return "the store crashed and restarted, every connection cut, what was committed kept (only a store idscheck started: --store local)"
}

// Summary of Failpoint.
func (f *Failpoint) Summary() string {
	return fmt.Sprintf("the failpoint %s armed with %s in this process", failpointName(f.Path), f.Term)
}

// Summary of RemoteFailpoint.
func (f *RemoteFailpoint) Summary() string {
	return fmt.Sprintf("the target's failpoint armed with %s (%s)", f.Term, f.Path)
}
