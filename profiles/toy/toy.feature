Feature: the toy store
  A protocol of two rules, to show what a profile is made of.

  Scenario: an unknown key is not found; a stored value reads back
    When the client reads "k"
    Then [TOY-2-not-found] the status is 404
    When the client stores a random value under "k"
    And the client reads "k"
    Then [TOY-1-read-back] the value read is the value stored
