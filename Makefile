# idscheck — everything a fresh machine with Go needs is fetched from the Go
# module proxy, pinned in go.mod.
GO      ?= go
BIN     := bin/idscheck
OUT     ?= idscheck-report
SEED    ?= 1

.PHONY: all build run test bench mutants chaos chaos-mutants chaos-replicas fuzz clean matrix

all: build

# -buildvcs=true: the binary records the commit it was built from, and every
# report names it (result.json's tool.version), even where GOFLAGS says
# -buildvcs=false.
build:
	$(GO) build -buildvcs=true -o $(BIN) ./cmd/idscheck

# The main job on the embedded default: start each profile's bundled
# reference server in-process and certify it, one report per profile
# (idscheck-report/<profile>/index.html). Exits with the worst exit code.
# --strict: a broken SHOULD fails too (every ATP rule is a SHOULD).
# http-idempotency runs once per variant (ietf, t0, stripe).
PROFILES ?= intent ids atp http-idempotency a2a
run: build
	@code=0; for p in $(PROFILES); do \
	  ./$(BIN) run --profile $$p --strict --seed $(SEED) --out $(OUT)/$$p || { c=$$?; [ $$c -gt $$code ] && code=$$c; }; \
	  if [ $$p = http-idempotency ]; then for v in t0 stripe; do \
	    ./$(BIN) run --profile $$p --variant $$v --strict --seed $(SEED) --out $(OUT)/$$p-$$v || { c=$$?; [ $$c -gt $$code ] && code=$$c; }; \
	  done; fi; \
	done; exit $$code

# Every test: 9 min 01 s on 2 idle cores (a fresh clone, 2026-11-28) (the target is 10 minutes; the timeout
# leaves a loaded machine room to finish and give verdicts).
test:
	$(GO) vet ./...
	$(GO) test -count=1 -p 4 -parallel 3 -timeout 14m ./...

# Performance figures, printed; copy them into the README.
bench: build
	$(GO) run ./sut/intent/bench
	$(GO) run ./sut/ids/bench
	$(GO) run ./sut/atp/bench
	$(GO) test -run '^$$' -bench CheckScale -benchtime 1x ./checker
	$(GO) run ./cmd/storebench -idscheck $(BIN)

# The mutation kill matrix: every mutant of the reference server against the profile.
mutants: build
	@code=0; for p in $(PROFILES); do ./$(BIN) mutants --profile $$p --out idscheck-mutants/$$p || code=1; done; exit $$code

# 60 s of chaos against the bundled server with every fault kind, then every
# check; then the same for the IDS and ATP profiles (its bundled server, the effect
# sink hosted by idscheck and partitioned, storms of 200+ identical envelopes),
# http-idempotency and a2a (its receivers abandon leases, the gate and the
# scheduler requeue them).
chaos: build
	./$(BIN) chaos --duration 60s --seed $(SEED) --faults all --out idscheck-chaos
	./$(BIN) chaos --profile ids --duration 60s --seed $(SEED) --faults all --out idscheck-chaos-ids
	./$(BIN) chaos --profile atp --duration 60s --seed $(SEED) --faults all --out idscheck-chaos-atp
	./$(BIN) chaos --profile http-idempotency --duration 60s --seed $(SEED) --faults all --out idscheck-chaos-http-idempotency
	./$(BIN) chaos --profile a2a --duration 60s --seed $(SEED) --faults all --out idscheck-chaos-a2a

# Chaos against the mutants the checker must catch by name (each run exits 1).
# The IDS mutants must be caught with their duplicated effects named
# (IDS-V-exactly-once-effects) and the line that replays the run.
CHAOS_MUTANTS ?= lost-on-crash claim-non-atomic stale-token-accepted idem-check-racy
IDS_CHAOS_MUTANTS ?= no-reservation outbox-double-dispatch
ATP_CHAOS_MUTANTS ?= double-charge-on-retry no-reconciliation
HTTPIDEM_CHAOS_MUTANTS ?= no-reservation
chaos-mutants: build
	@mkdir -p idscheck-chaos
	@for m in $(CHAOS_MUTANTS); do \
	  ./$(BIN) chaos --duration 30s --seed $(SEED) --faults all --mutant $$m --out idscheck-chaos/$$m > idscheck-chaos/$$m.txt 2>&1; \
	  code=$$?; caught=$$(grep -A12 '^ANOMALIES' idscheck-chaos/$$m.txt | grep -E '^  [a-z-]+ +[0-9]+$$' | grep -v recovered | tr -s ' ' | tr '\n' ','); \
	  if [ $$code -eq 1 ]; then echo "$$m: caught (exit 1):$$caught"; else echo "$$m: SURVIVED (exit $$code)"; fail=1; fi; \
	done; \
	for m in $(IDS_CHAOS_MUTANTS); do \
	  out=idscheck-chaos/ids-$$m; \
	  ./$(BIN) chaos --profile ids --duration 30s --seed $(SEED) --faults all --mutant $$m --out $$out > $$out.txt 2>&1; \
	  code=$$?; caught=$$(grep -A12 '^ANOMALIES' $$out.txt | grep -E '^  IDS-[A-Za-z0-9.-]+ +[0-9]+$$' | tr -s ' ' | tr '\n' ','); \
	  if [ $$code -eq 1 ] && grep -q '^- IDS-V-exactly-once-effects .* took effect [0-9]* times' $$out.txt && grep -q '^replay: ' $$out.txt; then \
	    echo "ids $$m: caught (exit 1):$$caught"; else echo "ids $$m: SURVIVED (exit $$code)"; fail=1; fi; \
	done; \
	for m in $(ATP_CHAOS_MUTANTS); do \
	  out=idscheck-chaos/atp-$$m; \
	  ./$(BIN) chaos --profile atp --duration 30s --seed $(SEED) --faults all --mutant $$m --out $$out > $$out.txt 2>&1; \
	  code=$$?; caught=$$(grep -A12 '^ANOMALIES' $$out.txt | grep -E '^  ATP-[A-Za-z0-9.-]+ +[0-9]+$$' | tr -s ' ' | tr '\n' ','); \
	  if [ $$code -eq 1 ] && grep -q '^- ATP-' $$out.txt && grep -q '^replay: ' $$out.txt; then \
	    echo "atp $$m: caught (exit 1):$$caught"; else echo "atp $$m: SURVIVED (exit $$code)"; fail=1; fi; \
	done; \
	for m in $(HTTPIDEM_CHAOS_MUTANTS); do \
	  out=idscheck-chaos/http-idempotency-$$m; \
	  ./$(BIN) chaos --profile http-idempotency --duration 30s --seed $(SEED) --faults all --mutant $$m --out $$out > $$out.txt 2>&1; \
	  code=$$?; caught=$$(grep -A12 '^ANOMALIES' $$out.txt | grep -E '^  [A-Z0-9]+-[A-Za-z0-9.-]+ +[0-9]+$$' | tr -s ' ' | tr '\n' ','); \
	  if [ $$code -eq 1 ] && grep -q 'created [0-9]* things' $$out.txt && grep -q '^replay: ' $$out.txt; then \
	    echo "http-idempotency $$m: caught (exit 1):$$caught"; else echo "http-idempotency $$m: SURVIVED (exit $$code)"; fail=1; fi; \
	done; exit $${fail:-0}

# Past one machine: for each profile, three replicas of the bundled server over
# one PostgreSQL idscheck starts (--store local), chaos with replica kills, store
# partitions, lost store replies and store restarts: no anomaly (exit 0). Then
# each replica mutant on three replicas: caught (exit 1, the rule it breaks
# named), and on one replica over the same kind of store: no anomaly (exit 0).
REPLICA_MUTANTS ?= replica-local-cache check-then-insert
REPLICA_FAULTS  ?= replica-crash,store-partition,store-lost-reply,store-restart,storm
chaos-replicas: build
	@mkdir -p idscheck-chaos-replicas; for p in $(PROFILES); do \
	  out=idscheck-chaos-replicas/$$p; \
	  ./$(BIN) chaos --profile $$p --duration 20s --seed $(SEED) --replicas 3 --store local --store-proxy --faults $(REPLICA_FAULTS) --out $$out > $$out.txt 2>&1; \
	  code=$$?; ops=$$(grep -E '^chaos: [0-9]+ operations' $$out.txt | cut -d, -f1,3); \
	  if [ $$code -eq 0 ]; then echo "$$p on 3 replicas: no anomaly (exit 0; $$ops)"; else echo "$$p on 3 replicas: exit $$code"; fail=1; fi; \
	  for m in $(REPLICA_MUTANTS); do for n in 3 1; do \
	    out=idscheck-chaos-replicas/$$p-$$m-$$n; \
	    ./$(BIN) chaos --profile $$p --duration 10s --seed $(SEED) --replicas $$n --store local --faults storm --mutant $$m --out $$out > $$out.txt 2>&1; \
	    code=$$?; caught=$$(grep -A12 '^ANOMALIES' $$out.txt | grep -E '^  [A-Za-z0-9][A-Za-z0-9.-]+ +[0-9]+$$' | grep -v recovered | tr -s ' ' | tr '\n' ','); \
	    if [ $$n -eq 3 ]; then \
	      if [ $$code -eq 1 ]; then echo "  $$m on 3: caught (exit 1):$$caught"; else echo "  $$m on 3: SURVIVED (exit $$code)"; fail=1; fi; \
	    else \
	      if [ $$code -eq 0 ]; then echo "  $$m on 1: no anomaly (exit 0)"; else echo "  $$m on 1: exit $$code, want 0"; fail=1; fi; \
	    fi; \
	  done; done; \
	done; exit $${fail:-0}

# The conformance matrix (not part of test): installs, starts and certifies
# every implementation under conformance/ under each variant, probes each by
# plain HTTP, runs chaos against each, and writes docs/conformance/index.html
# and docs/conformance.md. One folder or row alone: make matrix ONLY=fiber-v2.
# Exits non-zero when a row could not be certified or the probe and the
# verdicts disagree. conformance/README.md says more.
ONLY ?=
MATRIX_FLAGS ?=
matrix:
	$(GO) run ./conformance/matrix $(if $(ONLY),--only $(ONLY)) $(MATRIX_FLAGS)

fuzz:
	$(GO) test ./sut/intent -run '^$$' -fuzz FuzzDecodeIntent -fuzztime 30s
	$(GO) test ./sut/intent -run '^$$' -fuzz FuzzHandler -fuzztime 30s
	$(GO) test ./sut/ids -run '^$$' -fuzz FuzzHandler -fuzztime 30s
	$(GO) test ./sut/atp -run '^$$' -fuzz FuzzHandler -fuzztime 30s
	$(GO) test ./sut/httpidem -run '^$$' -fuzz FuzzHandler -fuzztime 30s
	$(GO) test ./cmd/idscheck -run '^$$' -fuzz FuzzCanonicalPathAgrees -fuzztime 30s
	$(GO) test ./spec -run '^$$' -fuzz FuzzCanonicalPath -fuzztime 30s
	$(GO) test ./checker -run '^$$' -fuzz FuzzSimulatedBus -fuzztime 30s

clean:
	rm -rf bin $(OUT) idscheck-chaos idscheck-chaos-ids idscheck-chaos-atp idscheck-chaos-http-idempotency idscheck-chaos-a2a idscheck-chaos-replicas idscheck-mutants runs
