package intent

import (
	"testing"

	"github.com/idscheck/idscheck/pgtest"
)

// TestPostgres runs the server's behaviour tests, its readings and its
// mutants' misbehaviour on a PostgreSQL store (a fresh database each):
// the same behaviour as on SQLite.
func TestPostgres(t *testing.T) {
	pgtest.Shared(t)
	testStore = pgtest.Database
	defer func() { testStore = nil }()
	for _, c := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"CreateIntentValidation", TestCreateIntentValidation}, {"SecurityHeadersAndErrorShape", TestSecurityHeadersAndErrorShape},
		{"Idempotency", TestIdempotency}, {"ClaimOrderAndRouting", TestClaimOrderAndRouting}, {"LeaseLifecycle", TestLeaseLifecycle},
		{"TimeScale", TestTimeScale}, {"FulfillFailExtend", TestFulfillFailExtend}, {"HMAC", TestHMAC},
		{"AdminAuthAndMetrics", TestAdminAuthAndMetrics}, {"TesterKeysAndAdminOps", TestTesterKeysAndAdminOps}, {"KVStore", TestKVStore},
		{"MaintenanceAndHTTPS", TestMaintenanceAndHTTPS}, {"Cleanup", TestCleanup}, {"CleanupLazy", TestCleanupLazy},
		{"MutantsMisbehave", TestMutantsMisbehave}, {"OpenIntentCap", TestOpenIntentCap},
		{"ReadingsInHealth", TestReadingsInHealth}, {"ReadingLeaseExpiry", TestReadingLeaseExpiry},
		{"ReadingLeaseExpiryFailKeepsBackoff", TestReadingLeaseExpiryFailKeepsBackoff}, {"ReadingExtend", TestReadingExtend},
		{"ReadingQueryRepeatedOrder", TestReadingQueryRepeatedOrder}, {"ReadingAdminResultAccess", TestReadingAdminResultAccess},
		{"ReadingNullPayload", TestReadingNullPayload}, {"ReadingSignatureStatus", TestReadingSignatureStatus},
		{"ReadingBounds", TestReadingBounds}, {"ReadingPublisherFilter", TestReadingPublisherFilter}, {"ReadingAccess", TestReadingAccess},
		{"AlternateServer", TestAlternateServer},
	} {
		t.Run(c.name, c.f)
	}
}
