# idscheck — everything a fresh machine with Go needs is fetched from the Go
# module proxy, pinned in go.mod.
GO      ?= go
BIN     := bin/idscheck
OUT     ?= idscheck-report
SEED    ?= 1

.PHONY: all build run test bench mutants chaos fuzz clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/idscheck

# The main job on the embedded default: start the bundled reference server
# in-process and certify it. Prints where the report is.
run: build
	./$(BIN) run --seed $(SEED) --out $(OUT)

# Every test. Stays under 10 minutes on 2 cores.
test:
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 9m ./...

# Performance figures, printed; copy them into the README.
bench: build
	$(GO) run ./sut/bench
	$(GO) test -run '^$$' -bench CheckScale -benchtime 1x ./checker

# The mutation kill matrix: every mutant of the reference server against the profile.
mutants: build
	./$(BIN) mutants

# 60 s of chaos against the bundled server with every fault kind, then every check.
chaos: build
	./$(BIN) chaos --duration 60s --seed $(SEED) --faults all --out idscheck-chaos

fuzz:
	$(GO) test ./sut -run '^$$' -fuzz FuzzDecodeIntent -fuzztime 30s
	$(GO) test ./spec -run '^$$' -fuzz FuzzCanonicalPath -fuzztime 30s
	$(GO) test ./checker -run '^$$' -fuzz FuzzSimulatedBus -fuzztime 30s

clean:
	rm -rf bin $(OUT) idscheck-chaos runs
