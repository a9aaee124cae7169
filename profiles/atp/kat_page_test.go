package atp

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// katFile is profiles/atp/testdata/kat.json; objects are kept as written.
type katFile struct {
	Agent   map[string]string `json:"agent"`
	Site    map[string]string `json:"site"`
	Intents []struct {
		Intent    json.RawMessage `json:"intent"`
		Canonical string          `json:"canonical"`
		Signature string          `json:"signature"`
	} `json:"intents"`
	Receipts []struct {
		Body      json.RawMessage `json:"body"`
		Canonical string          `json:"canonical"`
		Signature string          `json:"signature"`
	} `json:"receipts"`
}

// katFileValues flattens kat.json into the page's lines: member path →
// value (a string as it is, an object as compact JSON in the file's order).
func katFileValues(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile("testdata/kat.json")
	if err != nil {
		t.Fatal(err)
	}
	var k katFile
	if err := json.Unmarshal(raw, &k); err != nil {
		t.Fatal(err)
	}
	compact := func(m json.RawMessage) string {
		var b bytes.Buffer
		if err := json.Compact(&b, m); err != nil {
			t.Fatal(err)
		}
		// json.Compact keeps the file's bytes; the page writes
		// non-ASCII characters as themselves, like the file.
		return b.String()
	}
	v := map[string]string{}
	for f, x := range k.Agent {
		v["agent."+f] = x
	}
	for f, x := range k.Site {
		v["site."+f] = x
	}
	for n, i := range k.Intents {
		p := "intents[" + strconv.Itoa(n) + "]."
		v[p+"intent"], v[p+"canonical"], v[p+"signature"] = compact(i.Intent), i.Canonical, i.Signature
	}
	for n, r := range k.Receipts {
		p := "receipts[" + strconv.Itoa(n) + "]."
		v[p+"body"], v[p+"canonical"], v[p+"signature"] = compact(r.Body), r.Canonical, r.Signature
	}
	return v
}

var katLine = regexp.MustCompile(`^((?:agent|site|intents\[\d+\]|receipts\[\d+\])\.[a-z_]+) +(\S.*)$`)

// katPageValues reads the vectors of docs/atp-binding.md's "Known-answer
// vectors": every line of its code blocks, member path and value.
func katPageValues(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile("../../docs/atp-binding.md")
	if err != nil {
		t.Fatal(err)
	}
	page := string(raw)
	at := strings.Index(page, "\n## Known-answer vectors\n")
	if at < 0 {
		t.Fatal(`docs/atp-binding.md has no section "## Known-answer vectors"`)
	}
	sec := page[at+1:]
	if end := strings.Index(sec[3:], "\n## "); end >= 0 {
		sec = sec[:end+3]
	}
	v := map[string]string{}
	in := false
	for n, l := range strings.Split(sec, "\n") {
		if strings.HasPrefix(l, "```") {
			in = !in
			continue
		}
		if !in || strings.TrimSpace(l) == "" {
			continue
		}
		m := katLine.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("known-answer vectors, line %d of the section: %q is not `member value`", n+1, l)
			continue
		}
		if _, dup := v[m[1]]; dup {
			t.Errorf("known-answer vectors: %s twice on the page", m[1])
		}
		v[m[1]] = m[2]
	}
	return v
}

// TestKATPageEqualsFile: the vectors a vendor reads on docs/atp-binding.md
// are the file's, every one, byte for byte, and no other (issue 20: they
// were only pointed to).
func TestKATPageEqualsFile(t *testing.T) {
	file, page := katFileValues(t), katPageValues(t)
	var names []string
	for k := range file {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		got, ok := page[k]
		switch {
		case !ok:
			t.Errorf("%s is in kat.json but not on the page", k)
		case got != file[k]:
			t.Errorf("%s: the page says\n  %s\nkat.json says\n  %s", k, got, file[k])
		}
	}
	for k := range page {
		if _, ok := file[k]; !ok {
			t.Errorf("%s is on the page but not in kat.json", k)
		}
	}
	if len(file) < 20 {
		t.Errorf("kat.json has %d values: not read", len(file))
	}
}
