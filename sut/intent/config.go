package intent

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// DefaultSecret is the BUS_SECRET the server refuses to start with (§15).
const DefaultSecret = "dev_secret"

// Config configures the reference server. Durations are protocol durations;
// the server divides each by TimeScale.
type Config struct {
	DBPath string
	// Store, when set, is the store instead of DBPath: a PostgreSQL URL
	// (postgres://…) shared by several replicas of the server, which are
	// then one server.
	Store string
	// ReplicaID names this replica among those sharing Store (its
	// connections' application_name); "" is "replica".
	ReplicaID         string
	Secret            string // BUS_SECRET: the main API key (exempt from tester limits)
	AdminSecret       string // BUS_ADMIN_SECRET: X-Admin-Token
	DashboardPassword string // DASHBOARD_PASSWORD: HTTP Basic password of user "admin"
	MetricsToken      string // BUS_METRICS_TOKEN: Bearer token of /metrics
	RequireSignatures bool   // BUS_REQUIRE_SIGNATURES
	Maintenance       bool   // BUS_MAINTENANCE_MODE
	EnforceHTTPS      bool   // BUS_ENFORCE_HTTPS
	TrustProxy        bool   // BUS_TRUST_PROXY
	CleanupInterval   time.Duration
	// TimeScale divides every protocol duration (claim timeout, extensions,
	// backoff and jitter, delay, TTLs, retention, the rate-limit window, the
	// cleanup interval and its back-off; not the ±300 s timestamp window);
	// 0 means 1.
	TimeScale float64
	// Mutant names a deliberate bug (see Mutants); "" for the correct server.
	Mutant string
	// Seed seeds the jitter source; 0 draws one from crypto/rand.
	Seed uint64
	// Readings chooses, per key of ReadingKeys (the decisions, then the
	// server's other answers), the name the server follows; a missing key is
	// its default (its first name). AlternateReadings gives the other one of
	// every key.
	Readings map[string]string
	// Clock is the server's time; nil is time.Now. Tests move it by hand.
	Clock  func() time.Time
	Logger *slog.Logger
}

// DefaultCleanupInterval is BUS_CLEANUP_INTERVAL_SECONDS' default.
const DefaultCleanupInterval = 21600 * time.Second

// ConfigFromEnv reads the text's environment table (§14) through getenv.
// BUS_DB_PATH defaults to infrastructure.db; BUS_CLEANUP_INTERVAL_SECONDS must
// be 300–86400. IDSCHECK_TIME_SCALE and IDSCHECK_MUTANT are extensions.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		DBPath:            getenv("BUS_DB_PATH"),
		Secret:            getenv("BUS_SECRET"),
		AdminSecret:       getenv("BUS_ADMIN_SECRET"),
		DashboardPassword: getenv("DASHBOARD_PASSWORD"),
		MetricsToken:      getenv("BUS_METRICS_TOKEN"),
		CleanupInterval:   DefaultCleanupInterval,
		TimeScale:         1,
		Mutant:            getenv("IDSCHECK_MUTANT"),
	}
	if c.DBPath == "" {
		c.DBPath = "infrastructure.db"
	}
	for _, b := range []struct {
		name string
		dst  *bool
	}{
		{"BUS_TRUST_PROXY", &c.TrustProxy},
		{"BUS_ENFORCE_HTTPS", &c.EnforceHTTPS},
		{"BUS_REQUIRE_SIGNATURES", &c.RequireSignatures},
		{"BUS_MAINTENANCE_MODE", &c.Maintenance},
	} {
		v, err := parseBool(getenv(b.name))
		if err != nil {
			return Config{}, fmt.Errorf("config: %s: %w", b.name, err)
		}
		*b.dst = v
	}
	if v := getenv("BUS_CLEANUP_INTERVAL_SECONDS"); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 300 || n > 86400 {
			return Config{}, fmt.Errorf("config: BUS_CLEANUP_INTERVAL_SECONDS must be an integer in 300–86400, got %q", v)
		}
		c.CleanupInterval = time.Duration(n) * time.Second
	}
	if v := getenv("IDSCHECK_TIME_SCALE"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0) {
			return Config{}, fmt.Errorf("config: IDSCHECK_TIME_SCALE must be a number > 0, got %q", v)
		}
		c.TimeScale = f
	}
	return c, nil
}

func parseBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "0", "false", "no", "off":
		return false, nil
	case "1", "true", "yes", "on":
		return true, nil
	}
	return false, fmt.Errorf("not a boolean: %q", v)
}
