package harness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// ServeHandler serves a bundled server's handler on c.Addr until ctx ends:
// it calls c.Ready with its base URL (the address chosen when the port is
// 0), and on ctx's end stops accepting,
// finishes the requests in flight (at most 15 s) and calls closeFn, which
// commits what the server has queued. name is for the log.
func ServeHandler(ctx context.Context, c ServeConfig, name string, h http.Handler, closeFn func() error) error {
	logger := c.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		closeFn()
		return fmt.Errorf("listen: %w", err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		IdleTimeout: 120 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	base := "http://" + ln.Addr().String()
	if c.Ready != nil {
		c.Ready(base)
	}
	logger.Info("serving "+name, "addr", ln.Addr().String(), "db", c.DB, "mutant", c.Mutant)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	var serveErr error
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			serveErr = fmt.Errorf("serve: %w", err)
		}
	case <-ctx.Done():
		logger.Info("shutting down: finishing in-flight requests")
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		if err := hs.Shutdown(sctx); err != nil {
			logger.Warn("shutdown", "err", err)
		}
		cancel()
	}
	if err := closeFn(); err != nil {
		return errors.Join(serveErr, fmt.Errorf("close: %w", err))
	}
	logger.Info("stopped")
	return serveErr
}
