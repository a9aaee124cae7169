package intent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/harness"
)

// preflight proves the target is an Intent bus and its credentials work:
// GET /health answers a JSON object (§7.1: "No authentication required.
// Response 200 OK: { ... }"); a status read of an id no intent has, with
// the API key, is refused: not with a 401 or 403 (the key works, §5.1) and
// not with a 2xx (§11's error codes: "not_found | 404 | Intent or resource
// not found"; §7.8: "Same access control as /result"), any other 4xx
// being a refusal too; and each admin credential given reads the
// dead-letter list (§8.6) and the metrics token /metrics (§9) without a
// 401 or 403. Every call is a read: a bus keeps nothing of it.
func preflight(ctx context.Context, t features.Target, timeout time.Duration) error {
	opt := client.Options{Name: "preflight", APIKey: t.APIKey, Timeout: timeout}
	if d, _ := t.Described.(Declared); d.RequireSignatures {
		opt.Sign = SignRequests(nil)
	}
	c, err := client.New(t.BaseURL, opt)
	if err != nil {
		return err
	}
	r, err := c.Do(ctx, client.Request{Method: http.MethodGet, Path: PathHealth, NoAPIKey: true})
	if err != nil {
		return fmt.Errorf("GET %s: %w", PathHealth, err)
	}
	var health map[string]any
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &health) != nil || health == nil {
		return &harness.NotProtocolError{Call: "GET " + PathHealth, Answer: harness.Answer(r),
			Hint: "an Intent bus answers 200 with a JSON object (§7.1): is this an Intent bus?"}
	}
	// An id of the form the bus gives (hex), drawn here: no intent has it.
	credential := ""
	if t.APIKey != "" {
		credential = "the API key"
	}
	if err := harness.ProbeRefused(ctx, c, credential, client.Request{Method: http.MethodGet, Path: PathStatus + client.NewNonce()},
		"an intent id no one published",
		`an Intent bus answers 404 for an intent it does not have (§11: "not_found | 404 | Intent or resource not found"): is this an Intent bus?`); err != nil {
		return err
	}
	admin := func(name, what string, h http.Header, path string) error {
		if t.Credentials[name] == "" {
			return nil
		}
		_, err := harness.ProbeCredential(ctx, c, what+" ("+name+")", client.Request{Method: http.MethodGet, Path: path, Header: h, NoAPIKey: true})
		return err
	}
	basic := http.Header{}
	basic.Set("Authorization", basicAuth("admin", t.Credentials[CredentialDashboardPassword]))
	for _, p := range []struct {
		name, what, path string
		h                http.Header
	}{
		{CredentialAdminToken, "the admin token", PathDead, http.Header{"X-Admin-Token": {t.Credentials[CredentialAdminToken]}}},
		{CredentialDashboardPassword, "the dashboard password", PathDead, basic},
		{CredentialMetricsToken, "the metrics token", PathMetrics, http.Header{"Authorization": {"Bearer " + t.Credentials[CredentialMetricsToken]}}},
	} {
		if err := admin(p.name, p.what, p.h, p.path); err != nil {
			return err
		}
	}
	return nil
}
