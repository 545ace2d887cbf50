package wasmpolicy

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/verbatim-kafka/verbatim/policies"
)

// Options configure a Host. The zero value is usable.
type Options struct {
	// PolicyDir holds user modules as NAME.wasm (verbatim serve
	// --policy-dir); empty: built-ins only.
	PolicyDir string
	// CacheDir keeps compiled machine code across restarts (the broker
	// passes <data-dir>/.wasm-cache); empty: in memory only. Hosts of one
	// process with the same CacheDir share compiled code (sharedCache).
	CacheDir string
	// CallTimeout bounds one judge call (default 1s, enforced within a
	// quarter of it). A call that runs longer is stopped, its batches
	// rejected and its instance replaced. It is generous on purpose: a
	// built-in takes microseconds, and a rejection caused by the host being
	// starved of CPU would stop a mirror for nothing.
	CallTimeout time.Duration
	// InitTimeout bounds instantiation and initialisation (default 5s).
	InitTimeout time.Duration
	// MemoryLimitPages caps each instance's linear memory in 64 KiB pages
	// (default 512 = 32 MiB).
	MemoryLimitPages uint32
	// MaxInstances caps concurrent instances per (module, topic); callers
	// beyond it wait (default GOMAXPROCS).
	MaxInstances int
	// IdleTimeout closes instances unused for this long (default 2
	// minutes): a Go guest instance holds ~4 MiB, so topics that stopped
	// receiving produces give it back; the next call creates a new one.
	IdleTimeout time.Duration
	// Interpreter forces wazero's interpreter instead of its compiler.
	Interpreter bool
	// Logger receives reloads and instance failures (default: discard).
	Logger *slog.Logger
	// ModuleTimer, when set, is asked once per (module, topic) binding
	// for the function that receives how long each of that module's
	// judge calls took (the broker's per-module latency metric).
	ModuleTimer func(module string) func(time.Duration)

	// privateCache gives the Host a cache of its own (start-up benchmarks
	// measure the disk cache, not the process's shared one).
	privateCache bool
}

func (o *Options) defaults() {
	if o.CallTimeout <= 0 {
		o.CallTimeout = time.Second
	}
	if o.InitTimeout <= 0 {
		o.InitTimeout = 5 * time.Second
	}
	if o.MemoryLimitPages == 0 {
		o.MemoryLimitPages = 512
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 2 * time.Minute
	}
	if o.MaxInstances <= 0 {
		o.MaxInstances = runtime.GOMAXPROCS(0)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// An engine is a wazero runtime with the sandbox's WASI and the modules it
// compiled, by content. Hosts of one process with the same settings share
// one (a restarted broker in the same process, the brokers of a test
// binary): wazero decodes, validates and compiles a 2 MB Go guest for
// seconds, and a CompiledModule can only be instantiated in the runtime
// that compiled it. Shared engines live as long as the process; their
// compiled modules are never closed, since any Host may still use them.
//
// An engine has two runtimes. rt compiles modules with wazero's
// termination checks (WithCloseOnContextDone), so that a call past its
// deadline can be stopped; wazero pays for that with a goroutine per call
// (~1 us and 3 allocations, more than a built-in's whole judgement).
// bounded compiles the import-free built-ins without them: those are part
// of the broker's own code, written so that every loop is bounded by the
// input's size (and fuzzed against their Go reference implementations),
// like the native hot path, which has no deadline either. Everything else
// (policy-directory modules, built-ins with a Go runtime) runs in rt.
type engine struct {
	rt      wazero.Runtime
	bounded wazero.Runtime
	cache   wazero.CompilationCache
	private bool

	mu       sync.Mutex
	compiled map[compiledKey]wazero.CompiledModule
}

type compiledKey struct {
	sum     [sha256.Size]byte
	bounded bool
}

type engineKey struct {
	cacheDir    string
	pages       uint32
	interpreter bool
}

var engines struct {
	sync.Mutex
	byKey map[engineKey]*engine
}

func getEngine(o *Options) (*engine, error) {
	key := engineKey{o.CacheDir, o.MemoryLimitPages, o.Interpreter}
	engines.Lock()
	defer engines.Unlock()
	if e, ok := engines.byKey[key]; ok && !o.privateCache {
		return e, nil
	}
	e := &engine{private: o.privateCache, compiled: map[compiledKey]wazero.CompiledModule{}}
	if o.CacheDir == "" {
		e.cache = wazero.NewCompilationCache()
	} else {
		if err := os.MkdirAll(o.CacheDir, 0o755); err != nil {
			return nil, fmt.Errorf("wasmpolicy: compilation cache: %w", err)
		}
		var err error
		if e.cache, err = wazero.NewCompilationCacheWithDir(o.CacheDir); err != nil {
			return nil, fmt.Errorf("wasmpolicy: compilation cache: %w", err)
		}
	}
	cfg := wazero.NewRuntimeConfig()
	if o.Interpreter {
		cfg = wazero.NewRuntimeConfigInterpreter()
	}
	cfg = cfg.WithMemoryLimitPages(o.MemoryLimitPages).WithCompilationCache(e.cache)
	// wazero keys compiled code (also on disk) by the termination setting,
	// so the two runtimes can share the cache.
	e.rt = wazero.NewRuntimeWithConfig(context.Background(), cfg.WithCloseOnContextDone(true))
	e.bounded = wazero.NewRuntimeWithConfig(context.Background(), cfg.WithCloseOnContextDone(false))
	if err := instantiateWASI(context.Background(), e.rt); err != nil {
		e.close()
		return nil, err
	}
	if !e.private {
		if engines.byKey == nil {
			engines.byKey = map[engineKey]*engine{}
		}
		engines.byKey[key] = e
	}
	return e, nil
}

// runtime returns the runtime modules compiled with bounded (or not) run
// in.
func (e *engine) runtime(bounded bool) wazero.Runtime {
	if bounded {
		return e.bounded
	}
	return e.rt
}

// compile returns the compiled module for wasm in the bounded or the
// checked runtime, compiling it on first use.
func (e *engine) compile(wasm []byte, bounded bool) (wazero.CompiledModule, error) {
	key := compiledKey{sha256.Sum256(wasm), bounded}
	e.mu.Lock()
	defer e.mu.Unlock()
	if cm, ok := e.compiled[key]; ok {
		return cm, nil
	}
	cm, err := e.runtime(bounded).CompileModule(context.Background(), wasm)
	if err != nil {
		return nil, err
	}
	e.compiled[key] = cm
	return cm, nil
}

func (e *engine) close() {
	_ = e.rt.Close(context.Background())
	_ = e.bounded.Close(context.Background())
	_ = e.cache.Close(context.Background())
}

// ErrClosed is returned by a closed Host or Binding.
var ErrClosed = errors.New("wasmpolicy: closed")

// Host compiles policy modules once and binds them to topics. It is safe
// for concurrent use.
type Host struct {
	opts Options
	eng  *engine
	wd   *watchdog
	// stopSweep ends sweepIdle.
	stopSweep chan struct{}

	mu       sync.Mutex
	modules  map[string]*module
	bindings map[*Binding]struct{}
	closed   bool
}

// NewHost returns a Host on the process's engine for these options.
// Nothing is compiled until a policy is first used.
func NewHost(opts Options) (*Host, error) {
	opts.defaults()
	e, err := getEngine(&opts)
	if err != nil {
		return nil, err
	}
	h := &Host{opts: opts, eng: e, modules: map[string]*module{}, bindings: map[*Binding]struct{}{}}
	h.wd = newWatchdog(opts.CallTimeout)
	h.stopSweep = make(chan struct{})
	go h.sweepIdle()
	return h, nil
}

// sweepIdle closes the instances idle for longer than IdleTimeout.
func (h *Host) sweepIdle() {
	every(h.stopSweep, max(h.opts.IdleTimeout/4, 10*time.Millisecond), func() {
		h.mu.Lock()
		var pools []*pool
		for b := range h.bindings {
			for _, bm := range b.mods {
				pools = append(pools, bm.pool.Load())
			}
		}
		h.mu.Unlock()
		cutoff := time.Now().Add(-h.opts.IdleTimeout)
		for _, p := range pools {
			p.closeIdle(cutoff)
		}
	})
}

// every calls fn every interval until stop is closed: the loop of the
// idle sweep, the watchdog and Watch.
func every(stop <-chan struct{}, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		fn()
	}
}

// Close closes every binding and its instances (and the engine, if it is
// the Host's own).
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	bs := make([]*Binding, 0, len(h.bindings))
	for b := range h.bindings {
		bs = append(bs, b)
	}
	h.mu.Unlock()
	for _, b := range bs {
		b.Close()
	}
	h.wd.close()
	close(h.stopSweep)
	if h.eng.private {
		h.eng.close()
	}
	return nil
}

// module returns the loaded module called name, loading it if needed.
// REQUIRES: h.mu is held.
func (h *Host) moduleLocked(name string) (*module, error) {
	if h.closed {
		return nil, ErrClosed
	}
	if m, ok := h.modules[name]; ok {
		return m, nil
	}
	wasm, source, stamp, err := h.locate(name)
	if err != nil {
		return nil, err
	}
	m, err := h.compile(wasm, source, name)
	if err != nil {
		return nil, err
	}
	m.stamp, m.reloadable = stamp, source != "built-in"
	h.modules[name] = m
	return m, nil
}

// Describe loads a policy and returns its descriptor.
func (h *Host) Describe(name string) (Descriptor, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m, err := h.moduleLocked(name)
	if err != nil {
		return Descriptor{}, err
	}
	return m.desc, nil
}

// Check loads every named policy, so that a config naming an unknown
// module or one that breaks the ABI is refused when it is set.
func (h *Host) Check(names []string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, n := range names {
		if _, err := h.moduleLocked(n); err != nil {
			return err
		}
	}
	return nil
}

// ParseList splits a mirror.policies value: a comma list, blanks ignored,
// duplicates refused.
func ParseList(v string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if seen[n] {
			return nil, fmt.Errorf("policy %q listed twice", n)
		}
		seen[n] = true
		out = append(out, n)
	}
	return out, nil
}

// Effective is the policy list of a topic: mirror.policies when set (an
// empty value means none), else the built-in defaults for mirror topics
// and nothing for ordinary ones.
func Effective(value string, set, mirror bool) ([]string, error) {
	if set {
		return ParseList(value)
	}
	if mirror {
		return append([]string(nil), policies.DefaultMirror...), nil
	}
	return nil, nil
}

// Refresh reloads every policy-directory module whose file changed since
// it was loaded, and swaps the new version into the bindings using it. A
// new version that fails to load is reported and the old one kept.
func (h *Host) Refresh() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || h.opts.PolicyDir == "" {
		return nil
	}
	var errs []error
	names := make([]string, 0, len(h.modules))
	for n, m := range h.modules {
		if m.reloadable {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		old := h.modules[name]
		fi, err := os.Stat(old.source)
		if err != nil {
			continue // a removed file keeps the running version
		}
		now := fileStamp{size: fi.Size(), modTime: fi.ModTime()}
		if now == old.stamp || now == old.failed {
			continue
		}
		old.failed = now // until this version loads, do not retry it
		wasm, source, stamp, err := h.locate(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		m, err := h.compile(wasm, source, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("reloading %s: kept the running version: %w", name, err))
			continue
		}
		m.stamp, m.reloadable = stamp, true
		if err := h.swapLocked(old, m); err != nil {
			errs = append(errs, fmt.Errorf("reloading %s: kept the running version: %w", name, err))
			continue
		}
		h.modules[name] = m
		h.opts.Logger.Info("mirror policy reloaded", "policy", name, "file", source)
	}
	return errs
}

// swapLocked gives every binding using old a pool of m; on failure no
// binding changes.
// REQUIRES: h.mu is held.
func (h *Host) swapLocked(old, m *module) error {
	type swap struct {
		bm *boundModule
		p  *pool
	}
	var swaps []swap
	for b := range h.bindings {
		for _, bm := range b.mods {
			if bm.pool.Load().m != old {
				continue
			}
			p, err := h.newPool(m, b.topic, b.cfg)
			if err != nil {
				for _, s := range swaps {
					s.p.close()
				}
				return err
			}
			swaps = append(swaps, swap{bm, p})
		}
	}
	for _, s := range swaps {
		s.bm.pool.Swap(s.p).close()
	}
	return nil
}

// Watch calls Refresh every interval until ctx ends, logging failures.
func (h *Host) Watch(ctx context.Context, interval time.Duration) {
	every(ctx.Done(), interval, func() {
		for _, err := range h.Refresh() {
			h.opts.Logger.Warn("mirror policy reload failed", "err", err)
		}
	})
}

// ModuleInfo describes a loaded module for tools (verbatim policy check).
type ModuleInfo struct {
	Descriptor
	Source  string
	Imports []string
	Exports []string
}

func (m *module) info() ModuleInfo {
	mi := ModuleInfo{Descriptor: m.desc, Source: m.source}
	for _, def := range m.compiled.ImportedFunctions() {
		mod, name, _ := def.Import()
		mi.Imports = append(mi.Imports, mod+"."+name)
	}
	for name, def := range m.compiled.ExportedFunctions() {
		mi.Exports = append(mi.Exports, name+sig(def.ParamTypes(), def.ResultTypes()))
	}
	sort.Strings(mi.Imports)
	sort.Strings(mi.Exports)
	return mi
}

// LoadFile loads a module file under the name its descriptor declares, so
// that Bind can then use that name (it shadows a built-in of the same
// name in this Host). Tools use it; the broker resolves names instead.
func (h *Host) LoadFile(path string) (ModuleInfo, error) {
	wasm, err := os.ReadFile(path)
	if err != nil {
		return ModuleInfo{}, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return ModuleInfo{}, ErrClosed
	}
	m, err := h.compile(wasm, path, "")
	if err != nil {
		return ModuleInfo{}, err
	}
	if old, ok := h.modules[m.name]; ok {
		if err := h.swapLocked(old, m); err != nil {
			return ModuleInfo{}, err
		}
	}
	h.modules[m.name] = m
	return m.info(), nil
}
