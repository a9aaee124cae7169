package pgtest

import (
	"context"
	"net"
	"os"
	"strconv"
	"testing"
	"time"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestRestartKeepsPortAndData: the cluster answers on its port before and
// after a restart (the port is closed in between).
func TestRestartKeepsPort(t *testing.T) {
	c := Shared(t)
	dial := func() error {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(c.Port), time.Second)
		if err == nil {
			conn.Close()
		}
		return err
	}
	if err := dial(); err != nil {
		t.Fatalf("cluster not listening: %v", err)
	}
	u1 := Database(t)
	u2 := Database(t)
	if u1 == u2 {
		t.Fatalf("two databases share a URL: %s", u1)
	}
	if err := c.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := dial(); err != nil {
		t.Fatalf("cluster not listening after restart: %v", err)
	}
}
