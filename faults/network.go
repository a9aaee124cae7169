package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
	zlog "github.com/rs/zerolog/log"
)

// Network is a toxiproxy proxy embedded in this process, listening on
// 127.0.0.1 in front of one upstream (the target). The harness's clients dial
// Addr instead of the target; the network faults (Latency, Bandwidth, Slicer,
// ResetPeer, Blackhole, LostResponse, Partition) act on it. Between faults the
// proxy forwards bytes unchanged. A Network is safe for concurrent use;
// toxic faults may overlap, partitions nest (the proxy heals when the last
// one ends).
type Network struct {
	upstream string
	logger   *slog.Logger
	server   *toxiproxy.ApiServer
	proxy    *toxiproxy.Proxy
	addr     string

	mu         sync.Mutex
	seq        int // names toxics uniquely
	partitions int // active partitions; the proxy is stopped while > 0
	closed     bool
}

// NewNetwork starts a proxy on 127.0.0.1 (a free port) in front of upstream
// (host:port). toxiproxy logs nothing: it gets a disabled zerolog logger.
func NewNetwork(upstream string, logger *slog.Logger) (*Network, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if _, _, err := net.SplitHostPort(upstream); err != nil {
		return nil, fmt.Errorf("network: upstream %q: %w", upstream, err)
	}
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "target", "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("network: start proxy: %w", err)
	}
	n := &Network{upstream: upstream, logger: logger, server: srv, proxy: p, addr: p.Listen}
	logger.Info("network proxy started", "addr", n.addr, "upstream", upstream)
	return n, nil
}

// SilenceToxiproxy sets zerolog's global logger, which toxiproxy's bandwidth
// toxic writes warnings to, to a no-op logger. It changes global state: only
// main (or a test's TestMain) should call it, once.
func SilenceToxiproxy() {
	zlog.Logger = zerolog.Nop()
}

// Addr is the 127.0.0.1:port the harness's clients dial. It stays the same
// across partitions.
func (n *Network) Addr() string { return n.addr }

// URL is "http://" + Addr: the base URL clients use instead of the target's.
func (n *Network) URL() string { return "http://" + n.addr }

// Upstream is the target's host:port.
func (n *Network) Upstream() string { return n.upstream }

// Close stops the proxy and closes every connection through it.
func (n *Network) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	n.proxy.Stop()
	n.logger.Info("network proxy stopped", "addr", n.addr)
	return nil
}

// toxicSpec is a toxic as toxiproxy's AddToxicJson reads it.
type toxicSpec struct {
	Name       string  `json:"name"`
	Type       string  `json:"type"`
	Stream     string  `json:"stream"`
	Toxicity   float32 `json:"toxicity"`
	Attributes any     `json:"attributes"`
}

// beginToxic adds one toxic to every current and future connection and
// returns the function that removes it. stream is "upstream" (client to
// target) or "downstream" (target to client).
func (n *Network) beginToxic(fault string, typ, stream string, attrs any, params map[string]string) (func() (Injection, error), error) {
	if stream == "" {
		stream = "downstream"
	}
	if stream != "upstream" && stream != "downstream" {
		return nil, fmt.Errorf("%s: stream %q: want upstream or downstream", fault, stream)
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, fmt.Errorf("%s: network closed", fault)
	}
	n.seq++
	name := fault + "_" + strconv.Itoa(n.seq)
	n.mu.Unlock()

	b, err := json.Marshal(toxicSpec{Name: name, Type: typ, Stream: stream, Toxicity: 1, Attributes: attrs})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fault, err)
	}
	if _, err := n.proxy.Toxics.AddToxicJson(bytes.NewReader(b)); err != nil {
		return nil, fmt.Errorf("%s: add toxic: %w", fault, err)
	}
	in := Injection{Fault: fault, Kind: KindNet, Params: cloneParams(params), Start: time.Now()}
	if in.Params == nil {
		in.Params = map[string]string{}
	}
	in.Params["stream"] = stream
	n.logger.Info("fault begins", "fault", fault, "params", in.Params)

	var once sync.Once
	var rerr error
	return func() (Injection, error) {
		once.Do(func() {
			// A disabled zerolog logger in the context: RemoveToxic logs through it.
			err := n.proxy.Toxics.RemoveToxic(zerolog.Nop().WithContext(context.Background()), name)
			in.End = time.Now()
			if err != nil {
				rerr = fmt.Errorf("%s: remove toxic: %w", fault, err)
				in.Err = rerr.Error()
			}
			n.logger.Info("fault ends", "fault", fault, "duration", in.Duration())
		})
		return in, rerr
	}, nil
}

// beginPartition stops the proxy: new connections are refused, open ones are
// closed. The returned function heals (starts the proxy again on the same
// address) once no other partition is active.
func (n *Network) beginPartition(fault string) (func() (Injection, error), error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, fmt.Errorf("%s: network closed", fault)
	}
	n.partitions++
	if n.partitions == 1 {
		n.proxy.Stop()
	}
	in := Injection{Fault: fault, Kind: KindNet, Params: map[string]string{"addr": n.addr}, Start: time.Now()}
	n.logger.Info("fault begins", "fault", fault, "addr", n.addr)

	var once sync.Once
	var rerr error
	return func() (Injection, error) {
		once.Do(func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			n.partitions--
			if n.partitions == 0 && !n.closed {
				rerr = n.heal(fault)
			}
			in.End = time.Now()
			if rerr != nil {
				in.Err = rerr.Error()
			}
			n.logger.Info("fault ends", "fault", fault, "duration", in.Duration())
		})
		return in, rerr
	}, nil
}

// healAttempts bounds the retries of a heal whose port is briefly unavailable.
const healAttempts = 20

// heal starts the stopped proxy again on its address; n.mu is held.
func (n *Network) heal(fault string) error {
	var err error
	for i := range healAttempts {
		err = n.proxy.Start()
		if err == nil || errors.Is(err, toxiproxy.ErrProxyAlreadyStarted) {
			return nil
		}
		n.logger.Warn("heal: proxy did not start, retrying", "fault", fault, "attempt", i+1, "err", err)
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s: heal: %w", fault, err)
}

// networkAvailable is the Available check shared by every network fault.
func networkAvailable(name string, n *Network) error {
	if n == nil {
		return notAvailable(name, "no network proxy in front of the target")
	}
	return nil
}

// ms renders a duration as whole milliseconds, as toxiproxy wants them.
func ms(d time.Duration) int64 { return d.Milliseconds() }

// msParam renders a duration for Injection.Params.
func msParam(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
