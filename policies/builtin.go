package policies

import (
	"embed"
	"sort"
	"strings"
)

//go:generate sh build.sh

// builtinFS holds the compiled built-in modules. They are committed
// release artifacts; TestBuiltinsUpToDate fails when a source changed
// without `go generate ./policies`.
//
//go:embed builtin/*.wasm
var builtinFS embed.FS

// DefaultMirror are the policies a mirror topic gets when it sets no
// mirror.policies.
var DefaultMirror = []string{"epoch-monotonic", "control-records"}

// Builtin returns the compiled module of a built-in policy.
func Builtin(name string) ([]byte, bool) {
	if strings.ContainsAny(name, "/\\.") {
		return nil, false
	}
	b, err := builtinFS.ReadFile("builtin/" + name + ".wasm")
	return b, err == nil
}

// BuiltinNames lists the built-in policies, sorted.
func BuiltinNames() []string {
	ents, _ := builtinFS.ReadDir("builtin")
	var names []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".wasm"); ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}
