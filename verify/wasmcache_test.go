package verify

import (
	"os"
	"testing"

	"github.com/verbatim-kafka/verbatim/internal/testwasm"
)

// TestMain compiles the default mirror policies once into the shared test
// cache; destination brokers link it (testwasm.LinkCache), so their first
// mirror produce does not wait for a cold compile.
func TestMain(m *testing.M) { os.Exit(testwasm.Main(m)) }
