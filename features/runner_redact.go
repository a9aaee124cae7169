package features

import (
	"encoding/base64"
	"github.com/idscheck/idscheck/redact"
	"github.com/idscheck/idscheck/verdict"
	"maps"
	"slices"
)

// Redacted replaces a secret wherever a run would otherwise write it.
const Redacted = redact.Redacted

// Secrets returns the target's credentials (the API key and every named
// credential) as they can appear on the wire: each secret itself and its
// HTTP Basic form for user admin (scenarios try every credential as a Basic
// password).
func (t Target) Secrets() []string {
	var out []string
	secrets := []string{t.APIKey}
	for _, name := range slices.Sorted(maps.Keys(t.Credentials)) {
		secrets = append(secrets, t.Credentials[name])
	}
	for _, s := range secrets {
		if s != "" {
			out = append(out, s, base64.StdEncoding.EncodeToString([]byte("admin:"+s)))
		}
	}
	return out
}

// Redact replaces every occurrence of each secret in the result (exchanges,
// evidence, reasons) with Redacted, so the run directory can be shared: a
// secret of any length (redact.Redactor), and the whole value of every
// credential header.
func (r *RunResult) Redact(secrets []string) {
	rep := redact.NewRedactor(secrets...)
	for i := range r.Exchanges {
		redactExchange(rep, &r.Exchanges[i])
	}
	for i := range r.Scenarios {
		s := &r.Scenarios[i]
		s.Reason = rep.String(s.Reason)
		redactEvidence(rep, &s.Evidence)
		for j := range s.Judgments {
			jd := &s.Judgments[j]
			jd.Reason = rep.String(jd.Reason)
			jd.Step = rep.String(jd.Step)
			jd.BlockedBy = rep.String(jd.BlockedBy)
			jd.BlockedStep = rep.String(jd.BlockedStep)
			jd.BlockedIn = rep.String(jd.BlockedIn)
			redactEvidence(rep, &jd.Evidence)
		}
	}
	for i := range r.Rules {
		rr := &r.Rules[i]
		rr.Reason = rep.String(rr.Reason)
		rr.BlockedBy = rep.String(rr.BlockedBy)
		rr.BlockedStep = rep.String(rr.BlockedStep)
		rr.BlockedIn = rep.String(rr.BlockedIn)
		rr.Scenarios = mapStrings(rr.Scenarios, rep.String)
		for j := range rr.Evidence {
			redactEvidence(rep, &rr.Evidence[j])
		}
	}
}

func redactEvidence(rep *redact.Redactor, ev *verdict.Evidence) {
	ev.Scenario = rep.String(ev.Scenario)
	ev.Step = rep.String(ev.Step)
	ev.Expected = rep.String(ev.Expected)
	ev.Observed = rep.String(ev.Observed)
	for i := range ev.Exchanges {
		redactExchange(rep, &ev.Exchanges[i])
	}
}

// redactExchange rewrites ex in place; its header maps are replaced, never
// modified, because they may be shared with other copies of the exchange.
func redactExchange(rep *redact.Redactor, ex *verdict.Exchange) {
	ex.Path = rep.String(ex.Path)
	ex.ReqBody = rep.String(ex.ReqBody)
	ex.RespBody = rep.String(ex.RespBody)
	ex.Err = rep.String(ex.Err)
	ex.ReqHeaders = rep.Header(ex.ReqHeaders)
	ex.RespHeaders = rep.Header(ex.RespHeaders)
}

func mapStrings(ss []string, f func(string) string) []string {
	if ss == nil {
		return nil
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = f(s)
	}
	return out
}
