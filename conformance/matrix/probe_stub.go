//go:build !probe

// Until conformance/probe lands on main, the driver builds against this
// stand-in with the probe's API (/work/wt/brief-probe.md): Measure says the
// probe is not built in, so no row's agreement is claimed. With the probe
// package present: delete this file and the build constraint of probe_real.go.

package main

import (
	"context"
	"errors"
)

type (
	Table struct {
		Behaviours []Behaviour `json:"behaviours"`
	}
	Behaviour struct {
		ID        string        `json:"id"`
		Situation string        `json:"situation"`
		Observed  string        `json:"observed"`
		Evidence  []string      `json:"evidence"`
		Expect    []Expectation `json:"expect"`
	}
	Expectation struct {
		Variant  string   `json:"variant"`
		Rule     string   `json:"rule"`
		Verdicts []string `json:"verdicts"`
		Why      string   `json:"why"`
	}
	Disagreement struct{ Behaviour, Rule, Want, Got, Why string }
)

// errNoProbe: this build has no probe; the agreement column says so.
var errNoProbe = errors.New("the probe (conformance/probe) is not built into this driver")

func probeMeasure(ctx context.Context, baseURL string, targetFile []byte) (*Table, error) {
	return nil, errNoProbe
}

func probeAgree(t *Table, variant string, verdicts, blockedBy map[string]string) []Disagreement {
	return nil
}
