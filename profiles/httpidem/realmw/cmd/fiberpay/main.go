// Command fiberpay serves the payments endpoint of package realmw behind
// Fiber's idempotency middleware (v2 or v3), for certifying it with
// idscheck's http-idempotency profile (docs/http-idempotency.md, "Worked
// example: certifying a third-party middleware").
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/idscheck/idscheck/profiles/httpidem/realmw"
)

func main() {
	fs := flag.NewFlagSet("fiberpay", flag.ContinueOnError)
	version := fs.String("fiber", "v2", "the Fiber version whose middleware/idempotency guards the endpoint: "+strings.Join(realmw.Versions(), " or "))
	listen := fs.String("listen", "127.0.0.1:8090", "the address to serve on")
	redis := fs.String("redis", "", "keep the middleware's stored responses in Redis at this URL (redis://127.0.0.1:6379) through github.com/gofiber/storage/redis/v3; default: the middleware's in-memory storage")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: fiberpay [--fiber v2|v3] [--listen 127.0.0.1:8090] [--redis redis://127.0.0.1:6379]

Serves a tiny payments endpoint behind Fiber's idempotency middleware
(KeyHeader "Idempotency-Key", every other setting at its default: a key
must be 36 characters long, keys live 30 minutes), until interrupted:

  POST /v1/payments             {"reference": "r", "amount": 1000, "delay_ms": 0}
                                201 {"id": "pay_1", "reference": "r", "amount": 1000};
                                400 for an amount <= 0 (nothing created);
                                delay_ms (at most 5000) makes the handler sleep first
  GET  /v1/payments?reference=R {"count": N}, the payments with reference R
  GET  /v1/payments/count       {"count": N}, every payment
  GET  /health                  200 {"status": "ok"}

flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			os.Exit(0)
		}
		os.Exit(2)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "fiberpay: unexpected argument %q\n", fs.Arg(0))
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fiberpay: %v\n", err)
		os.Exit(1)
	}
	srv, err := realmw.Start(*version, ln, realmw.Options{RedisURL: *redis})
	if err != nil {
		ln.Close()
		fmt.Fprintf(os.Stderr, "fiberpay: %v\n", err)
		os.Exit(2)
	}
	fmt.Printf("fiberpay: Fiber %s's idempotency middleware on %s (POST /v1/payments)\n", *version, srv.URL)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	<-stop
	if err := srv.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "fiberpay: %v\n", err)
		os.Exit(1)
	}
}
