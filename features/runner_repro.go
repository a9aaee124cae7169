package features

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/idscheck/idscheck/checker"
)

// RequestSequence returns one line per exchange, "METHOD path body", in the
// order sent. Every value the target drew itself (a string of at least 8
// characters found in an earlier JSON response body: ids, claim tokens) is
// replaced by a placeholder numbered in order of first appearance. Two runs
// with the same seed against fresh targets give equal sequences; that is the
// reproducibility promise of --seed.
func RequestSequence(exs []checker.Exchange) []string {
	drawn := map[string]string{} // value → placeholder
	var order []string           // values, longest first, for replacement
	out := make([]string, 0, len(exs))
	for _, ex := range exs {
		line := ex.Method + " " + ex.Path + " " + ex.ReqBody
		for _, v := range order {
			line = strings.ReplaceAll(line, v, drawn[v])
		}
		out = append(out, line)
		var body any
		if json.Unmarshal([]byte(ex.RespBody), &body) != nil {
			continue
		}
		added := false
		walkStrings(body, func(s string) {
			if len(s) >= 8 && drawn[s] == "" {
				drawn[s] = fmt.Sprintf("<drawn-%d>", len(drawn)+1)
				order = append(order, s)
				added = true
			}
		})
		if added {
			sort.SliceStable(order, func(i, j int) bool { return len(order[i]) > len(order[j]) })
		}
	}
	return out
}

// walkStrings calls f on every string value (not key) of a decoded JSON value.
func walkStrings(v any, f func(string)) {
	switch v := v.(type) {
	case string:
		f(v)
	case []any:
		for _, e := range v {
			walkStrings(e, f)
		}
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys) // deterministic placeholder numbering
		for _, k := range keys {
			walkStrings(v[k], f)
		}
	}
}
