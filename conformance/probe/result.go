package probe

import (
	"encoding/json"
	"fmt"
	"os"
)

// ParseResult reads what Agree needs of an idscheck run's result.json:
// the variant the run judged, each rule's verdict and what blocked it.
func ParseResult(b []byte) (variant string, verdicts, blockedBy map[string]string, err error) {
	var doc struct {
		Target struct {
			Variant string `json:"variant"`
		} `json:"target"`
		Rules []struct {
			Rule struct {
				ID string `json:"id"`
			} `json:"rule"`
			Result struct {
				Verdict   string `json:"verdict"`
				BlockedBy string `json:"blocked_by"`
			} `json:"result"`
		} `json:"rules"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return "", nil, nil, fmt.Errorf("result.json: %v", err)
	}
	verdicts, blockedBy = map[string]string{}, map[string]string{}
	for _, r := range doc.Rules {
		verdicts[r.Rule.ID] = r.Result.Verdict
		if r.Result.BlockedBy != "" {
			blockedBy[r.Rule.ID] = r.Result.BlockedBy
		}
	}
	return doc.Target.Variant, verdicts, blockedBy, nil
}

// ReadResult is ParseResult of the file at path.
func ReadResult(path string) (string, map[string]string, map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", nil, nil, err
	}
	return ParseResult(b)
}
