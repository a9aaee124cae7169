package faults_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"time"

	"github.com/idscheck/idscheck/faults"
)

// Example shows how the chaos command wires faults: a proxy in front of the
// target, a managed process for crashes, the explicit list narrowed by
// --faults, a schedule drawn from --seed, the timeline written to the run
// directory.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))

	// The harness owns the reference server as a child, with failpoints
	// armable over HTTP on a port of its own.
	fpAddr, _ := faults.FreeAddr()
	env := []string{faults.FailpointsHTTPEnv(fpAddr)}
	proc, err := faults.StartProcess(ctx, "idscheck serve --addr 127.0.0.1:8080 --db /tmp/run/sut.db", env,
		"http://127.0.0.1:8080/health", logger)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer proc.Stop()

	// Clients dial net.URL() instead of the target.
	net, err := faults.NewNetwork("127.0.0.1:8080", logger)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer net.Close()

	list := faults.All(faults.Config{
		Network:       net,
		Process:       proc,
		StormDo:       func(ctx context.Context, i int) { /* send the same request */ },
		Failpoints:    map[string]string{"github.com/idscheck/idscheck/sut/intent/after-commit-before-reply": `return("exit")`},
		FailpointAddr: fpAddr,
	})
	tokens, err := faults.ParseKinds("net,storm,crash,failpoint") // --faults
	if err != nil {
		fmt.Println(err)
		return
	}
	usable, unavailable := faults.Usable(faults.Select(list, tokens))
	for name, why := range unavailable {
		fmt.Println("N/A:", name, why) // rules needing it are N/A
	}

	rnd := rand.New(rand.NewPCG(1, 0)) // from --seed
	schedule := faults.NewSchedule(rnd, usable, 30*time.Second, faults.ScheduleOptions{})
	var timeline faults.Timeline
	if err := faults.Run(ctx, schedule, usable, &timeline); err != nil {
		fmt.Println(err)
	}
	timeline.WriteJSON(os.Stdout) // faults.json in the run directory
}

// ExampleHoldable shows a step definition holding a fault between two steps.
func ExampleHoldable() {
	net, err := faults.NewNetwork("127.0.0.1:8080", nil)
	if err != nil {
		return
	}
	defer net.Close()
	var timeline faults.Timeline
	end, err := (&faults.LostResponse{Network: net}).Begin(context.Background(), nil)
	if err != nil {
		return
	}
	// … send the request whose response is lost: the client records an unknown outcome …
	in, _ := end()
	timeline.Record(in)
}
