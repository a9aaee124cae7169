package realmw

import (
	"net"

	fiberv2 "github.com/gofiber/fiber/v2"
	idemv2 "github.com/gofiber/fiber/v2/middleware/idempotency"
)

// FiberV2 is the payments endpoint behind github.com/gofiber/fiber/v2's
// middleware/idempotency (KeyHeader "Idempotency-Key", Lifetime from opt,
// the rest default: a key must be 36 characters long).
func FiberV2(opt Options) *fiberv2.App {
	app := fiberv2.New(fiberv2.Config{DisableStartupMessage: true})
	cfg := idemv2.Config{KeyHeader: Header, Lifetime: opt.Lifetime}
	if opt.store != nil {
		cfg.Storage = opt.store
	}
	app.Use(idemv2.New(cfg))
	p := newPayments()
	app.Post("/v1/payments", func(c *fiberv2.Ctx) error {
		st, doc := p.create(c.Body())
		return c.Status(st).JSON(doc)
	})
	// GET /health: idscheck run waits for it to answer 200.
	app.Get("/health", func(c *fiberv2.Ctx) error {
		return c.JSON(map[string]string{"status": "ok"})
	})
	app.Get("/v1/payments/count", func(c *fiberv2.Ctx) error {
		return c.JSON(p.count("", true))
	})
	app.Get("/v1/payments", func(c *fiberv2.Ctx) error {
		return c.JSON(p.count(c.Query("reference"), false))
	})
	return app
}

// StartFiberV2 serves FiberV2(opt) on ln until Close.
func StartFiberV2(ln net.Listener, opt Options) *Server {
	app := FiberV2(opt)
	s := &Server{URL: "http://" + ln.Addr().String(), shutdown: app.ShutdownWithTimeout, done: make(chan error, 1)}
	go func() { s.done <- app.Listener(ln) }()
	return s
}
