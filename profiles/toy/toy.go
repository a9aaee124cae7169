// Package toy is the smallest profile there is: two rules, one scenario, one
// checker model, a bundled handler and a mutant. It shows what a profile is
// made of, and its test runs it end to end through the registry; idscheck
// does not ship it (it is not in profiles' builtin list).
package toy

import (
	"context"
	"embed"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/cucumber/godog"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/harness"
	"github.com/idscheck/idscheck/spec"
	"github.com/idscheck/idscheck/verdict"
)

//go:embed toy.feature
var feature embed.FS

// Name is the profile's name.
const Name spec.Profile = "toy"

// MutantStaleRead is the toy handler's deliberate bug: reads return nothing.
const MutantStaleRead = "stale-read"

// Profile returns the toy profile.
func Profile() harness.Profile {
	return harness.Profile{
		Name:  Name,
		Title: "a toy key-value store",
		Rules: func() []spec.Rule {
			return []spec.Rule{
				{ID: "TOY-1-read-back", Profile: Name, Section: "1", Level: spec.Must, Quote: "A read MUST return the value last stored.", Explanation: "a stored value is lost"},
				{ID: "TOY-2-not-found", Profile: Name, Section: "2", Level: spec.Must, Quote: "A read of an unknown key MUST answer 404.", Explanation: "clients cannot tell absence from emptiness"},
			}
		},
		Suite:   &features.Suite{FS: feature, Paths: []string{"toy.feature"}, Steps: steps},
		Models:  []checker.Model{Register{}},
		Bundled: bundled,
		Mutants: []harness.Mutant{{Name: MutantStaleRead, Description: "reads return an empty value", Breaks: "TOY-1-read-back"}},
		Serve: &harness.ServeCommand{Flags: serveFlags, Child: func(func() string, any) harness.ServeChild {
			return harness.ServeChild{Target: features.Target{APIKey: "toy"}}
		}},
		Chaos:     Chaos(),
		Preflight: preflight,
	}
}

// steps are the toy's step definitions.
func steps(sc *godog.ScenarioContext, env *features.Env) {
	var status int
	var stored, read string
	c, err := env.Client("toy")
	if err != nil {
		panic(err)
	}
	features.Register(sc, env, []features.StepDef{
		{Pattern: `^the client stores a random value under "(\w+)"$`, Kind: features.Action, Fn: func(ctx context.Context, key string) error {
			stored = fmt.Sprintf("v-%016x", env.Rand.Uint64())
			r, err := c.Do(ctx, client.Request{Method: http.MethodPut, Path: "/items/" + key, Body: []byte(stored)})
			if err != nil {
				return err
			}
			if r.Status != http.StatusCreated {
				return features.Mismatch("201", fmt.Sprint(r.Status))
			}
			return nil
		}},
		{Pattern: `^the client reads "(\w+)"$`, Kind: features.Action, Fn: func(ctx context.Context, key string) error {
			r, err := c.Do(ctx, client.Request{Method: http.MethodGet, Path: "/items/" + key})
			if err != nil {
				return err
			}
			status, read = r.Status, string(r.Body)
			return nil
		}},
		{Pattern: `^the value read is the value stored$`, Kind: features.Check, Fn: func() error {
			if read != stored {
				return features.Mismatch(stored, read)
			}
			return nil
		}},
		{Pattern: `^the status is (\d+)$`, Kind: features.Gate, Fn: func(want int) error {
			if status != want {
				return features.Mismatch(fmt.Sprint(want), fmt.Sprint(status))
			}
			return nil
		}},
	})
}

// bundled is the toy's reference handler: a map behind a mutex.
func bundled(_ context.Context, c harness.BundledConfig) (*harness.Bundled, error) {
	var mu sync.Mutex
	items := map[string]string{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := strings.CutPrefix(r.URL.Path, "/items/")
		switch {
		case r.URL.Path == "/health":
			io.WriteString(w, `{"ok":true}`)
		case !ok:
			http.NotFound(w, r)
		case r.Method == http.MethodPut:
			b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<16))
			mu.Lock()
			items[key] = string(b)
			mu.Unlock()
			w.WriteHeader(http.StatusCreated)
		default:
			mu.Lock()
			v, found := items[key]
			mu.Unlock()
			if !found {
				http.NotFound(w, r)
				return
			}
			if c.Mutant == MutantStaleRead {
				v = ""
			}
			io.WriteString(w, v)
		}
	})
	return &harness.Bundled{Handler: h, Target: features.Target{APIKey: "toy"}, Close: func() error { return nil }}, nil
}

// History turns a run's exchanges into operations for the toy's model: a
// PUT writes Input.Body, a GET reads Output.State.
func History(exs []verdict.Exchange) checker.History {
	var h checker.History
	for i, ex := range exs {
		key, ok := strings.CutPrefix(ex.Path, "/items/")
		if !ok {
			continue
		}
		op := checker.Operation{Key: key, ClientID: 0, Call: int64(2 * i), Return: int64(2*i + 1), Outcome: ex.Outcome}
		op.Output.Status = ex.Status
		if ex.Method == http.MethodPut {
			op.Kind, op.Input.Body = checker.OpPublish, ex.ReqBody
		} else {
			op.Kind, op.Output.State = checker.OpStatus, ex.RespBody
			if ex.Status == http.StatusNotFound {
				op.Output.State = checker.StateGone
			}
		}
		h.Ops = append(h.Ops, op)
	}
	return h
}

// Register is the toy's model: each key is a register; a read returns the
// last value written, or gone before any write.
type Register struct{}

func (Register) Name() string { return "register" }

func (Register) Partition(op *checker.Operation) (string, bool) { return op.Key, op.Key != "" }

func (Register) Porcupine() porcupine.Model {
	return porcupine.Model{
		Init: func() any { return checker.StateGone },
		Step: func(state, in, _ any) (bool, any) {
			op := in.(*checker.Operation)
			s := state.(string)
			switch {
			case op.Effective() == verdict.OutcomeUnknown:
				return true, s
			case op.Kind == checker.OpPublish:
				return true, op.Input.Body
			default:
				return op.Output.State == s, s
			}
		},
		Equal: func(a, b any) bool { return a == b },
	}
}

func (Register) Checks() []checker.NamedCheck { return nil }

// serveFlags is the toy's serve command: no flags of its own; its handler
// until ctx ends.
func serveFlags(*flag.FlagSet) func(ctx context.Context, c harness.ServeConfig) error {
	return func(ctx context.Context, c harness.ServeConfig) error {
		b, err := bundled(ctx, harness.BundledConfig{Mutant: c.Mutant, Logger: c.Logger})
		if err != nil {
			return err
		}
		return harness.ServeHandler(ctx, c, string(Name), b.Handler, b.Close)
	}
}

// preflight: GET /health answers {"ok":true}, and a read with the API key
// is not refused.
func preflight(ctx context.Context, t features.Target, timeout time.Duration) error {
	c, err := client.New(t.BaseURL, client.Options{APIKey: t.APIKey, Timeout: timeout})
	if err != nil {
		return err
	}
	r, err := c.Do(ctx, client.Request{Method: http.MethodGet, Path: "/health"})
	if err != nil {
		return err
	}
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"ok":true`) {
		return &harness.NotProtocolError{Call: "GET /health", Answer: fmt.Sprintf("%d %.60q", r.Status, r.Body), Hint: `a toy store answers {"ok":true}`}
	}
	r, err = c.Do(ctx, client.Request{Method: http.MethodGet, Path: "/items/preflight"})
	if err != nil {
		return err
	}
	if r.Status == http.StatusUnauthorized || r.Status == http.StatusForbidden {
		return &harness.CredentialError{Credential: "the API key", Call: "GET /items/preflight", Answer: fmt.Sprintf("%d %.60q", r.Status, r.Body)}
	}
	return nil
}
