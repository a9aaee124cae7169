Feature: a scenario with no steps
  A scenario with no steps judges nothing; the rule its tag names is what
  it would have judged, and stays undecided.

  @T-1-health
  Scenario: nothing to do
