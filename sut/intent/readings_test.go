package intent

import (
	"context"
	"encoding/base64"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// seedPath is the protocol text the server is written from (data, not code
// of the harness).
const seedPath = "../../spec/seeds/004_b5f0a9c556f3c9c3.txt"

// fakeClock is the server's clock in these tests: it moves only when told.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
func (c *fakeClock) unix() float64           { return float64(c.ns.Load()) / 1e9 }

// AdvanceTo moves the clock to the first nanosecond at or after the Unix
// time sec, as the server compares it (float seconds); never backwards.
func (c *fakeClock) AdvanceTo(sec float64) {
	ns := int64(math.Ceil(sec * 1e9))
	for float64(ns)/1e9 < sec {
		ns++
	}
	if ns < c.ns.Load() {
		panic("fakeClock.AdvanceTo: the clock does not go back")
	}
	c.ns.Store(ns)
}

// readingBus starts a server on a fake clock that follows name for key
// (and the defaults elsewhere); name "" is the default of key.
func readingBus(t *testing.T, key, name string, mod func(*Config)) (*testBus, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	b := newBus(t, func(c *Config) {
		c.Clock = clk.Now
		c.CleanupInterval = 1e9 * time.Second
		if name != "" {
			c.Readings = map[string]string{key: name}
		}
		if mod != nil {
			mod(c)
		}
	})
	got := b.srv.Readings()[key]
	if name == "" {
		name = DefaultReadings()[key]
	}
	if got != name {
		t.Fatalf("server follows %s=%s, want %s", key, got, name)
	}
	return b, clk
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-3 }

func TestReadingKeys(t *testing.T) {
	def, alt := DefaultReadings(), AlternateReadings()
	keys := ReadingKeys()
	decisions := 0
	for _, k := range keys {
		if len(k.Names) != 2 || len(k.Means) != 2 || k.Section == "" {
			t.Errorf("%s: names %q, means %q, section %q", k.Key, k.Names, k.Means, k.Section)
		}
		if def[k.Key] != k.Names[0] || alt[k.Key] != k.Names[1] || def[k.Key] == alt[k.Key] {
			t.Errorf("%s: default %q, alternate %q; want %q", k.Key, def[k.Key], alt[k.Key], k.Names)
		}
		if k.Decision {
			decisions++
			if len(k.Quotes) != len(k.Names) {
				t.Errorf("%s: %d quotes for %d names", k.Key, len(k.Quotes), len(k.Names))
			}
		} else if len(k.Quotes) != 0 {
			t.Errorf("%s: quotes on a key that is not a decision", k.Key)
		}
	}
	if decisions != 5 || len(def) != len(keys) || len(alt) != len(keys) || len(keys) != decisions+4 {
		t.Fatalf("%d keys (%d decisions), %d default and %d alternate names", len(keys), decisions, len(def), len(alt))
	}
	// Every quote is in the text (seed 004), up to white space.
	raw, err := os.ReadFile(seedPath)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(raw)), " ")
	for _, k := range keys {
		for i, q := range k.Quotes {
			if q = strings.Join(strings.Fields(q), " "); q == "" || !strings.Contains(text, q) {
				t.Errorf("%s=%s: quote is not in seed 004: %q", k.Key, k.Names[i], q)
			}
		}
	}
	// A caller cannot change the server's lists through the copy.
	keys[0].Names[0], keys[0].Quotes[0] = "x", "x"
	if again := ReadingKeys(); again[0].Names[0] == "x" || again[0].Quotes[0] == "x" {
		t.Fatal("ReadingKeys hands out the server's own slices")
	}
	// Every switch is reached by its name: a renamed reading fails here.
	none, err := resolveReadings(nil)
	if err != nil {
		t.Fatal(err)
	}
	all, err := resolveReadings(alt)
	if err != nil {
		t.Fatal(err)
	}
	rv0, rv1 := reflect.ValueOf(none), reflect.ValueOf(all)
	for i := 0; i < rv0.NumField(); i++ {
		if rv0.Field(i).Kind() != reflect.Bool {
			continue
		}
		if name := rv0.Type().Field(i).Name; rv0.Field(i).Bool() || !rv1.Field(i).Bool() {
			t.Errorf("switch %s: %v by default, %v in alternate", name, rv0.Field(i).Bool(), rv1.Field(i).Bool())
		}
	}
	if !reflect.DeepEqual(all.effective, alt) || !reflect.DeepEqual(none.effective, def) {
		t.Fatalf("effective readings %v / %v", none.effective, all.effective)
	}
	for _, tc := range []struct {
		m    map[string]string
		want []string
	}{
		{map[string]string{"nope": "x"}, []string{`unknown reading "nope"`, ReadingLeaseExpiry, ReadingBounds}},
		{map[string]string{ReadingExtend: "later"}, []string{`unknown name "later"`, "from-now, added"}},
		{map[string]string{ReadingAccess: "410"}, []string{"403, 404"}},
		{map[string]string{"fulfill-body": "x"}, []string{"unknown reading"}}, // a decision of the harness without readings
	} {
		err := CheckReadings(tc.m)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("CheckReadings(%v) = %v, want it to mention %q", tc.m, err, w)
			}
		}
	}
	if _, err := Open(context.Background(), Config{DBPath: filepath.Join(t.TempDir(), "x.db"), Secret: "s",
		Readings: map[string]string{ReadingLeaseExpiry: "never"}}); err == nil || !strings.Contains(err.Error(), "backoff, immediate") {
		t.Fatalf("Open with an unknown reading: %v", err)
	}
}

func TestReadingsInHealth(t *testing.T) {
	for _, m := range []map[string]string{nil, AlternateReadings()} {
		b := newBus(t, func(c *Config) { c.Readings = m })
		var h struct {
			OK       bool              `json:"ok"`
			Version  string            `json:"version"`
			Readings map[string]string `json:"readings"`
		}
		b.do("GET", pathHealth, nil).json(t, &h)
		want := DefaultReadings()
		if m != nil {
			want = m
		}
		if !h.OK || h.Version != serverVersion || !reflect.DeepEqual(h.Readings, want) {
			t.Fatalf("health %+v, want readings %v", h, want)
		}
	}
}

// lease-expiry: backoff (default) or immediate.
func TestReadingLeaseExpiry(t *testing.T) {
	for _, reading := range []string{"backoff", "immediate"} {
		t.Run(reading, func(t *testing.T) {
			b, clk := readingBus(t, ReadingLeaseExpiry, reading, nil)
			id := b.publish(`{"goal":"g","payload":1,"max_attempts":2,"backoff_base":5}`)
			c1, ok := b.claim("")
			if !ok || c1.ID != id {
				t.Fatal("first claim")
			}
			v := b.statusOf(id)
			if v.ClaimExpiresAt == nil || !near(*v.ClaimExpiresAt, clk.unix()+60) {
				t.Fatalf("lease %+v", v)
			}
			// run_at is when the intent is claimable again after this lease.
			if reading == "immediate" && !near(v.RunAt, *v.ClaimExpiresAt) {
				t.Fatalf("run_at %v, lease ends %v", v.RunAt, *v.ClaimExpiresAt)
			}
			if reading == "backoff" && (v.RunAt < *v.ClaimExpiresAt+10 || v.RunAt >= *v.ClaimExpiresAt+12) {
				t.Fatalf("run_at %v, lease ends %v: want 10 s (5*2^1) + [0, 2) after", v.RunAt, *v.ClaimExpiresAt)
			}
			clk.Advance(61 * time.Second)
			if v := b.statusOf(id); v.Status != stateOpen {
				t.Fatalf("after the lease: %s", v.Status)
			}
			c2, ok := b.claim("")
			if reading == "backoff" {
				if ok {
					t.Fatal("claimed 1 s after the lease ended; the backoff is 10–12 s")
				}
				clk.Advance(8 * time.Second) // 69 s: still in the backoff
				if _, ok := b.claim(""); ok {
					t.Fatal("claimed 9 s after the lease ended")
				}
				clk.Advance(3 * time.Second) // 72 s
				c2, ok = b.claim("")
			}
			if !ok || c2.ID != id || c2.ClaimAttempts != 2 || c2.ClaimToken == c1.ClaimToken {
				t.Fatalf("reclaim %v %+v", ok, c2)
			}
			// Dead-lettering at max attempts is the same under both.
			clk.Advance(61 * time.Second)
			if v := b.statusOf(id); v.Status != stateDead {
				t.Fatalf("lease lapsed at max attempts: %s", v.Status)
			}
			if _, ok := b.claim(""); ok {
				t.Fatal("claimed a dead intent")
			}
			if r := b.do("GET", pathDeadLetter+id, nil, hdrAdminToken, testAdmin); r.status != 200 {
				t.Fatalf("dead letter: %d %s", r.status, r.body)
			}
		})
	}
}

// An explicit /fail keeps its backoff under both lease readings.
func TestReadingLeaseExpiryFailKeepsBackoff(t *testing.T) {
	b, clk := readingBus(t, ReadingLeaseExpiry, "immediate", nil)
	id := b.publish(`{"goal":"g","payload":1,"backoff_base":5}`)
	c, _ := b.claim("")
	var m mutationResponse
	b.do("POST", pathFail+id, map[string]any{"claim_token": c.ClaimToken}).json(t, &m)
	if m.RunAt == nil || *m.RunAt < clk.unix()+10 {
		t.Fatalf("fail: %+v", m)
	}
	if _, ok := b.claim(""); ok {
		t.Fatal("claimed at once after /fail")
	}
}

// extend: from-now (default) or added.
func TestReadingExtend(t *testing.T) {
	for _, reading := range []string{"from-now", "added"} {
		t.Run(reading, func(t *testing.T) {
			b, clk := readingBus(t, ReadingExtend, reading, nil)
			id := b.publish(`{"goal":"g","payload":1}`)
			c, _ := b.claim("")
			t0 := clk.unix()
			clk.Advance(20 * time.Second)
			r := b.do("POST", pathExtendClaim+id, map[string]any{"claim_token": c.ClaimToken, "seconds": 100})
			var m mutationResponse
			r.json(t, &m)
			want := t0 + 20 + 100
			if reading == "added" {
				want = t0 + 60 + 100
			}
			if r.status != 200 || m.ClaimExpiresAt == nil || !near(*m.ClaimExpiresAt, want) {
				t.Fatalf("extend: %d %s; want the lease to end at %.3f", r.status, r.body, want)
			}
			if v := b.statusOf(id); v.ClaimExpiresAt == nil || !near(*v.ClaimExpiresAt, want) {
				t.Fatalf("status after extend %+v", v)
			}
			clk.Advance(110 * time.Second) // t0+130: past t0+120, before t0+160
			r = b.do("POST", pathFulfill+id, map[string]any{"claim_token": c.ClaimToken})
			if wantStatus := map[string]int{"from-now": 404, "added": 200}[reading]; r.status != wantStatus {
				t.Fatalf("fulfil at t0+130: %d %s, want %d", r.status, r.body, wantStatus)
			}
		})
	}
}

// query-repeated-order: by-value (default) or as-sent.
func TestReadingQueryRepeatedOrder(t *testing.T) {
	for _, reading := range []string{queryByValue, queryAsSent} {
		t.Run(reading, func(t *testing.T) {
			b, clk := readingBus(t, ReadingQueryRepeated, reading, func(c *Config) { c.RequireSignatures = true })
			n := 0
			// send signs path under one reading (as-sent or by-value).
			send := func(path string, asSent bool) resp {
				n++
				ts, nonce := strconv.FormatInt(clk.Now().Unix(), 10), "n"+strconv.Itoa(n)
				return b.do("POST", path, nil, b.signed("POST", path, "", ts, nonce, asSent)...)
			}
			// Already in value order: both readings agree.
			for _, sent := range []bool{false, true} {
				if r := send("/claim?tag=a&namespace=x&tag=z", sent); r.status != 204 {
					t.Fatalf("in value order: %d %s", r.status, r.body)
				}
			}
			const path = "/claim?tag=z&namespace=x&tag=a"
			byValue, asSent := send(path, false), send(path, true)
			good, bad := byValue, asSent
			if reading == queryAsSent {
				good, bad = asSent, byValue
			}
			if good.status != 204 {
				t.Fatalf("signed %s: %d %s", reading, good.status, good.body)
			}
			if bad.status != 401 || bad.code(t) != codeInvalidSignature {
				t.Fatalf("signed under the other reading: %d %s", bad.status, bad.body)
			}
		})
	}
}

func basicAdmin() string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+testDash))
}

// admin-result-access: admin-alone (default) or with-api-key.
func TestReadingAdminResultAccess(t *testing.T) {
	for _, reading := range []string{"admin-alone", "with-api-key"} {
		t.Run(reading, func(t *testing.T) {
			b, _ := readingBus(t, ReadingAdminResult, reading, nil)
			bob := b.generateKey("bob")
			id := b.publish(`{"goal":"g","payload":1}`)
			alone := 200
			if reading == "with-api-key" {
				alone = 401
			}
			for _, path := range []string{pathResult + id, pathStatus + id} {
				for _, tc := range []struct {
					name   string
					hdr    []string
					status int
				}{
					{"admin token alone", []string{hdrAPIKey, "", hdrAdminToken, testAdmin}, alone},
					{"basic alone", []string{hdrAPIKey, "", "Authorization", basicAdmin()}, alone},
					{"other key with admin token", []string{hdrAPIKey, bob, hdrAdminToken, testAdmin}, 200},
					{"other key with basic", []string{hdrAPIKey, bob, "Authorization", basicAdmin()}, 200},
					{"other key alone", []string{hdrAPIKey, bob}, 403},
					{"bad key with admin token", []string{hdrAPIKey, "tk_nope", hdrAdminToken, testAdmin}, 401},
					{"wrong admin token alone", []string{hdrAPIKey, "", hdrAdminToken, "wrong"}, 401},
				} {
					r := b.do("GET", path, nil, tc.hdr...)
					if r.status != tc.status {
						t.Fatalf("%s %s: %d %s, want %d", path, tc.name, r.status, r.body, tc.status)
					}
					if r.status == 401 && r.code(t) != codeUnauthorized {
						t.Fatalf("%s %s: %s", path, tc.name, r.body)
					}
				}
			}
		})
	}
}

// null-payload: a-payload (default) or missing.
func TestReadingNullPayload(t *testing.T) {
	for _, reading := range []string{"a-payload", "missing"} {
		t.Run(reading, func(t *testing.T) {
			b, _ := readingBus(t, ReadingNullPayload, reading, nil)
			r := b.do("POST", pathIntent, `{"goal":"g","payload":null}`)
			if reading == "a-payload" {
				if r.status != 201 {
					t.Fatalf("null payload: %d %s", r.status, r.body)
				}
				var c createIntentResponse
				r.json(t, &c)
				v := b.do("GET", pathAdminIntents+c.ID, nil, hdrAdminToken, testAdmin)
				if !strings.Contains(string(v.body), `"payload":null`) {
					t.Fatalf("stored payload: %s", v.body)
				}
			} else if r.status != 400 || r.code(t) != codeInvalidRequest {
				t.Fatalf("null payload: %d %s", r.status, r.body)
			}
			for _, body := range []string{`{"goal":"g","payload":0}`, `{"goal":"g","payload":{}}`, `{"goal":"g","payload":"null"}`} {
				if r := b.do("POST", pathIntent, body); r.status != 201 {
					t.Fatalf("%s: %d %s", body, r.status, r.body)
				}
			}
			if r := b.do("POST", pathIntent, `{"goal":"g"}`); r.status != 400 || r.code(t) != codeInvalidRequest {
				t.Fatalf("no payload: %d %s", r.status, r.body)
			}
		})
	}
}

// signature-status: 401 (default) or 403 invalid_signature.
func TestReadingSignatureStatus(t *testing.T) {
	for _, reading := range []string{"401", "403"} {
		t.Run(reading, func(t *testing.T) {
			b, clk := readingBus(t, ReadingSignatureStatus, reading, func(c *Config) { c.RequireSignatures = true })
			body := `{"goal":"g","payload":1}`
			now := strconv.FormatInt(clk.Now().Unix(), 10)
			sign := func(body, ts, nonce string) []string {
				return b.signed("POST", "/intent", body, ts, nonce, false)
			}
			if r := b.do("POST", "/intent", body, sign(body, now, "n1")...); r.status != 201 {
				t.Fatalf("signed: %d %s", r.status, r.body)
			}
			for _, tc := range []struct {
				name, code string
				hdr        []string
			}{
				{"unsigned", codeSignatureRequired, nil},
				{"bad signature", codeInvalidSignature, sign(body+" ", now, "n2")},
				{"skewed", codeInvalidTimestamp, sign(body, strconv.FormatInt(clk.Now().Unix()-301, 10), "n3")},
				{"not a timestamp", codeInvalidTimestamp, sign(body, "soon", "n4")},
				{"nonce replay", codeNonceReused, sign(body, now, "n1")},
			} {
				r := b.do("POST", "/intent", body, tc.hdr...)
				status, code := 401, tc.code
				if reading == "403" {
					status, code = 403, codeInvalidSignature
				}
				if r.status != status || r.code(t) != code {
					t.Fatalf("%s: %d %s, want %d %s", tc.name, r.status, r.body, status, code)
				}
			}
		})
	}
}

// bounds: reject (default) or clamp.
func TestReadingBounds(t *testing.T) {
	for _, reading := range []string{"reject", "clamp"} {
		t.Run(reading, func(t *testing.T) {
			b, clk := readingBus(t, ReadingBounds, reading, nil)
			id := b.publish(`{"goal":"g","payload":1}`)
			c, _ := b.claim("")
			for _, tc := range []struct {
				seconds string
				clamped float64
			}{{"9", 10}, {"3601", 3600}, {"-5", 10}, {"0", 10}, {"1e400", 3600}, {"10", 10}, {"3600", 3600}} {
				r := b.do("POST", pathExtendClaim+id, `{"claim_token":"`+c.ClaimToken+`","seconds":`+tc.seconds+`}`)
				inRange := tc.seconds == "10" || tc.seconds == "3600"
				if reading == "reject" && !inRange {
					if r.status != 400 || r.code(t) != codeInvalidSeconds {
						t.Fatalf("seconds %s: %d %s", tc.seconds, r.status, r.body)
					}
					continue
				}
				var m mutationResponse
				r.json(t, &m)
				if r.status != 200 || m.ClaimExpiresAt == nil || !near(*m.ClaimExpiresAt, clk.unix()+tc.clamped) {
					t.Fatalf("seconds %s: %d %s, want the lease to end in %v s", tc.seconds, r.status, r.body, tc.clamped)
				}
			}
			for _, bad := range []string{`"60"`, `null`, `true`, `[60]`} {
				r := b.do("POST", pathExtendClaim+id, `{"claim_token":"`+c.ClaimToken+`","seconds":`+bad+`}`)
				if r.status != 400 || r.code(t) != codeInvalidSeconds {
					t.Fatalf("seconds %s: %d %s", bad, r.status, r.body)
				}
			}
			for _, tc := range []struct {
				ttl     string
				clamped float64
			}{{"86401", 86400}, {"1e9", 86400}, {"0", 1}, {"-3", 1}, {"86400", 86400}} {
				r := b.do("POST", pathSet+"k", `{"value":"v","ttl":`+tc.ttl+`}`)
				if reading == "reject" && tc.ttl != "86400" {
					if r.status != 400 || r.code(t) != codeInvalidTTL {
						t.Fatalf("ttl %s: %d %s", tc.ttl, r.status, r.body)
					}
					continue
				}
				var m struct {
					ExpiresAt float64 `json:"expires_at"`
				}
				r.json(t, &m)
				if r.status != 200 || !near(m.ExpiresAt, clk.unix()+tc.clamped) {
					t.Fatalf("ttl %s: %d %s, want %v s", tc.ttl, r.status, r.body, tc.clamped)
				}
			}
			if r := b.do("POST", pathSet+"k", `{"value":"v","ttl":"600"}`); r.status != 400 || r.code(t) != codeInvalidTTL {
				t.Fatalf("string ttl: %d %s", r.status, r.body)
			}
			// The value set last (ttl 86400, or the clamped 86401) lives a day.
			clk.Advance(86399 * time.Second)
			if r := b.do("GET", pathGet+"k", nil); r.status != 200 {
				t.Fatalf("get before the ttl: %d %s", r.status, r.body)
			}
			clk.Advance(2 * time.Second)
			if r := b.do("GET", pathGet+"k", nil); r.status != 404 {
				t.Fatalf("get after the ttl: %d %s", r.status, r.body)
			}
		})
	}
}

// publisher-filter: forbidden (default) or empty.
func TestReadingPublisherFilter(t *testing.T) {
	for _, reading := range []string{"forbidden", "empty"} {
		t.Run(reading, func(t *testing.T) {
			b, _ := readingBus(t, ReadingPublisherFilter, reading, nil)
			alice, bob := b.generateKey("alice"), b.generateKey("bob")
			id := b.publish(`{"goal":"g","payload":1,"visibility":"public"}`, hdrAPIKey, alice)
			r := b.do("POST", pathClaim+"?publisher="+alice, nil, hdrAPIKey, bob)
			if reading == "forbidden" {
				if r.status != 403 || r.code(t) != codeForbidden {
					t.Fatalf("foreign filter: %d %s", r.status, r.body)
				}
			} else if r.status != 204 || r.header.Get(hdrRetryAfter) != "1" || len(r.body) != 0 {
				t.Fatalf("foreign filter: %d %v %s", r.status, r.header, r.body)
			}
			if c, ok := b.claim("?publisher="+alice, hdrAPIKey, alice); !ok || c.ID != id {
				t.Fatalf("own filter: %v %+v", ok, c)
			}
			// An admin may filter by any key under both.
			b.publish(`{"goal":"g","payload":1,"visibility":"public"}`, hdrAPIKey, alice)
			if _, ok := b.claim("?publisher="+alice, hdrAPIKey, bob, hdrAdminToken, testAdmin); !ok {
				t.Fatal("admin filter")
			}
		})
	}
}

// access: 403 (default) or 404.
func TestReadingAccess(t *testing.T) {
	for _, reading := range []string{"403", "404"} {
		t.Run(reading, func(t *testing.T) {
			b, _ := readingBus(t, ReadingAccess, reading, nil)
			bob := b.generateKey("bob")
			id := b.publish(`{"goal":"g","payload":1}`)
			for _, path := range []string{pathResult, pathStatus} {
				r := b.do("GET", path+id, nil, hdrAPIKey, bob)
				want, code := 403, codeForbidden
				if reading == "404" {
					want, code = 404, codeNotFound
				}
				if r.status != want || r.code(t) != code {
					t.Fatalf("%s of another key's intent: %d %s", path, r.status, r.body)
				}
				if r := b.do("GET", path+"0123", nil, hdrAPIKey, bob); r.status != 404 {
					t.Fatalf("%s of an unknown id: %d", path, r.status)
				}
				if r := b.do("GET", path+id, nil); r.status != 200 {
					t.Fatalf("%s by the publisher: %d", path, r.status)
				}
			}
		})
	}
}

// TestAlternateServer runs a server with every alternate reading at once
// (idscheck serve --readings alternate): the switches work together.
func TestAlternateServer(t *testing.T) {
	clk := newFakeClock()
	b := newBus(t, func(c *Config) {
		c.Clock = clk.Now
		c.Readings = AlternateReadings()
		c.CleanupInterval = 1e9 * time.Second
	})
	if !reflect.DeepEqual(b.srv.Readings(), AlternateReadings()) {
		t.Fatalf("readings %v", b.srv.Readings())
	}
	if r := b.do("POST", pathIntent, `{"goal":"g","payload":null}`); r.status != 400 {
		t.Fatalf("null payload: %d", r.status)
	}
	id := b.publish(`{"goal":"g","payload":1}`)
	if r := b.do("GET", pathResult+id, nil, hdrAPIKey, "", hdrAdminToken, testAdmin); r.status != 401 {
		t.Fatalf("admin alone: %d", r.status)
	}
	c, _ := b.claim("")
	clk.Advance(61 * time.Second)
	if c2, ok := b.claim(""); !ok || c2.ID != id {
		t.Fatal("not claimable at once after the lease")
	}
	if r := b.do("POST", pathSet+"k", `{"value":1,"ttl":99999}`); r.status != 200 {
		t.Fatalf("ttl clamp: %d", r.status)
	}
	bob := b.generateKey("bob")
	if r := b.do("GET", pathStatus+id, nil, hdrAPIKey, bob); r.status != 404 {
		t.Fatalf("foreign status: %d", r.status)
	}
	if r := b.do("POST", pathClaim+"?publisher="+testSecret, nil, hdrAPIKey, bob); r.status != 204 {
		t.Fatalf("foreign filter: %d", r.status)
	}
	if r := b.do("POST", pathFulfill+id, map[string]string{"claim_token": c.ClaimToken}, hdrSignature, "00"); r.status != 403 {
		t.Fatalf("half-signed: %d %s", r.status, r.body)
	}
}
