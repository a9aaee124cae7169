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
	} {
		if err := e.Validate(); err == nil {
			t.Errorf("%s: %+v validates", name, e)
		}
	}
}
