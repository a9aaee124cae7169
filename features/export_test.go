package features

import "testing"

func TestSameDocument(t *testing.T) {
	cases := []struct {
		a, b string
		same bool
	}{
		{`{"a":1,"b":[1,2]}`, `{ "b" : [1, 2], "a" : 1 }`, true},
		{`{"a":1}`, `{"a":1.0}`, true},
		{`{"a":1}`, `{"a":2}`, false},
		{`{"a":1}`, `{"a":1,"b":null}`, false},
		{`[1,2]`, `[2,1]`, false},
		{`{"a":"x"}`, `{"a":"x"} trailing`, false},
		{`not json`, `not json`, true},
		{`not json`, `not  json`, false},
		{`{"n":12345678901234567890}`, `{"n":12345678901234567891}`, false}, // beyond float64, still two values
		{`{"n":1e2}`, `{"n":100}`, true},
		{`{"n":"1"}`, `{"n":1}`, false},
	}
	for _, c := range cases {
		if got := SameDocument([]byte(c.a), []byte(c.b)); got != c.same {
			t.Errorf("SameDocument(%s, %s) = %v, want %v", c.a, c.b, got, c.same)
		}
	}
}
