package chaos_test

import (
	"testing"

	"github.com/pingcap/failpoint"
)

// enableFailpoint enables the failpoint path with term for the test.
func enableFailpoint(t *testing.T, path, term string) {
	t.Helper()
	if err := failpoint.Enable(path, term); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { failpoint.Disable(path) })
}
