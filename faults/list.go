package faults

import (
	"context"
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
	// term (e.g. "github.com/idscheck/idscheck/sut/after-commit-before-reply":
	// `return("exit")`). With FailpointAddr (the child's GO_FAILPOINTS_HTTP)
	// each becomes a RemoteFailpoint on Process; without, a Failpoint armed
	// in this process.
	Failpoints    map[string]string
	FailpointAddr string
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
			list = append(list, &RemoteFailpoint{Addr: c.FailpointAddr, Path: p, Term: c.Failpoints[p], Process: c.Process})
		} else {
			list = append(list, &Failpoint{Path: p, Term: c.Failpoints[p]})
		}
	}
	return list
}

// faultNames are the names ParseKinds accepts besides the kinds and "all".
var faultNames = []string{"latency", "bandwidth", "slicer", "reset_peer", "blackhole", "lost_response", "partition", "truncate", "storm", "crash"}

// ParseKinds parses the chaos command's --faults flag: a comma-separated list
// of kinds (net, storm, crash, failpoint), fault names (latency, partition,
// …, failpoint/<name>) or "all". It returns the tokens, trimmed, without
// duplicates, in the order given; an unknown token is an error naming the
// accepted ones.
func ParseKinds(s string) ([]string, error) {
	var out []string
	for _, tok := range strings.Split(s, ",") {
		tok = strings.TrimSpace(tok)
		if tok == "" {
			continue
		}
		known := tok == "all" || slices.Contains(faultNames, tok) || strings.HasPrefix(tok, "failpoint/")
		for _, k := range Kinds {
			known = known || tok == string(k)
		}
		if !known {
			return nil, fmt.Errorf("faults: unknown fault %q; want all, %s, or one of %s",
				tok, joinKinds(), strings.Join(faultNames, ", "))
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
