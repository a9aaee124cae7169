package faults

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Config is what the explicit list of faults acts on. A nil or empty field
// makes the faults that need it unavailable (their Available says why),
// never absent: the list is always the same, so a report can show every
// fault and why one did not run.
type Config struct {
	Network *Network // the proxy in front of the target; nil: network faults unavailable
	Process *Process // the target process the harness owns; nil: crash unavailable

	// StormMin..StormMax bound the size of a duplicate storm (defaults 2..100,
	// at most MaxStorm); StormDo sends request i of a storm (nil: storms
	// unavailable).
	StormMin, StormMax int
	StormDo            func(ctx context.Context, i int)

	// Failpoints are the named failpoints of the reference server, path to
	// term (e.g. "github.com/idscheck/idscheck/sut/intent/after-commit-before-reply":
	// `return("exit")`). With FailpointAddr (the child's GO_FAILPOINTS_HTTP)
	// each becomes a RemoteFailpoint on Process; without, a Failpoint armed
	// in this process.
	Failpoints    map[string]string
	FailpointAddr string
	// FailpointTriggers, by failpoint path, drive the target to the armed
	// point right after a RemoteFailpoint is armed (see RemoteFailpoint.Trigger).
	FailpointTriggers map[string]func(ctx context.Context) error
}

// All returns the explicit list of faults, in a fixed order: the network
// faults with their default parameters, the duplicate storm, the crash, then
// one fault per failpoint (sorted by path). Default parameters: latency
// 200 ms ± 50 ms on responses; bandwidth 16 KB/s on responses; slicer 64 ± 32
// bytes, 200 µs apart, on requests; reset_peer on the response; black hole;
// lost response; partition; responses truncated after 64 bytes.
func All(c Config) []Fault {
	n := c.Network
	minN, maxN := c.StormMin, c.StormMax
	if minN == 0 {
		minN = 2
	}
	if maxN == 0 {
		maxN = max(100, minN)
	}
	list := []Fault{
		&Latency{Network: n, Delay: 200 * time.Millisecond, Jitter: 50 * time.Millisecond},
		&Bandwidth{Network: n, KBps: 16},
		&Slicer{Network: n, AverageSize: 64, SizeVariation: 32, Delay: 200 * time.Microsecond, Stream: "upstream"},
		&ResetPeer{Network: n},
		&Blackhole{Network: n},
		&LostResponse{Network: n},
		&Partition{Network: n},
		&Truncate{Network: n, Bytes: 64},
		&DuplicateStorm{Min: minN, Max: maxN, Do: c.StormDo},
		&Crash{Process: c.Process},
	}
	paths := make([]string, 0, len(c.Failpoints))
	for p := range c.Failpoints {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		if c.FailpointAddr != "" {
			list = append(list, &RemoteFailpoint{Addr: c.FailpointAddr, Path: p, Term: c.Failpoints[p], Process: c.Process,
				Trigger: c.FailpointTriggers[p]})
		} else {
			list = append(list, &Failpoint{Path: p, Term: c.Failpoints[p]})
		}
	}
	return list
}

// Names returns the name of every fault of the explicit list, in list order,
// without the failpoints (those belong to the target: "failpoint/<name>").
// It is the one list of fault names: the --faults flag's validation and help,
// the schedule and the report all come from it, through All.
func Names() []string {
	list := All(Config{})
	out := make([]string, len(list))
	for i, f := range list {
		out[i] = f.Name()
	}
	return out
}

// KindOf returns the Kind of the fault called name ("failpoint/<x>" is
// KindFailpoint), and false for a name that is not on the list.
func KindOf(name string) (Kind, bool) {
	if strings.HasPrefix(name, FailpointPrefix) && len(name) > len(FailpointPrefix) {
		return KindFailpoint, true
	}
	for _, f := range Catalog(Config{}) {
		if f.Name() == name {
			return f.Kind(), true
		}
	}
	return "", false
}

// FailpointPrefix starts the name of every failpoint fault.
const FailpointPrefix = "failpoint/"

// FlagHelp describes what the --faults flag accepts, from the list itself.
func FlagHelp() string {
	return "comma-separated: all, none (the workload alone), " + joinKinds() + " (every fault of that kind), or fault names: " +
		strings.Join(CatalogNames(), ", ") + ", failpoint/<name> (each is described below)"
}

// ParseKinds parses the chaos command's --faults flag: a comma-separated list
// of kinds (net, storm, crash, failpoint), fault names (Names, or
// failpoint/<name>) or "all". It returns the tokens, trimmed, without
// duplicates, in the order given; an unknown token is an error naming the
// accepted ones.
//
// "none" alone asks for no fault: a run of the workload alone (a baseline,
// a benchmark); it returns an empty, non-nil list.
func ParseKinds(s string) ([]string, error) {
	if strings.TrimSpace(s) == "none" {
		return []string{}, nil
	}
	var out []string
	names := CatalogNames()
	for _, tok := range strings.Split(s, ",") {
		tok = strings.TrimSpace(tok)
		if tok == "" {
			continue
		}
		// names: the fixed list, and the faults of replicas and their store (Catalog).
		known := tok == "all" || slices.Contains(names, tok) || (strings.HasPrefix(tok, FailpointPrefix) && len(tok) > len(FailpointPrefix))
		for _, k := range Kinds {
			known = known || tok == string(k)
		}
		if tok == "none" {
			return nil, errors.New("faults: none asks for no fault: give it alone")
		}
		if !known {
			return nil, fmt.Errorf("faults: unknown fault %q; want all, none, %s, or one of %s, failpoint/<name>",
				tok, joinKinds(), strings.Join(names, ", "))
		}
		if !slices.Contains(out, tok) {
			out = append(out, tok)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("faults: empty list; want all, %s", joinKinds())
	}
	return out, nil
}

// Select returns the faults of list whose Kind or Name is one of tokens (as
// ParseKinds returns them; "all" selects every fault), in list order.
func Select(list []Fault, tokens []string) []Fault {
	var out []Fault
	for _, f := range list {
		if slices.Contains(tokens, "all") || slices.Contains(tokens, string(f.Kind())) || slices.Contains(tokens, f.Name()) {
			out = append(out, f)
		}
	}
	return out
}

// Requested returns what tokens ask for, fault by fault: the name of every
// fault of list they select (in list order), then each token that selects
// no fault of list at all (e.g. "failpoint" against a target with no known
// failpoints, or "failpoint/x" that it does not have), which a run must
// report as requested and not available rather than drop.
func Requested(list []Fault, tokens []string) (names, unmatched []string) {
	for _, f := range Select(list, tokens) {
		names = append(names, f.Name())
	}
	for _, tok := range tokens {
		if len(Select(list, []string{tok})) == 0 {
			unmatched = append(unmatched, tok)
		}
	}
	return names, unmatched
}

// Usable splits list into the faults that can run and, by name, the reasons
// the others cannot (each wraps ErrNotAvailable).
func Usable(list []Fault) (usable []Fault, unavailable map[string]error) {
	unavailable = map[string]error{}
	for _, f := range list {
		if err := f.Available(); err != nil {
			unavailable[f.Name()] = err
			continue
		}
		usable = append(usable, f)
	}
	return usable, unavailable
}

func joinKinds() string {
	s := make([]string, len(Kinds))
	for i, k := range Kinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}
