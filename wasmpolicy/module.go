package wasmpolicy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/verbatim-kafka/verbatim/policies"
	"github.com/verbatim-kafka/verbatim/policies/abi"
)

// ErrUnknownPolicy is returned for a policy name that is neither a
// built-in nor a module in the policy directory.
var ErrUnknownPolicy = errors.New("unknown mirror policy")

// ErrBadModule is returned for a module that breaks the ABI (missing or
// mistyped exports, wrong ABI version, forbidden imports, a descriptor
// that does not parse, or a crash while describing itself).
var ErrBadModule = errors.New("invalid mirror policy module")

// Descriptor is what a module declares about itself.
type Descriptor struct {
	ABI     int
	Name    string
	Needs   abi.Needs
	Configs []string
}

// module is one compiled version of a policy.
type module struct {
	name     string
	source   string // "built-in" or the module file
	compiled wazero.CompiledModule
	// bounded: an import-free built-in, compiled without termination
	// checks (engine); its calls cannot be stopped at the deadline.
	bounded bool
	desc    Descriptor
	hasInit bool
	stamp   fileStamp
	// failed is the file version that last failed to reload.
	failed fileStamp
	// reloadable: a --policy-dir module, watched by Refresh.
	reloadable bool
}

// fileStamp identifies a version of a module file.
type fileStamp struct {
	size    int64
	modTime time.Time
}

func validName(n string) bool {
	if n == "" || len(n) > 128 {
		return false
	}
	for _, c := range n {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return n != "." && n != ".."
}

// locate finds a policy's bytes: a built-in first, then NAME.wasm in the
// policy directory.
func (h *Host) locate(name string) (wasm []byte, source string, stamp fileStamp, err error) {
	if !validName(name) {
		return nil, "", stamp, fmt.Errorf("%w %q: names use letters, digits, '-', '_' and '.'", ErrUnknownPolicy, name)
	}
	if b, ok := policies.Builtin(name); ok {
		return b, "built-in", stamp, nil
	}
	if h.opts.PolicyDir == "" {
		return nil, "", stamp, fmt.Errorf("%w %q (built-ins: %s; no --policy-dir)", ErrUnknownPolicy, name, strings.Join(policies.BuiltinNames(), ", "))
	}
	path := filepath.Join(h.opts.PolicyDir, name+".wasm")
	fi, err := os.Stat(path)
	if err != nil {
		return nil, "", stamp, fmt.Errorf("%w %q (built-ins: %s; no %s)", ErrUnknownPolicy, name, strings.Join(policies.BuiltinNames(), ", "), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", stamp, fmt.Errorf("reading policy %q: %w", name, err)
	}
	return b, path, fileStamp{size: fi.Size(), modTime: fi.ModTime()}, nil
}

// compile compiles and validates a module: imports, exports, and its
// descriptor, read from a probe instance. want is the name it must
// declare ("" accepts any).
func (h *Host) compile(wasm []byte, source, want string) (*module, error) {
	// A built-in with a runtime (a Go guest, which imports WASI) keeps
	// the deadline.
	bounded := source == "built-in" && !hasImports(wasm)
	cm, err := h.eng.compile(wasm, bounded)
	if err == nil && bounded && len(cm.ImportedFunctions()) > 0 {
		err = errors.New("imports functions its import section did not show")
	}
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrBadModule, source, err)
	}
	m := &module{source: source, compiled: cm, bounded: bounded}
	if err := m.checkShape(); err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrBadModule, source, err)
	}
	inst, err := h.newInstance(m)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrBadModule, source, err)
	}
	desc, err := inst.describe(h.opts.CallTimeout)
	inst.close()
	if err == nil && want != "" && desc.Name != want {
		err = fmt.Errorf("declares name %q, not %q", desc.Name, want)
	}
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrBadModule, source, err)
	}
	m.desc, m.name = desc, desc.Name
	return m, nil
}

// hasImports reports whether a module binary has a non-empty import
// section; anything it cannot read counts as having imports.
func hasImports(wasm []byte) bool {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" {
		return true
	}
	for b := wasm[8:]; len(b) > 0; {
		id := b[0]
		size, n := binary.Uvarint(b[1:])
		if n <= 0 || size > uint64(len(b)-1-n) {
			return true
		}
		body := b[1+n : 1+n+int(size)]
		if id == 2 { // import section: a count, then the imports
			count, n := binary.Uvarint(body)
			return n <= 0 || count > 0
		}
		b = b[1+n+int(size):]
	}
	return false
}

type exportSig struct {
	params, results []api.ValueType
}

var requiredExports = map[string]exportSig{
	abi.ExportDescribe: {nil, []api.ValueType{i64}},
	abi.ExportAlloc:    {[]api.ValueType{i32}, []api.ValueType{i32}},
	abi.ExportJudge:    {[]api.ValueType{i32, i32}, []api.ValueType{i64}},
}

// checkShape checks imports and exports before anything runs.
func (m *module) checkShape() error {
	if err := checkImports(m.compiled); err != nil {
		return err
	}
	if _, ok := m.compiled.ExportedMemories()[abi.ExportMemory]; !ok {
		return fmt.Errorf("does not export its memory as %q", abi.ExportMemory)
	}
	fns := m.compiled.ExportedFunctions()
	for _, name := range []string{abi.ExportDescribe, abi.ExportAlloc, abi.ExportJudge} {
		want := requiredExports[name]
		def, ok := fns[name]
		if !ok {
			return fmt.Errorf("lacks export %s%s (ABI version %d, docs/policies.md)", name, sig(want.params, want.results), abi.Version)
		}
		if !slices.Equal(def.ParamTypes(), want.params) || !slices.Equal(def.ResultTypes(), want.results) {
			return fmt.Errorf("exports %s%s, ABI version %d wants %s%s", name, sig(def.ParamTypes(), def.ResultTypes()), abi.Version, name, sig(want.params, want.results))
		}
	}
	if def, ok := fns[abi.ExportInitialize]; ok {
		if len(def.ParamTypes()) != 0 || len(def.ResultTypes()) != 0 {
			return fmt.Errorf("exports %s with parameters or results", abi.ExportInitialize)
		}
		m.hasInit = true
	}
	return nil
}

func sig(params, results []api.ValueType) string {
	return "(" + strings.Join(typeNames(params), ", ") + ") -> (" + strings.Join(typeNames(results), ", ") + ")"
}

// parseDescriptor reads the descriptor text: key=value lines with keys
// abi, name, needs (headers | control-bytes | batch-bytes) and configs (a
// comma list). Unknown keys are refused so that typos do not pass.
func parseDescriptor(text string) (Descriptor, error) {
	var d Descriptor
	seen := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return d, fmt.Errorf("descriptor line %q is not key=value", line)
		}
		if seen[k] {
			return d, fmt.Errorf("descriptor repeats %q", k)
		}
		seen[k] = true
		switch k {
		case "abi":
			n, err := strconv.Atoi(v)
			if err != nil {
				return d, fmt.Errorf("descriptor abi %q is not a number", v)
			}
			d.ABI = n
		case "name":
			if !validName(v) {
				return d, fmt.Errorf("descriptor name %q is not a valid policy name", v)
			}
			d.Name = v
		case "needs":
			switch v {
			case "", "headers":
			case "control-bytes":
				d.Needs = abi.NeedControlBytes
			case "batch-bytes":
				d.Needs = abi.NeedBatchBytes
			default:
				return d, fmt.Errorf("descriptor needs %q: want headers, control-bytes or batch-bytes", v)
			}
		case "configs":
			for _, c := range strings.Split(v, ",") {
				if c = strings.TrimSpace(c); c != "" {
					d.Configs = append(d.Configs, c)
				}
			}
		default:
			return d, fmt.Errorf("descriptor has unknown key %q", k)
		}
	}
	switch {
	case !seen["abi"]:
		return d, errors.New("descriptor lacks abi=")
	case d.ABI != abi.Version:
		return d, fmt.Errorf("module is written for policy ABI version %d; this broker speaks version %d", d.ABI, abi.Version)
	case d.Name == "":
		return d, errors.New("descriptor lacks name=")
	}
	return d, nil
}
