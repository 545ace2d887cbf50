package interop

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

var (
	rootOnce sync.Once
	rootDir  string
	rootErr  error
)

// RepoRoot returns the repository root: the nearest directory at or above
// the working directory that holds go.mod. Tests run with the package
// directory as working directory, so this never needs an absolute path in
// code.
func RepoRoot() (string, error) {
	rootOnce.Do(func() {
		dir, err := os.Getwd()
		if err != nil {
			rootErr = err
			return
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				rootDir = dir
				return
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				rootErr = errors.New("interop: no go.mod found at or above the working directory")
				return
			}
			dir = parent
		}
	})
	return rootDir, rootErr
}

// PeersDir is the git-ignored folder where install.sh assembles the peers
// (.peers under the repository root).
func PeersDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, ".peers"), nil
}

// missingPeer fails the test with a message that says how to install the
// peers. A missing peer is never a skip: the suite must not go green without
// having run against the real thing.
func missingPeer(t testing.TB, what string, err error) {
	t.Helper()
	msg := fmt.Sprintf("real peer missing: %s", what)
	if err != nil {
		msg += ": " + err.Error()
	}
	t.Fatalf("%s\nrun `make peers` (interop/install.sh) to install the real peers", msg)
}
