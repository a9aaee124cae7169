package atp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idscheck/idscheck/sink"
)

// startRail starts an effect sink with the rail mounted on it.
func startRail(t *testing.T) (*sink.Sink, *Rail) {
	t.Helper()
	snk, err := sink.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { snk.Close() })
	return snk, RailOf(snk)
}

func railDo(t *testing.T, method, url, key, body string) (int, RailPaymentIntent, error) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if key != "" {
		req.Header.Set(sink.HeaderKey, key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, RailPaymentIntent{}, err
	}
	defer resp.Body.Close()
	var p RailPaymentIntent
	json.NewDecoder(resp.Body).Decode(&p)
	return resp.StatusCode, p, nil
}

// TestRailChargesOncePerPaymentIntent: a second confirm of one payment
// intent charges nothing; a second payment intent for the same ATP intent
// is a second charge, and the rail counts it.
func TestRailChargesOncePerPaymentIntent(t *testing.T) {
	snk, s := startRail(t)
	base := snk.URL() + RailPathPaymentIntents
	st, p, err := railDo(t, "POST", base, "", `{"intent_id":"int_1","amount":1250,"currency":"EUR"}`)
	if err != nil || st != 201 || p.Status != RailRequiresConfirmation {
		t.Fatalf("create: %d %+v %v", st, p, err)
	}
	if s.Charges("int_1") != 0 {
		t.Fatal("a create charged")
	}
	for i := 0; i < 2; i++ {
		st, c, err := railDo(t, "POST", base+"/"+p.ID+"/confirm", "", "")
		if err != nil || st != 200 || c.Status != RailSucceeded || c.ChargeID == "" {
			t.Fatalf("confirm %d: %d %+v %v", i, st, c, err)
		}
	}
	if n := s.Charges("int_1"); n != 1 {
		t.Fatalf("two confirms of one payment intent: %d charges, want 1", n)
	}
	_, p2, _ := railDo(t, "POST", base, "", `{"intent_id":"int_1","amount":1250,"currency":"EUR"}`)
	railDo(t, "POST", base+"/"+p2.ID+"/confirm", "", "")
	if n := s.Charges("int_1"); n != 2 {
		t.Fatalf("a second payment intent confirmed: %d charges, want 2", n)
	}
	// Cancel refunds a charge; the net count drops.
	_, c, _ := railDo(t, "POST", base+"/"+p2.ID+"/cancel", "", "")
	if c.Status != RailRefunded || s.Charges("int_1") != 1 {
		t.Fatalf("cancel of a charged payment intent: %+v, net %d", c, s.Charges("int_1"))
	}
	// The create's Idempotency-Key returns the same payment intent.
	_, a, _ := railDo(t, "POST", base, "k-1", `{"intent_id":"int_2","amount":5,"currency":"EUR"}`)
	_, b, _ := railDo(t, "POST", base, "k-1", `{"intent_id":"int_2","amount":5,"currency":"EUR"}`)
	if a.ID == "" || a.ID != b.ID {
		t.Fatalf("create under one key: %s then %s", a.ID, b.ID)
	}
	if st, _, _ := railDo(t, "POST", base, "", `{"amount":5}`); st != 400 {
		t.Fatalf("a create without intent_id: %d, want 400", st)
	}
}

// TestRailLosesReplyAfterCharging: the charge is made and counted, the
// caller gets no answer, and a GET shows it succeeded.
func TestRailLosesReplyAfterCharging(t *testing.T) {
	snk, s := startRail(t)
	base := snk.URL() + RailPathPaymentIntents
	_, p, _ := railDo(t, "POST", base, "", `{"intent_id":"int_l","amount":1,"currency":"EUR"}`)
	s.LoseReplies(1)
	if _, _, err := railDo(t, "POST", base+"/"+p.ID+"/confirm", "", ""); err == nil {
		t.Fatal("a lost reply was answered")
	}
	if s.Charges("int_l") != 1 || !s.AllCharges()[0].LostReply {
		t.Fatalf("charges after a lost reply: %+v", s.AllCharges())
	}
	st, g, _ := railDo(t, "GET", base+"/"+p.ID, "", "")
	if st != 200 || g.Status != RailSucceeded {
		t.Fatalf("GET after a lost reply: %d %+v", st, g)
	}
}

// TestRailDeclines: a declined confirm charges nothing.
func TestRailDeclines(t *testing.T) {
	snk, s := startRail(t)
	base := snk.URL() + RailPathPaymentIntents
	s.Decline("int_d")
	_, p, _ := railDo(t, "POST", base, "", `{"intent_id":"int_d","amount":1,"currency":"EUR"}`)
	_, c, _ := railDo(t, "POST", base+"/"+p.ID+"/confirm", "", "")
	if c.Status != RailDeclined || s.Charges("int_d") != 0 {
		t.Fatalf("declined confirm: %+v, %d charges", c, s.Charges("int_d"))
	}
}

// TestRailCallbacks: a confirm calls the site back; dropped callbacks are
// recorded and not sent; a held confirm waits for its release.
func TestRailCallbacks(t *testing.T) {
	var mu sync.Mutex
	var got []string
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct {
			Type          string            `json:"type"`
			PaymentIntent RailPaymentIntent `json:"payment_intent"`
		}
		json.NewDecoder(r.Body).Decode(&ev)
		mu.Lock()
		got = append(got, ev.Type+" "+ev.PaymentIntent.IntentID)
		mu.Unlock()
		w.WriteHeader(204)
	}))
	defer site.Close()
	snk, s := startRail(t)
	s.SetCallback(site.URL + "/api/atp/rail/events")
	base := snk.URL() + RailPathPaymentIntents
	_, p, _ := railDo(t, "POST", base, "", `{"intent_id":"int_c","amount":1,"currency":"EUR"}`)
	railDo(t, "POST", base+"/"+p.ID+"/confirm", "", "")
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	if len(got) != 1 || got[0] != "payment_intent.succeeded int_c" {
		t.Fatalf("callbacks: %v", got)
	}
	mu.Unlock()

	s.DropCallbacks(1)
	_, p2, _ := railDo(t, "POST", base, "", `{"intent_id":"int_c2","amount":1,"currency":"EUR"}`)
	release := s.HoldConfirms("int_c2")
	done := make(chan struct{})
	go func() { railDo(t, "POST", base+"/"+p2.ID+"/confirm", "", ""); close(done) }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.WaitConfirms(ctx, "int_c2", 1); err != nil {
		t.Fatal(err)
	}
	if s.Charges("int_c2") != 0 {
		t.Fatal("a held confirm charged before its release")
	}
	release()
	<-done
	cbs := s.Callbacks()
	if len(cbs) != 2 || !cbs[1].Dropped || cbs[1].IntentID != "int_c2" {
		t.Fatalf("callbacks recorded: %+v", cbs)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("a dropped callback was sent: %v", got)
	}
}

// TestRailRefusesConfirms: a refused confirm answers 503 and charges
// nothing; after the release the same payment intent charges once.
func TestRailRefusesConfirms(t *testing.T) {
	snk, s := startRail(t)
	base := snk.URL() + RailPathPaymentIntents
	_, p, _ := railDo(t, "POST", base, "", `{"intent_id":"int_r","amount":1,"currency":"EUR"}`)
	release := s.RefuseConfirms("int_r")
	if st, _, _ := railDo(t, "POST", base+"/"+p.ID+"/confirm", "", ""); st != 503 || s.Charges("int_r") != 0 {
		t.Fatalf("refused confirm: %d, %d charges", st, s.Charges("int_r"))
	}
	release()
	if st, c, _ := railDo(t, "POST", base+"/"+p.ID+"/confirm", "", ""); st != 200 || c.Status != RailSucceeded || s.Charges("int_r") != 1 {
		t.Fatalf("confirm after release: %d %+v, %d charges", st, c, s.Charges("int_r"))
	}
}

// TestRailCallbacksGoRoundTheReplicas: with the site on several replicas
// the rail's callbacks go round them, and a callback whose replica cannot
// be reached is sent to the next one.
func TestRailCallbacksGoRoundTheReplicas(t *testing.T) {
	var mu sync.Mutex
	got := map[string][]string{}
	replica := func(name string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var ev struct {
				PaymentIntent RailPaymentIntent `json:"payment_intent"`
			}
			json.NewDecoder(r.Body).Decode(&ev)
			mu.Lock()
			got[name] = append(got[name], ev.PaymentIntent.IntentID)
			mu.Unlock()
			w.WriteHeader(204)
		}))
	}
	a, b := replica("a"), replica("b")
	defer a.Close()
	defer b.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close() // a replica that is down: its port refuses
	snk, s := startRail(t)
	s.SetCallback(a.URL+PathRailEvents, b.URL+PathRailEvents, down.URL+PathRailEvents)
	base := snk.URL() + RailPathPaymentIntents
	for i := range 3 {
		_, p, _ := railDo(t, "POST", base, "", fmt.Sprintf(`{"intent_id":"int_%d","amount":1,"currency":"EUR"}`, i))
		railDo(t, "POST", base+"/"+p.ID+"/confirm", "", "")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(got["a"]) + len(got["b"])
		mu.Unlock()
		if n == 3 && len(s.Callbacks()) == 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	// int_0 → a, int_1 → b, int_2 → down, then a.
	if len(got["a"]) != 2 || len(got["b"]) != 1 || got["b"][0] != "int_1" {
		t.Fatalf("callbacks per replica: %v", got)
	}
	if cbs := s.Callbacks(); len(cbs) != 3 {
		t.Fatalf("%d callbacks recorded, want 3", len(cbs))
	}
	for _, cb := range s.Callbacks() {
		if cb.Err != "" || cb.Status != 204 {
			t.Errorf("callback %+v: want delivered", cb)
		}
	}
}
