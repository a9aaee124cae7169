package spec

import (
	"net/url"
	"strings"
	"testing"
)

func TestCanonicalPath(t *testing.T) {
	for _, tc := range []struct {
		name, path, query, want string
		ok                      bool
	}{
		{"plain", "/intent", "", "/intent", true},
		{"sorted", "/claim", "namespace=x&goal=a", "/claim?goal=a&namespace=x", true},
		{"repeated kept and sorted by value", "/claim", "b=2&a=z&a=y", "/claim?a=y&a=z&b=2", true},
		{"blank value", "/claim", "goal=&namespace=x", "/claim?goal=&namespace=x", true},
		{"slash in value", "/claim", "goal=a/b", "/claim?goal=a%2Fb", true},
		{"encoded slash in segment", "/get/a%2Fb", "", "/get/a%2Fb", true},
		{"space plus", "/claim", "goal=a+b", "/claim?goal=a%20b", true},
		{"unreserved literal", "/get/a-b.c_d~e", "", "/get/a-b.c_d~e", true},
		{"lower-case escape normalised", "/get/%c3%a9", "", "/get/%C3%A9", true},
		{"bad escape", "/get/%zz", "", "", false},
		{"bad query escape", "/claim", "goal=%g", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := CanonicalPath(tc.path, tc.query)
			if ok != tc.ok || got != tc.want {
				t.Fatalf("CanonicalPath(%q, %q) = %q, %v; want %q, %v", tc.path, tc.query, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestSignVerify(t *testing.T) {
	msg := SigningString("post", "/intent", "1700000000", "n", []byte(`{"a":1}`))
	if !strings.HasPrefix(string(msg), "POST\n/intent\n1700000000\nn\n") {
		t.Fatalf("signing string %q", msg)
	}
	sig := Sign("k", msg)
	if sig != strings.ToLower(sig) || len(sig) != 64 {
		t.Fatalf("signature %q", sig)
	}
	if !VerifySignature("k", msg, sig) || VerifySignature("k2", msg, sig) || VerifySignature("k", append(msg, ' '), sig) {
		t.Fatal("verification accepts the wrong thing or rejects the right one")
	}
}

// FuzzCanonicalPath: never panics; the canonical form is a fixed point (its
// own canonical form); it contains only unreserved characters, '%XX', '/',
// and the '?', '&', '=' separators; and the query keeps every parameter.
func FuzzCanonicalPath(f *testing.F) {
	for _, s := range [][2]string{{"/intent", ""}, {"/claim", "namespace=x&goal=a"}, {"/get/a%2Fb", "x=1&x=&y"},
		{"/get/%zz", ""}, {"/a b", "k=v w"}, {"/", "&&="}, {"/claim", "a=%2F&a=%2f"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, path, query string) {
		cp, ok := CanonicalPath(path, query)
		if !ok {
			return
		}
		p, q, _ := strings.Cut(cp, "?")
		again, ok2 := CanonicalPath(p, q)
		if !ok2 || again != cp {
			t.Fatalf("not a fixed point: %q → %q → %q (%v)", path+"?"+query, cp, again, ok2)
		}
		for i := 0; i < len(cp); i++ {
			c := cp[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~%/?&=", c) >= 0) {
				t.Fatalf("character %q in %q", c, cp)
			}
		}
		if q != "" {
			n := 0
			for _, part := range strings.Split(query, "&") {
				if part != "" {
					n++
				}
			}
			if got := len(strings.Split(q, "&")); got != n {
				t.Fatalf("%d parameters, want %d: %q", got, n, cp)
			}
			if _, err := url.ParseQuery(q); err != nil {
				t.Fatalf("canonical query does not parse: %v", err)
			}
		}
	})
}
