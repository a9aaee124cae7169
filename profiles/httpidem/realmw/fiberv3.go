package realmw

import (
	"net"

	fiberv3 "github.com/gofiber/fiber/v3"
	idemv3 "github.com/gofiber/fiber/v3/middleware/idempotency"
)

// FiberV3 is the payments endpoint behind github.com/gofiber/fiber/v3's
// middleware/idempotency (KeyHeader "Idempotency-Key", Lifetime from opt,
// the rest default: a key must be 36 characters long).
func FiberV3(opt Options) *fiberv3.App {
	app := fiberv3.New()
	cfg := idemv3.Config{KeyHeader: Header, Lifetime: opt.Lifetime}
	if opt.store != nil {
		cfg.Storage = opt.store
	}
	app.Use(idemv3.New(cfg))
	p := newPayments()
	app.Post("/v1/payments", func(c fiberv3.Ctx) error {
		st, doc := p.create(c.Body())
		return c.Status(st).JSON(doc)
	})
	// GET /health: idscheck run waits for it to answer 200.
	app.Get("/health", func(c fiberv3.Ctx) error {
		return c.JSON(map[string]string{"status": "ok"})
	})
	app.Get("/v1/payments/count", func(c fiberv3.Ctx) error {
		return c.JSON(p.count("", true))
	})
	app.Get("/v1/payments", func(c fiberv3.Ctx) error {
		return c.JSON(p.count(c.Query("reference"), false))
	})
	return app
}

// StartFiberV3 serves FiberV3(opt) on ln until Close.
func StartFiberV3(ln net.Listener, opt Options) *Server {
	app := FiberV3(opt)
	s := &Server{URL: "http://" + ln.Addr().String(), shutdown: app.ShutdownWithTimeout, done: make(chan error, 1)}
	go func() { s.done <- app.Listener(ln, fiberv3.ListenConfig{DisableStartupMessage: true}) }()
	return s
}
