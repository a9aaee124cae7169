package ids_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	specids "github.com/idscheck/idscheck/profiles/ids"
)

// fakeIDS is a small in-memory IDS target (docs/ids-binding.md) for the
// workload's tests, independent of the bundled server: payment.capture (I3,
// S1), refund.issue (I3, S2: an outbox with one dispatcher that reconciles
// against GET /effects/{key} after a failed call), note.add (I1, no external
// effect). Mutants: "no-reservation" checks then executes without reserving
// the key; "outbox-double-dispatch" dispatches every outbox entry twice.
type fakeIDS struct {
	sinkURL string
	mutant  string
	hc      *http.Client

	mu     sync.Mutex
	recs   map[string]*fakeRec // tenant/key
	byCmd  map[string]*fakeRec // original command_id
	outbox chan *fakeRec
	done   chan struct{}
	wg     sync.WaitGroup
}

type fakeRec struct {
	tenant, key, fp, orig, command string
	args                           json.RawMessage
	status                         string // in_progress, executed, rejected
	code                           int
	body                           []byte
	evidence                       []map[string]any
}

var fakeRegistry = `{"binding":"idscheck-ids/1","duplicate_rate_limit":{"max":100000,"window_seconds":60},"confirmation_ttl_seconds":300,"commands":[
{"command":"payment.capture","class":"I3","ttl_seconds":86400,"shielding":"S1","financial":true,"requires_confirmation":false},
{"command":"refund.issue","class":"I3","ttl_seconds":86400,"shielding":"S2","financial":true,"requires_confirmation":false},
{"command":"note.add","class":"I1","ttl_seconds":3600,"shielding":null,"financial":false,"requires_confirmation":false,"args_examples":[{"text":"call back"},{"text":"sent the invoice"}]},
{"command":"account.close","class":"I3","ttl_seconds":86400,"shielding":"S1","financial":false,"requires_confirmation":true}]}`

func newFakeIDS(sinkURL, mutant string) (*fakeIDS, *httptest.Server) {
	f := &fakeIDS{sinkURL: sinkURL, mutant: mutant, hc: &http.Client{Timeout: 500 * time.Millisecond},
		recs: map[string]*fakeRec{}, byCmd: map[string]*fakeRec{}, outbox: make(chan *fakeRec, 100000), done: make(chan struct{})}
	f.wg.Go(f.dispatcher)
	hs := httptest.NewServer(f)
	return f, hs
}

func (f *fakeIDS) close() { close(f.done); f.wg.Wait() }

type fakeEnv struct {
	CommandID      string          `json:"command_id"`
	TenantID       string          `json:"tenant_id"`
	ActorID        string          `json:"actor_id"`
	EffectiveActor string          `json:"effective_actor_id"`
	Intent         map[string]any  `json:"intent"`
	Args           json.RawMessage `json:"args"`
	Kind           string          `json:"command_kind"`
	Key            string          `json:"idempotency_key"`
}

func (f *fakeIDS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/health":
		io.WriteString(w, `{"ok":true}`)
	case r.URL.Path == "/registry":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, fakeRegistry)
	case r.Method == http.MethodPost && r.URL.Path == "/commands":
		f.post(w, r)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/commands/"):
		f.mu.Lock()
		rec := f.byCmd[strings.TrimPrefix(r.URL.Path, "/commands/")]
		var st string
		if rec != nil {
			st = rec.status
		}
		f.mu.Unlock()
		if rec == nil {
			http.Error(w, `{"code":"not_found"}`, 404)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"command_id": rec.orig, "tenant_id": rec.tenant, "idempotency_key": rec.key, "status": st})
	case r.URL.Path == "/evidence":
		f.mu.Lock()
		rec := f.recs[r.URL.Query().Get("tenant_id")+"/"+r.URL.Query().Get("idempotency_key")]
		items := []map[string]any{}
		if rec != nil {
			items = append(items, rec.evidence...)
		}
		b, _ := json.Marshal(map[string]any{"evidence": items})
		f.mu.Unlock()
		w.Write(b)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeIDS) post(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var env fakeEnv
	if err := json.Unmarshal(raw, &env); err != nil || env.CommandID == "" || env.TenantID == "" {
		http.Error(w, `{"code":"invalid_envelope"}`, 400)
		return
	}
	var args map[string]any
	json.Unmarshal(env.Args, &args)
	var senv specids.Envelope
	json.Unmarshal(raw, &senv)
	key, _ := senv.Key()
	if env.Key != "" && env.Key != key {
		http.Error(w, `{"code":"idempotency_key_mismatch"}`, 400)
		return
	}
	var m map[string]any
	json.Unmarshal(raw, &m)
	for _, k := range []string{"command_id", "idempotency_key", "confirmation_token", "timestamp", "message_id", "trace_id"} {
		delete(m, k)
	}
	fpb, _ := json.Marshal(m)
	fp := string(fpb)
	command := fmt.Sprint(env.Intent["entity"], ".", env.Intent["action"])
	id := env.TenantID + "/" + key

	f.mu.Lock()
	rec := f.recs[id]
	if rec != nil {
		if rec.fp != fp {
			f.mu.Unlock()
			w.WriteHeader(409)
			return
		}
		rec.evidence = append(rec.evidence, map[string]any{"decision": "duplicate_replayed", "executed": false, "command_id": env.CommandID, "original_command_id": rec.orig})
		if rec.status == "in_progress" {
			b := processing(rec)
			f.mu.Unlock()
			w.WriteHeader(202)
			w.Write(b)
			return
		}
		code, body := rec.code, f.replay(rec)
		f.mu.Unlock()
		w.WriteHeader(code)
		w.Write(body)
		return
	}
	rec = &fakeRec{tenant: env.TenantID, key: key, fp: fp, orig: env.CommandID, command: command, args: env.Args, status: "in_progress"}
	if f.mutant != "no-reservation" {
		f.recs[id] = rec
		f.byCmd[env.CommandID] = rec
	}
	f.mu.Unlock()
	if f.mutant == "no-reservation" {
		time.Sleep(2 * time.Millisecond) // the window between the check and the write
	}
	amount, _ := args["amount_minor"].(float64)
	switch {
	case (command == "payment.capture" || command == "refund.issue") && amount <= 0:
		f.finish(rec, "rejected", 422, map[string]any{"reason": "amount_minor must be positive"}, id)
	case command == "payment.capture":
		eff, err := f.callSink(rec, true)
		if err != nil {
			f.mu.Lock()
			addFirstSeen(rec, true)
			f.mu.Unlock()
			f.wg.Go(func() { f.retryS1(rec) })
			f.mu.Lock()
			b := processing(rec)
			f.mu.Unlock()
			w.WriteHeader(202)
			w.Write(b)
			return
		}
		f.finish(rec, "executed", 201, map[string]any{"effect_id": eff}, id)
	case command == "refund.issue":
		f.finish(rec, "executed", 201, map[string]any{"refund": "queued"}, id)
		f.outbox <- rec
		if f.mutant == "outbox-double-dispatch" {
			f.outbox <- rec
		}
	default:
		f.finish(rec, "executed", 201, map[string]any{"note": "added"}, id)
	}
	f.mu.Lock()
	code, body := rec.code, rec.body
	f.mu.Unlock()
	w.WriteHeader(code)
	w.Write(body)
}

// replay is the answer to a duplicate of a terminal command (f.mu held):
// the stored document, or under the replay mutants a reference document
// (IDS §IX.A's second form): "replay-reference" refers to the original
// outcome_ref; "replay-reference-fresh-ref" to a new one each time (it
// breaks the outcome under both readings); "replay-mixed" replays
// payment.capture by reference and note.add by its stored document, which
// carries no outcome_ref (neither reading holds throughout).
func (f *fakeIDS) replay(rec *fakeRec) []byte {
	ref := func(outcomeRef string) []byte {
		b, _ := json.Marshal(map[string]any{"command_id": rec.orig, "idempotency_key": rec.key, "status": rec.status,
			"outcome_ref": outcomeRef, "status_url": "/commands/" + rec.orig})
		return b
	}
	switch {
	case f.mutant == "replay-reference":
		return ref("out_" + rec.orig)
	case f.mutant == "replay-reference-fresh-ref":
		return ref(fmt.Sprintf("out_%s_%d", rec.orig, len(rec.evidence)))
	case f.mutant == "replay-mixed" && rec.command == "payment.capture":
		return ref("out_" + rec.orig)
	}
	return rec.body
}

func processing(rec *fakeRec) []byte {
	b, _ := json.Marshal(map[string]any{"command_id": rec.orig, "idempotency_key": rec.key, "status": "processing", "status_url": "/commands/" + rec.orig})
	return b
}

// addFirstSeen puts the first delivery's evidence first, once: duplicates
// that arrived while it was under way (their duplicate_replayed items) come
// after it, and a first delivery that is finished later (its sink call
// failed, then a retry made it) has one first_seen item, not two. Called
// with f.mu held.
func addFirstSeen(rec *fakeRec, executed bool) {
	for _, e := range rec.evidence {
		if e["decision"] == "first_seen" {
			return
		}
	}
	rec.evidence = append([]map[string]any{{"decision": "first_seen", "executed": executed, "command_id": rec.orig, "original_command_id": rec.orig}}, rec.evidence...)
}

// finish stores the outcome; for a first delivery it adds its evidence.
func (f *fakeIDS) finish(rec *fakeRec, status string, code int, result map[string]any, id string) {
	doc := map[string]any{"command_id": rec.orig, "idempotency_key": rec.key, "status": status,
		"outcome_ref": "out_" + rec.orig, "result": result, "status_url": "/commands/" + rec.orig}
	if f.mutant == "replay-mixed" && rec.command == "note.add" {
		delete(doc, "outcome_ref")
	}
	b, _ := json.Marshal(doc)
	f.mu.Lock()
	defer f.mu.Unlock()
	addFirstSeen(rec, status == "executed")
	rec.status, rec.code, rec.body = status, code, b
	if f.mutant == "no-reservation" {
		if old := f.recs[id]; old != nil && old != rec {
			rec.evidence = append(old.evidence, rec.evidence...)
		}
		f.recs[id] = rec
		f.byCmd[rec.orig] = rec
	}
}

func (f *fakeIDS) callSink(rec *fakeRec, s1 bool) (string, error) {
	body, _ := json.Marshal(map[string]any{"tenant_id": rec.tenant, "idempotency_key": rec.key, "command_id": rec.orig, "command": rec.command, "args": rec.args})
	req, _ := http.NewRequest(http.MethodPost, f.sinkURL+"/effects", bytes.NewReader(body))
	if s1 {
		req.Header.Set("Idempotency-Key", rec.key)
	}
	resp, err := f.hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		EffectID string `json:"effect_id"`
	}
	json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("sink: %d", resp.StatusCode)
	}
	return out.EffectID, nil
}

// retryS1 finishes an S1 command whose sink call failed: the same key.
func (f *fakeIDS) retryS1(rec *fakeRec) {
	for i := 0; i < 200; i++ {
		select {
		case <-f.done:
			return
		case <-time.After(20 * time.Millisecond):
		}
		if eff, err := f.callSink(rec, true); err == nil {
			f.finish(rec, "executed", 201, map[string]any{"effect_id": eff}, rec.tenant+"/"+rec.key)
			return
		}
	}
}

// dispatcher is the one outbox dispatcher: after a failed call it asks the
// sink what it did for the key before calling again.
func (f *fakeIDS) dispatcher() {
	for {
		var rec *fakeRec
		select {
		case <-f.done:
			return
		case rec = <-f.outbox:
		}
		for i := 0; i < 500; i++ {
			if i > 0 {
				resp, err := f.hc.Get(f.sinkURL + "/effects/" + rec.key)
				if err != nil {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				resp.Body.Close()
				if resp.StatusCode == 200 && f.mutant != "outbox-double-dispatch" {
					break
				}
			}
			if _, err := f.callSink(rec, false); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

var _ = context.Background
