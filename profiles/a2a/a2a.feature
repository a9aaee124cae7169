Feature: A2A idempotency policy (Covenant)
  A durable, explicitly leased queue: the duplicate-work risk is explicit,
  and automation never repeats what is unsafe (docs/a2a-binding.md).

  Scenario: the idempotency metadata is kept and returned; an empty key is refused
    When the sender enqueues an "idempotent" task with a key
    Then [A2A-TASK-metadata-returned] the task's status shows its idempotency metadata
    When the sender enqueues an "idempotent" task with an empty key
    Then [A2A-TASK-key-validated] the answer refuses it (the binding's 400 "invalid_idempotency_key")

  Scenario: a lease is explicit: a leased task is not leased again by itself
    Given an "idempotent" task with a key is leased
    Then [A2A-GATE-attempt-counter] the task's attempt is 1
    When the receiver asks for work again after 1 second
    Then [A2A-INTRO-explicit-lease] there is nothing to lease

  Scenario: retry-stale is disabled by default and reports what it would do
    Given an "idempotent" task with a key is leased
    When the operator runs retry-stale without enabling it
    Then [A2A-GATE-disabled-default] the task is "in_flight"
    And [A2A-GATE-disabled-default] the report skips the task as "disabled" and would requeue it

  Scenario: the gate never requeues an unsafe task
    Given an "unsafe" task with a key is leased
    When the operator runs retry-stale enabled
    Then [A2A-CLASS-unsafe-not-requeued] the task is "in_flight"
    And [A2A-GATE-observable] the report skips the task as "unsafe_duplicate_safety"

  Scenario: a task without metadata is unsafe to the gate
    Given a task without idempotency metadata is leased
    When the operator runs retry-stale enabled
    Then [A2A-CLASS-gate-idempotent-only] the task is "in_flight"

  Scenario: a task without a key is skipped and reported
    Given an "idempotent" task without a key is leased
    When the operator runs retry-stale enabled
    Then [A2A-GATE-skip-no-key] the task is "in_flight"
    And [A2A-GATE-skip-no-key] the report skips the task as "missing_idempotency"

  Scenario: an automated retry requeues the same task id, with its audit row and attempt counter
    Given an "idempotent" task with a key is leased
    When the operator runs retry-stale enabled
    Then [A2A-GATE-observable] the report requeues the task
    And [A2A-GATE-observable] the audit log has one "auto_requeue" row for the task, at attempt 1 if it says one
    When the receiver leases work
    Then [A2A-GATE-same-task-id] the lease is of the same task id
    And [A2A-GATE-attempt-counter] the leased attempt is 2

  Scenario: the maximum attempts bound
    Given an "idempotent" task with a key is leased
    When the operator runs retry-stale enabled with "max_attempts" 1
    Then [A2A-GATE-bounds] the task is "in_flight"
    And [A2A-GATE-bounds] the report skips the task as "max_attempts_reached"

  Scenario: the minimum lease age: only stale leases are requeued
    Given an "idempotent" task with a key is leased
    When the operator runs retry-stale enabled with "min_lease_age_ms" 3600000
    Then [A2A-INTRO-gate-scope] the task is "in_flight"
    And [A2A-GATE-bounds] the report skips the task as "lease_too_young"

  Scenario: the maximum requeues and the scan limit
    Given an "idempotent" task with a key is leased
    And another "idempotent" task with a key is leased
    When the operator runs retry-stale enabled with "max_requeues" 1
    Then [A2A-GATE-bounds] the report requeues at most 1 task
    When the operator runs retry-stale enabled with "scan_limit" 1
    Then [A2A-GATE-bounds] the report considered at most 1 task

  Scenario: a manual requeue states its posture, keeps the task id, and the gate never bypasses the classification
    Given an "unsafe" task with a key is leased
    When the operator requeues the task without a posture
    Then [A2A-REPAIR-posture] the answer refuses it (the binding's 400 "duplicate_risk_required")
    When the operator requeues the task with posture "operator_accepted"
    Then [A2A-TERMS-retry-same-id] the task is "queued"
    When the receiver leases work
    And the operator runs retry-stale enabled
    Then [A2A-REPAIR-no-bypass] the task is "in_flight"

  Scenario: a duplicate of finished idempotent work gets the cached result instead of a lease
    Given an "idempotent" task with a key is completed
    When the sender enqueues the same task again
    Then [A2A-CACHE-replay] the new task carries the replayed result
    When the receiver asks for work again after 0 seconds
    Then [A2A-CACHE-replay] there is nothing to lease
    When the sender enqueues the same task again with kind "another.kind"
    Then [A2A-CACHE-keyed] the new task is "queued"

  Scenario: the cache survives compaction
    Given an "idempotent" task with a key is completed
    When the sender drains its results
    And the operator compacts the queue
    Then [A2A-CACHE-compaction-keeps] the first task is gone
    When the sender enqueues the same task again
    Then [A2A-CACHE-compaction-keeps] the new task carries the replayed result

  Scenario: posting the same result twice leaves the mailbox intact
    Given a task without idempotency metadata is leased
    When the receiver posts the result
    And the receiver posts the same result again
    Then [A2A-RECV-result-twice] the answer to the repeated post leaves the mailbox as it was (the binding's 200)
    And [A2A-RECV-result-twice] the task is "result_pending"
    When the sender drains its results
    And the receiver posts the same result again
    Then [A2A-RECV-result-twice] the task is "resolved"
    And [A2A-RECV-result-twice] the sender has no results left to drain

  Scenario: the scheduler requeues only idempotent tasks, and says so in the audit log
    Given the target runs the retry scheduler
    When an "idempotent" and an "unsafe" stale lease meet a scheduler pass
    Then [A2A-SCHED-requeue-rows] the idempotent task has an "auto_requeue" row
    And [A2A-CLASS-unsafe-not-requeued] the unsafe task is still "in_flight"
    And [A2A-SCHED-scan-row] a scan summary was recorded after the requeue
