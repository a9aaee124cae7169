package features

import (
	"strings"
	"testing"
	"time"
)

// TestOneLineCutsAtAWord (issue 28, case 11): a reason cut for the console
// ends at the end of a word, with an ellipsis.
func TestOneLineCutsAtAWord(t *testing.T) {
	s := "86401 protocol seconds needs 24m0s of waiting at the target's time scale; the scenario budget is 10s"
	for _, n := range []int{40, 70, 90, 95} {
		got := oneLine(s, n)
		if len([]rune(got)) > n || !strings.HasSuffix(got, "…") {
			t.Errorf("oneLine(%d) = %q: longer than %d or no ellipsis", n, got, n)
			continue
		}
		base := strings.TrimSuffix(got, "…")
		if !strings.HasPrefix(s, base) || (len(base) < len(s) && s[len(base)] != ' ' && s[len(base)] != ';') {
			t.Errorf("oneLine(%d) = %q: cut mid-word", n, got)
		}
	}
	if got := oneLine("short  enough\n", 20); got != "short enough" {
		t.Errorf("oneLine kept %q", got)
	}
	if got := oneLine(strings.Repeat("x", 50), 10); got != strings.Repeat("x", 9)+"…" {
		t.Errorf("a single long word: %q", got)
	}
}

// TestRoundedDurations (issue 28, case 11): one wait reads the same in
// every reason, whatever milliseconds the scenario already waited.
func TestRoundedDurations(t *testing.T) {
	for d, want := range map[time.Duration]string{
		2*time.Hour + 46*time.Minute + 40*time.Second + 9*time.Millisecond: "2h46m40s",
		2*time.Hour + 46*time.Minute + 40*time.Second:                      "2h46m40s",
		24*time.Minute + 17*time.Millisecond:                               "24m0s",
		34*time.Second + 123*time.Millisecond:                              "34.12s",
		1500 * time.Microsecond:                                            "2ms",
	} {
		if got := Rounded(d).String(); got != want {
			t.Errorf("Rounded(%v) = %s, want %s", d, got, want)
		}
	}
}
