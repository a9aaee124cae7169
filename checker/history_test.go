package checker

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/verdict"
)

func TestHistoryJSONLRoundTrip(t *testing.T) {
	h := History{Ops: []Operation{
		{ClientID: 1, Kind: OpPublish, Key: "k1", KeyID: "ab", Input: Input{Body: "d1"}, Output: Output{Status: 201, ID: "u1", Body: "r1"}, Call: 1, Return: 2, Outcome: verdict.OutcomeOK},
		{ClientID: 2, Kind: "lease", Key: "u1", Input: Input{Worker: "w"}, Output: Output{Token: "t", Attempts: 1, LeaseNs: 5}, Call: 3, Return: 9, Outcome: verdict.OutcomeUnknown},
		{ClientID: 3, Kind: OpStatus, Key: "u1", Output: Output{Status: 404, State: StateGone}, Call: 10, Return: 11, Outcome: verdict.OutcomeOK},
	}}
	var buf bytes.Buffer
	if err := h.WriteJSONL(&buf); err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(buf.Bytes(), []byte("\n")); n != len(h.Ops) {
		t.Fatalf("%d lines for %d ops", n, len(h.Ops))
	}
	got, err := ReadHistory(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, h) {
		t.Errorf("round trip changed the history:\n got  %+v\n want %+v", got, h)
	}
	l := Ledger{Effects: []Effect{{Key: "k1", Intent: "u1", Worker: "w", Token: "t", At: 1}, {Key: "k2", At: 2}}}
	buf.Reset()
	if err := l.WriteJSONL(&buf); err != nil {
		t.Fatal(err)
	}
	gl, err := ReadLedger(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gl, l) {
		t.Errorf("ledger round trip: got %+v want %+v", gl, l)
	}
}

func TestReadHistoryRejects(t *testing.T) {
	for _, tc := range []struct{ name, text string }{
		{"not json", "{oops\n"},
		{"no kind", `{"client":0,"call":1,"ret":2,"outcome":"ok"}` + "\n"},
		{"unknown outcome", `{"client":0,"kind":"publish","call":1,"ret":2,"outcome":"maybe"}` + "\n"},
		{"return before call", `{"client":0,"kind":"publish","call":5,"ret":2,"outcome":"ok"}` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ReadHistory(strings.NewReader("# comment\n\n" + tc.text)); err == nil {
				t.Errorf("no error for %q", tc.text)
			} else if !strings.Contains(err.Error(), "line 3") {
				t.Errorf("error %q does not name line 3", err)
			}
		})
	}
}

// TestVisualizeFailingPartitionsOnly: Visualize draws the failing
// partitions with the report's model, and nothing when none failed; a
// report with failing partitions and no model is an error, never an empty
// view.
func TestVisualizeFailingPartitionsOnly(t *testing.T) {
	op := func(kind OpKind, key, body, state string, call, ret int64) Operation {
		return Operation{Kind: kind, Key: key, Input: Input{Body: body}, Output: Output{State: state, Status: 200},
			Call: call, Return: ret, Outcome: verdict.OutcomeOK}
	}
	bad := []Operation{op(OpPublish, "bad", "x", "", 0, 1), op(OpStatus, "bad", "", "y", 2, 3)}
	m := registerModel{}.Porcupine()
	r := Report{
		Anomalies:         []Anomaly{{Kind: NotLinearizable, Key: "bad", Ops: bad, Effects: []Effect{{Key: "bad", Worker: "w1", At: 2}}}},
		FailingPartitions: []Partition{{Model: "register", Key: "bad", Ops: bad}},
		PartitionModel:    &m,
	}
	var buf bytes.Buffer
	if err := r.Visualize(&buf); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	if !strings.Contains(html, "<html") || !strings.Contains(html, string(NotLinearizable)) || !strings.Contains(html, "effect of bad by w1") {
		t.Errorf("visualization lacks html, the anomaly or its effect (%d bytes)", len(html))
	}
	var empty bytes.Buffer
	if err := (Report{}).Visualize(&empty); err != nil || empty.Len() != 0 {
		t.Errorf("passing report: wrote %d bytes, err %v", empty.Len(), err)
	}
	r.PartitionModel = nil
	if err := r.Visualize(&empty); err == nil {
		t.Error("failing partitions without a model: no error")
	}
}
