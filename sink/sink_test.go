package sink_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idscheck/idscheck/sink"
)

func post(t *testing.T, s *sink.Sink, key, command string, header bool) (int, string, error) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"tenant_id": "t", "idempotency_key": key, "command_id": "c", "command": command, "args": map[string]any{}})
	req, _ := http.NewRequest(http.MethodPost, s.URL()+sink.PathEffects, bytes.NewReader(body))
	if header {
		req.Header.Set(sink.HeaderKey, key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var out struct {
		EffectID string `json:"effect_id"`
	}
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out.EffectID, nil
}

func start(t *testing.T) *sink.Sink {
	t.Helper()
	s, err := sink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestS1CommandsAreDedupedByKeyOthersActOnEveryCall(t *testing.T) {
	s := start(t)
	s.HonourKeys("payment.capture")
	st1, id1, _ := post(t, s, "k1", "payment.capture", true)
	st2, id2, _ := post(t, s, "k1", "payment.capture", true)
	if st1 != 201 || st2 != 200 || id1 != id2 || s.Effects("k1") != 1 || s.Calls("k1") != 2 {
		t.Fatalf("S1: statuses %d %d, ids %s %s, effects %d calls %d", st1, st2, id1, id2, s.Effects("k1"), s.Calls("k1"))
	}
	// Without the header, or for a command not shielded by S1, every call acts.
	post(t, s, "k2", "payment.capture", false)
	post(t, s, "k2", "payment.capture", false)
	post(t, s, "k3", "refund.issue", true)
	post(t, s, "k3", "refund.issue", true)
	if s.Effects("k2") != 2 || s.Effects("k3") != 2 {
		t.Fatalf("non-S1 calls: effects k2=%d k3=%d, want 2 each", s.Effects("k2"), s.Effects("k3"))
	}
	resp, err := http.Get(s.URL() + sink.PathEffects + "/k3")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET effects/k3: %v %v", resp, err)
	}
	resp, _ = http.Get(s.URL() + sink.PathEffects + "/nope")
	if resp.StatusCode != 404 {
		t.Fatalf("GET of an unknown key: %d, want 404", resp.StatusCode)
	}
}

func TestALostReplyActsAndAnswersNothing(t *testing.T) {
	s := start(t)
	if !s.Resolved("k") {
		t.Fatal("a key whose reply was never lost is not resolved")
	}
	s.LoseReplies(1)
	if _, _, err := post(t, s, "k", "refund.issue", false); err == nil {
		t.Fatal("the first call got an answer; its reply should have been lost")
	}
	if s.Effects("k") != 1 {
		t.Fatalf("effects %d, want 1: the sink acts before it loses the reply", s.Effects("k"))
	}
	if s.Resolved("k") {
		t.Fatal("Resolved before the caller came back for the lost reply")
	}
	resp, err := http.Get(s.URL() + sink.PathEffects + "/k")
	if err != nil || resp.StatusCode != 200 || !s.Resolved("k") {
		t.Fatalf("a lookup after the lost reply: %v %v, resolved %v", resp, err, s.Resolved("k"))
	}
	if st, _, err := post(t, s, "k", "refund.issue", false); err != nil || st != 201 {
		t.Fatalf("the second call: %d %v", st, err)
	}
	if n := s.LostReplies(); n != 1 {
		t.Fatalf("LostReplies %d, want 1", n)
	}
	// Every effect names the tenant and the command that asked for it.
	for _, e := range s.AllEffects() {
		if e.Tenant != "t" || e.CommandID != "c" || e.Command != "refund.issue" {
			t.Fatalf("effect %+v: want tenant t, command_id c, command refund.issue", e)
		}
	}
}

func TestHoldKeepsACallUntilReleased(t *testing.T) {
	s := start(t)
	release := s.Hold("k")
	done := make(chan int, 1)
	go func() { st, _, _ := post(t, s, "k", "x", false); done <- st }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.WaitCalls(ctx, "k", 1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		t.Fatal("a held call was answered before its release")
	case <-time.After(50 * time.Millisecond):
	}
	if s.Effects("k") != 0 {
		t.Fatal("a held call acted before its release")
	}
	release()
	release()
	if st := <-done; st != 201 || s.Effects("k") != 1 {
		t.Fatalf("after release: %d, effects %d", st, s.Effects("k"))
	}
}

func TestMalformedCallsAreRefusedWithoutEffect(t *testing.T) {
	s := start(t)
	resp, err := http.Post(s.URL()+sink.PathEffects, "application/json", bytes.NewReader([]byte(`{"command":"x"}`)))
	if err != nil || resp.StatusCode != 400 {
		t.Fatalf("a call without idempotency_key: %v %v", resp, err)
	}
	if len(s.AllEffects()) != 0 || len(s.AllCalls()) != 1 || s.AllCalls()[0].Refused == "" {
		t.Fatalf("effects %v calls %v", s.AllEffects(), s.AllCalls())
	}
}

// TestHoldAll: every POST waits while held, WaitArrivals sees it, and the
// release lets it act; a release after Close does nothing.
func TestHoldAll(t *testing.T) {
	s, err := sink.Start("")
	if err != nil {
		t.Fatal(err)
	}
	release := s.HoldAll()
	done := make(chan int, 1)
	go func() {
		resp, err := http.Post(s.URL()+sink.PathEffects, "application/json", strings.NewReader(`{"idempotency_key":"k1","command":"c"}`))
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.WaitArrivals(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if s.TotalEffects() != 0 {
		t.Fatal("a held call acted")
	}
	release()
	if code := <-done; code != http.StatusCreated || s.TotalEffects() != 1 {
		t.Fatalf("after the release: %d, %d effects", code, s.TotalEffects())
	}
	release2 := s.HoldAll()
	s.Close()
	release2() // must not panic
}

// TestFailNext: a failed call answers 503 and acts not.
func TestFailNext(t *testing.T) {
	s, err := sink.Start("")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.FailNext(1)
	for i, want := range []int{http.StatusServiceUnavailable, http.StatusCreated} {
		resp, err := http.Post(s.URL()+sink.PathEffects, "application/json", strings.NewReader(`{"idempotency_key":"k","command":"c"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("call %d: %d, want %d", i, resp.StatusCode, want)
		}
	}
	if s.TotalEffects() != 1 {
		t.Fatalf("%d effects, want 1", s.TotalEffects())
	}
}

// TestALostReplyOfOneKeySparesTheOthers: LoseReplyOf drops the next reply
// for its key only; a POST for another key coming first is answered.
func TestALostReplyOfOneKeySparesTheOthers(t *testing.T) {
	s := start(t)
	s.LoseReplyOf("mine")
	if st, _, err := post(t, s, "other", "payment.capture", true); err != nil || st != 201 {
		t.Fatalf("a call for another key: %d %v, want 201", st, err)
	}
	if _, _, err := post(t, s, "mine", "refund.issue", false); err == nil {
		t.Fatal("the call for the key got an answer; its reply should have been lost")
	}
	if st, _, err := post(t, s, "mine", "refund.issue", false); err != nil || st != 201 {
		t.Fatalf("the next call for the key: %d %v, want 201 (one loss only)", st, err)
	}
	if s.LostReplies() != 1 || s.Effects("mine") != 2 {
		t.Fatalf("lost %d effects %d, want 1 and 2", s.LostReplies(), s.Effects("mine"))
	}
	s.LoseReplyOf("mine")
	s.LoseReplies(0)
	if st, _, err := post(t, s, "mine", "refund.issue", false); err != nil || st != 201 {
		t.Fatalf("after LoseReplies(0): %d %v, want 201", st, err)
	}
}

// TestTakeReads: the counts a check read at the sink are kept, the latest
// value of each, until taken (the proof of a PASS shows them).
func TestTakeReads(t *testing.T) {
	s, err := sink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Effects("k")
	if _, _, err := post(t, s, "k", "pay", true); err != nil {
		t.Fatal(err)
	}
	s.Effects("k")
	s.TotalEffects()
	got := s.TakeReads()
	want := []sink.Read{{What: "effects", Key: "k", N: 1}, {What: "effects", N: 1}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("reads %+v, want %+v", got, want)
	}
	if again := s.TakeReads(); len(again) != 0 {
		t.Errorf("reads taken twice: %+v", again)
	}
}
