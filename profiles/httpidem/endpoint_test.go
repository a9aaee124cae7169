package httpidem

import "testing"

func TestSFString(t *testing.T) {
	for in, want := range map[string]string{
		"8e03978e-40d5-43e8-bc93-6894a57f9324": `"8e03978e-40d5-43e8-bc93-6894a57f9324"`,
		`a"b\c`:                                `"a\"b\\c"`,
	} {
		if got, ok := SFString(in); !ok || got != want {
			t.Errorf("SFString(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	if _, ok := SFString("é"); ok {
		t.Error("a non-ASCII key encoded as an sf-string")
	}
}

func TestEndpointValidate(t *testing.T) {
	good := Endpoint{Path: "/v1/payments", Body: map[string]any{"amount": 1, "reference": "{{unique}}"}}
	good.Defaults()
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	if good.KeyFormat != "sf-string" || good.Key.Header != "Idempotency-Key" || good.Method != "POST" {
		t.Fatalf("defaults: %+v", good)
	}
	for name, e := range map[string]Endpoint{
		"variant": {Variant: "paypal", Path: "/p", Body: map[string]any{"a": 1}, KeyFormat: "token"},
		"path":    {Variant: "t0", Path: "p", Body: map[string]any{"a": 1}, KeyFormat: "token"},
		"body":    {Variant: "t0", Path: "/p", KeyFormat: "token"},
		"both":    {Variant: "t0", Path: "/p", Body: map[string]any{"a": 1}, KeyFormat: "token", Key: KeyPlace{Header: "K", Body: "k"}},
		"sf-body": {Variant: "t0", Path: "/p", Body: map[string]any{"a": 1}, KeyFormat: "sf-string", Key: KeyPlace{Body: "k"}},
		"count":   {Variant: "t0", Path: "/p", Body: map[string]any{"a": 1}, KeyFormat: "token", Count: &CountRead{Path: "/c"}},
		"scope":   {Variant: "t0", Path: "/p", Body: map[string]any{"a": 1}, KeyFormat: "token", KeyScope: "tenant"},
		"pointer": {Variant: "t0", Path: "/p", Body: map[string]any{"a": "{{unique}}"}, KeyFormat: "token", Count: &CountRead{Path: "/c", Pointer: "count"}},
		"diff":    {Variant: "t0", Path: "/p", Body: map[string]any{"a": "{{unique}}"}, KeyFormat: "token", Count: &CountRead{Path: "/c?r={{unique}}", Difference: true}},
		"lengths": {Variant: "t0", Path: "/p", Body: map[string]any{"a": 1}, KeyFormat: "token", KeySpec: &KeySpec{MinLength: 9, MaxLength: 8}},
		"pattern": {Variant: "t0", Path: "/p", Body: map[string]any{"a": 1}, KeyFormat: "token", KeySpec: &KeySpec{Pattern: "^[A-Z]{4}$"}},
		"status":  {Variant: "t0", Path: "/p", Body: map[string]any{"a": 1}, KeyFormat: "token", Documented: &Documented{MismatchStatus: 201}},
	} {
		if err := e.Validate(); err == nil {
			t.Errorf("%s: %+v validates", name, e)
		}
	}
}

// TestCountExtract: the count is a number, an array's length or an
// object's size, wherever the pointer finds it; anything else is an error
// that says what was found.
func TestCountExtract(t *testing.T) {
	doc := []byte(`{"count": 3, "data": [1, 2], "by_id": {"a": {}, "b": {}, "c": {}, "d": {}}, "a/b": [1], "half": 1.5, "s": "4"}`)
	for ptr, want := range map[string]int{"/count": 3, "/data": 2, "/by_id": 4, "/a~1b": 1, "": 6} {
		if n, err := (&CountRead{Pointer: ptr}).Extract(doc); err != nil || n != want {
			t.Errorf("pointer %q: %d, %v; want %d", ptr, n, err, want)
		}
	}
	if n, err := (&CountRead{Items: "data"}).Extract(doc); err != nil || n != 2 {
		t.Errorf("items data: %d, %v", n, err)
	}
	for _, ptr := range []string{"/half", "/s", "/nope", "/data/7"} {
		if _, err := (&CountRead{Pointer: ptr}).Extract(doc); err == nil {
			t.Errorf("pointer %q: no error", ptr)
		}
	}
}

// TestKeySpec: idscheck's keys follow the published format, and the key
// made to fall outside it does.
func TestKeySpec(t *testing.T) {
	n := uint32(0)
	rnd := func() uint32 { n += 0x9e3779b9; return n }
	for _, ks := range []*KeySpec{nil, {UUID: true}, {MinLength: 40, MaxLength: 40}, {MaxLength: 8}, {Pattern: "[0-9a-f-]{36}"}, {MinLength: 1, MaxLength: 255}} {
		k, err := ks.NewKey(rnd)
		if err != nil || ks.Allows(k) != "" || len(k) > 64 {
			t.Errorf("%+v: key %q, %v (%s)", ks, k, err, ks.Allows(k))
		}
		if ks == nil {
			continue
		}
		out, ok := ks.Outside(rnd)
		if !ok || ks.Allows(out) == "" {
			t.Errorf("%+v: outside key %q, %v", ks, out, ok)
		}
	}
	if _, err := (&KeySpec{Pattern: "[A-Z]{4}"}).NewKey(rnd); err == nil {
		t.Error("a pattern no hex key or UUID fits got a key")
	}
}

// TestFill: the unique placeholders of each JSON type.
func TestFill(t *testing.T) {
	u := Unique{Text: "r-1", Int: 42, UUID: "u"}
	got := Fill(map[string]any{"s": "ref-{{unique}}", "n": "{{unique:int}}", "id": "{{unique:uuid}}", "l": []any{"{{unique}}"}}, u).(map[string]any)
	if got["s"] != "ref-r-1" || got["n"] != float64(42) || got["id"] != "u" || got["l"].([]any)[0] != "r-1" {
		t.Errorf("Fill: %v", got)
	}
	if p := (&CountRead{Path: "/c?r={{unique}}&n={{unique:int}}"}).PathFor(u); p != "/c?r=r-1&n=42" {
		t.Errorf("PathFor: %s", p)
	}
	a, b := NewUnique("run", 1, func() uint32 { return 7 }), NewUnique("run", 2, func() uint32 { return 7 })
	if a.Text == b.Text || a.Int == b.Int || a.Int > 1<<53 {
		t.Errorf("NewUnique: %+v %+v", a, b)
	}
}
