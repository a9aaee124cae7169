package main

import (
	"context"

	"github.com/idscheck/idscheck/conformance/probe"
)

type (
	Table        = probe.Table
	Behaviour    = probe.Behaviour
	Expectation  = probe.Expectation
	Disagreement = probe.Disagreement
)

// probeMeasure runs the independent plain-HTTP probes against a fresh start.
func probeMeasure(ctx context.Context, baseURL string, targetFile []byte) (*Table, error) {
	return probe.Measure(ctx, baseURL, targetFile)
}

// probeAgree lists the expectations of t that a run's verdicts contradict.
func probeAgree(t *Table, variant string, verdicts, blockedBy map[string]string) []Disagreement {
	return probe.Agree(t, variant, verdicts, blockedBy)
}
