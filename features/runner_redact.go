package features

import (
	"encoding/base64"
	"github.com/idscheck/idscheck/verdict"
	"maps"
	"slices"
	"strings"
)

// Redacted replaces a secret wherever a run would otherwise write it.
const Redacted = "REDACTED"

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
// evidence, reasons) with Redacted, so the run directory can be shared.
// Secrets shorter than 4 bytes are left alone: replacing them would shred
// the record.
func (r *RunResult) Redact(secrets []string) {
	var olds []string
	for _, s := range secrets {
		if len(s) >= 4 {
			olds = append(olds, s, Redacted)
		}
	}
	if len(olds) == 0 {
		return
	}
	rep := strings.NewReplacer(olds...)
	for i := range r.Exchanges {
		redactExchange(rep, &r.Exchanges[i])
	}
	for i := range r.Scenarios {
		s := &r.Scenarios[i]
		s.Reason = rep.Replace(s.Reason)
		redactEvidence(rep, &s.Evidence)
		for j := range s.Judgments {
			jd := &s.Judgments[j]
			jd.Reason = rep.Replace(jd.Reason)
			jd.Step = rep.Replace(jd.Step)
			jd.BlockedBy = rep.Replace(jd.BlockedBy)
			redactEvidence(rep, &jd.Evidence)
		}
	}
	for i := range r.Rules {
		rr := &r.Rules[i]
		rr.Reason = rep.Replace(rr.Reason)
		rr.BlockedBy = rep.Replace(rr.BlockedBy)
		for j := range rr.Evidence {
			redactEvidence(rep, &rr.Evidence[j])
		}
	}
}

func redactEvidence(rep *strings.Replacer, ev *verdict.Evidence) {
	ev.Expected = rep.Replace(ev.Expected)
	ev.Observed = rep.Replace(ev.Observed)
	for i := range ev.Exchanges {
		redactExchange(rep, &ev.Exchanges[i])
	}
}

// redactExchange rewrites ex in place; its header maps are replaced, never
// modified, because they may be shared with other copies of the exchange.
func redactExchange(rep *strings.Replacer, ex *verdict.Exchange) {
	ex.Path = rep.Replace(ex.Path)
	ex.ReqBody = rep.Replace(ex.ReqBody)
	ex.RespBody = rep.Replace(ex.RespBody)
	ex.Err = rep.Replace(ex.Err)
	ex.ReqHeaders = redactHeader(rep, ex.ReqHeaders)
	ex.RespHeaders = redactHeader(rep, ex.RespHeaders)
}

func redactHeader(rep *strings.Replacer, h map[string][]string) map[string][]string {
	if h == nil {
		return nil
	}
	out := make(map[string][]string, len(h))
	for k, vs := range h {
		n := make([]string, len(vs))
		for i, v := range vs {
			n[i] = rep.Replace(v)
		}
		out[k] = n
	}
	return out
}
