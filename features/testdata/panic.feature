Feature: a step that panics

  Scenario: the harness has a bug
    When the client posts a random key to "/echo"
    And a step panics
    Then [T-2-echo] the status is 200
