Feature: a step that panics

  @T-2-echo
  Scenario: the harness has a bug
    When the client posts a random key to "/echo"
    And a step panics
