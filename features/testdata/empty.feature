Feature: a scenario with no steps

  @T-1-health
  Scenario: nothing to do
