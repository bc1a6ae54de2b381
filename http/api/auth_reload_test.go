package api_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvselect/kvselect/http/api"
	"github.com/kvselect/kvselect/internal/logbuf"
)

// TestAuthReloadLogsOnlyChanges: the watcher calls Reload on every event in the token file's
// directory, so an unchanged file must not log (a log file beside it would feed itself), and an
// unchanged failure is logged once, yet still returned every time.
func TestAuthReloadLogsOnlyChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeFile := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeFile("one\n")
	var logs logbuf.Buffer
	a, err := api.NewAuth(path, api.AuthAll, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	const ok, failed = "auth token file reloaded", "auth token file reload failed"
	for range 3 {
		if err := a.Reload(); err != nil {
			t.Fatal(err)
		}
	}
	if n := logs.Count(ok); n != 0 {
		t.Fatalf("%d reload logs for an unchanged file, want 0", n)
	}
	writeFile("two\n")
	for range 3 {
		if err := a.Reload(); err != nil {
			t.Fatal(err)
		}
	}
	if n := logs.Count(ok); n != 1 {
		t.Fatalf("%d reload logs for one change, want 1", n)
	}
	writeFile("not a token\n")
	for range 3 {
		if err := a.Reload(); err == nil {
			t.Fatal("Reload of a broken file succeeded")
		}
	}
	if n := logs.Count(failed); n != 1 {
		t.Fatalf("%d failure logs for one broken version, want 1", n)
	}
	writeFile("# none\n") // a different failure is reported
	if err := a.Reload(); err == nil {
		t.Fatal("Reload of a comment-only file succeeded")
	}
	if n := logs.Count(failed); n != 2 {
		t.Fatalf("%d failure logs for two broken versions, want 2", n)
	}
	writeFile("two\n") // back to the tokens in force: nothing to do, nothing to say
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	writeFile("three\n")
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	if n := logs.Count(ok); n != 2 {
		t.Fatalf("%d reload logs, want 2 (two, three)", n)
	}
}
