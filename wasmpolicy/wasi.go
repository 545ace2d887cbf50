package wasmpolicy

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// The sandbox's WASI: only what a Go wasip1 reactor imports, implemented
// here rather than with wazero's full wasi_snapshot_preview1 so that the
// set is closed. There are no arguments, no environment, no preopened
// directories, no sockets; stdout is discarded and stderr is kept (the
// first stderrMax bytes of a call) to explain a guest's crash. A module importing
// anything else is refused when it is loaded.

const wasiModule = "wasi_snapshot_preview1"

// WASI errno values.
const (
	errnoSuccess     = 0
	errnoBadf        = 8
	errnoInval       = 28
	errnoNosys       = 52
	errnoSpipe       = 70
	errnoNotcapable  = 76
	stderrMax        = 1024
	clockRealtime    = 0
	clockMonotonic   = 1
	eventTypeClock   = 0
	subscriptionSize = 48
	eventSize        = 32
)

// guestState is an instance's view of the host: its stderr tail and its
// random source. It travels in the context of every call into the guest.
type guestState struct {
	stderr []byte
	rng    *rand.ChaCha8
	exit   *uint32
}

type guestStateKey struct{}

func stateOf(ctx context.Context) *guestState {
	s, _ := ctx.Value(guestStateKey{}).(*guestState)
	return s
}

// writeStderr keeps the first stderrMax bytes a call writes: the first
// lines of a Go crash say what it was.
func (s *guestState) writeStderr(p []byte) {
	if room := stderrMax - len(s.stderr); room > 0 {
		s.stderr = append(s.stderr, p[:min(room, len(p))]...)
	}
}

var (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

type wasiFunc struct {
	params, results []api.ValueType
	fn              api.GoModuleFunc
}

var hostStart = time.Now()

func errno(stack []uint64, e uint32) { stack[0] = uint64(e) }

func writeU32(m api.Module, off uint32, v uint32) bool { return m.Memory().WriteUint32Le(off, v) }

var wasiFuncs = map[string]wasiFunc{
	"args_get":          {[]api.ValueType{i32, i32}, []api.ValueType{i32}, func(_ context.Context, _ api.Module, s []uint64) { errno(s, errnoSuccess) }},
	"environ_get":       {[]api.ValueType{i32, i32}, []api.ValueType{i32}, func(_ context.Context, _ api.Module, s []uint64) { errno(s, errnoSuccess) }},
	"args_sizes_get":    {[]api.ValueType{i32, i32}, []api.ValueType{i32}, zeroSizes},
	"environ_sizes_get": {[]api.ValueType{i32, i32}, []api.ValueType{i32}, zeroSizes},
	"clock_time_get":    {[]api.ValueType{i32, i64, i32}, []api.ValueType{i32}, clockTimeGet},
	"fd_write":          {[]api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}, fdWrite},
	"random_get":        {[]api.ValueType{i32, i32}, []api.ValueType{i32}, randomGet},
	"poll_oneoff":       {[]api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}, pollOneoff},
	"proc_exit":         {[]api.ValueType{i32}, nil, procExit},
	"sched_yield":       {nil, []api.ValueType{i32}, func(_ context.Context, _ api.Module, s []uint64) { errno(s, errnoSuccess) }},
	// What Go's os package imports once fmt or os is linked: answered as
	// a process with three character devices and nothing else.
	"fd_close":            {[]api.ValueType{i32}, []api.ValueType{i32}, func(_ context.Context, _ api.Module, s []uint64) { errno(s, errnoBadf) }},
	"fd_fdstat_get":       {[]api.ValueType{i32, i32}, []api.ValueType{i32}, fdFdstatGet},
	"fd_fdstat_set_flags": {[]api.ValueType{i32, i32}, []api.ValueType{i32}, stdioOnly(errnoSuccess)},
	"fd_prestat_get":      {[]api.ValueType{i32, i32}, []api.ValueType{i32}, func(_ context.Context, _ api.Module, s []uint64) { errno(s, errnoBadf) }},
	"fd_prestat_dir_name": {[]api.ValueType{i32, i32, i32}, []api.ValueType{i32}, func(_ context.Context, _ api.Module, s []uint64) { errno(s, errnoBadf) }},
	"fd_read":             {[]api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}, fdRead},
	"fd_seek":             {[]api.ValueType{i32, i64, i32, i32}, []api.ValueType{i32}, stdioOnly(errnoSpipe)},
	"fd_filestat_get":     {[]api.ValueType{i32, i32}, []api.ValueType{i32}, func(_ context.Context, _ api.Module, s []uint64) { errno(s, errnoBadf) }},
	"path_open":           {[]api.ValueType{i32, i32, i32, i32, i32, i64, i64, i32, i32}, []api.ValueType{i32}, func(_ context.Context, _ api.Module, s []uint64) { errno(s, errnoNotcapable) }},
	"path_filestat_get":   {[]api.ValueType{i32, i32, i32, i32, i32}, []api.ValueType{i32}, func(_ context.Context, _ api.Module, s []uint64) { errno(s, errnoNotcapable) }},
}

// stdioOnly answers code for fds 0-2 and EBADF for any other.
func stdioOnly(code uint32) api.GoModuleFunc {
	return func(_ context.Context, _ api.Module, s []uint64) {
		if uint32(s[0]) <= 2 {
			errno(s, code)
			return
		}
		errno(s, errnoBadf)
	}
}

func zeroSizes(_ context.Context, m api.Module, s []uint64) {
	if !writeU32(m, uint32(s[0]), 0) || !writeU32(m, uint32(s[1]), 0) {
		errno(s, errnoInval)
		return
	}
	errno(s, errnoSuccess)
}

func clockTimeGet(_ context.Context, m api.Module, s []uint64) {
	var ns int64
	switch uint32(s[0]) {
	case clockRealtime:
		ns = time.Now().UnixNano()
	case clockMonotonic:
		ns = int64(time.Since(hostStart))
	default:
		errno(s, errnoInval)
		return
	}
	if !m.Memory().WriteUint64Le(uint32(s[2]), uint64(ns)) {
		errno(s, errnoInval)
		return
	}
	errno(s, errnoSuccess)
}

func fdWrite(ctx context.Context, m api.Module, s []uint64) {
	fd, iovs, n, nwritten := uint32(s[0]), uint32(s[1]), uint32(s[2]), uint32(s[3])
	if fd != 1 && fd != 2 {
		errno(s, errnoBadf)
		return
	}
	mem := m.Memory()
	table, ok := mem.Read(iovs, n*8)
	if !ok {
		errno(s, errnoInval)
		return
	}
	total := uint32(0)
	for i := uint32(0); i < n; i++ {
		p, l := binary.LittleEndian.Uint32(table[i*8:]), binary.LittleEndian.Uint32(table[i*8+4:])
		b, ok := mem.Read(p, l)
		if !ok {
			errno(s, errnoInval)
			return
		}
		if st := stateOf(ctx); fd == 2 && st != nil {
			st.writeStderr(b)
		}
		total += l
	}
	if !writeU32(m, nwritten, total) {
		errno(s, errnoInval)
		return
	}
	errno(s, errnoSuccess)
}

func fdRead(_ context.Context, m api.Module, s []uint64) {
	if uint32(s[0]) != 0 {
		errno(s, errnoBadf)
		return
	}
	// stdin is empty: end of file.
	if !writeU32(m, uint32(s[3]), 0) {
		errno(s, errnoInval)
		return
	}
	errno(s, errnoSuccess)
}

func fdFdstatGet(_ context.Context, m api.Module, s []uint64) {
	fd, p := uint32(s[0]), uint32(s[1])
	if fd > 2 {
		errno(s, errnoBadf)
		return
	}
	var st [24]byte
	st[0] = 2                                        // character device
	binary.LittleEndian.PutUint64(st[8:], 1<<6|1<<1) // fd_write, fd_read
	if !m.Memory().Write(p, st[:]) {
		errno(s, errnoInval)
		return
	}
	errno(s, errnoSuccess)
}

func randomGet(ctx context.Context, m api.Module, s []uint64) {
	b, ok := m.Memory().Read(uint32(s[0]), uint32(s[1]))
	st := stateOf(ctx)
	if !ok || st == nil {
		errno(s, errnoInval)
		return
	}
	_, _ = st.rng.Read(b)
	errno(s, errnoSuccess)
}

// pollOneoff supports what Go's scheduler uses to sleep: clock
// subscriptions. It sleeps until the earliest one (bounded by the call's
// deadline) and reports it; fd subscriptions fail with EBADF at once.
func pollOneoff(ctx context.Context, m api.Module, s []uint64) {
	in, out, n, neventsPtr := uint32(s[0]), uint32(s[1]), uint32(s[2]), uint32(s[3])
	mem := m.Memory()
	subs, ok := mem.Read(in, n*subscriptionSize)
	if n == 0 || !ok {
		errno(s, errnoInval)
		return
	}
	events, ok := mem.Read(out, n*eventSize)
	if !ok {
		errno(s, errnoInval)
		return
	}
	le := binary.LittleEndian
	clear(events)
	nev := uint32(0)
	best, bestTimeout := -1, time.Duration(0)
	for i := uint32(0); i < n; i++ {
		sub := subs[i*subscriptionSize:]
		if sub[8] == eventTypeClock {
			timeout := time.Duration(le.Uint64(sub[24:]))
			if le.Uint16(sub[40:])&1 != 0 { // absolute time on the subscription's clock
				if le.Uint32(sub[16:]) == clockRealtime {
					timeout -= time.Duration(time.Now().UnixNano())
				} else {
					timeout -= time.Since(hostStart)
				}
			}
			if best < 0 || timeout < bestTimeout {
				best, bestTimeout = int(i), timeout
			}
			continue
		}
		ev := events[nev*eventSize:]
		copy(ev[0:8], sub[0:8]) // userdata
		le.PutUint16(ev[8:], errnoBadf)
		ev[10] = sub[8]
		nev++
	}
	if nev == 0 && best >= 0 {
		if bestTimeout > 0 {
			t := time.NewTimer(bestTimeout)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
		ev := events[:eventSize]
		copy(ev[0:8], subs[best*subscriptionSize:best*subscriptionSize+8])
		ev[10] = eventTypeClock
		nev = 1
	}
	if !writeU32(m, neventsPtr, nev) {
		errno(s, errnoInval)
		return
	}
	errno(s, errnoSuccess)
}

func procExit(ctx context.Context, m api.Module, s []uint64) {
	code := uint32(s[0])
	if st := stateOf(ctx); st != nil && st.exit != nil {
		*st.exit = code
	}
	_ = m.CloseWithExitCode(ctx, code)
	panic(sys.NewExitError(code))
}

// instantiateWASI registers the sandbox's WASI host module in r.
func instantiateWASI(ctx context.Context, r wazero.Runtime) error {
	b := r.NewHostModuleBuilder(wasiModule)
	for name, f := range wasiFuncs {
		b.NewFunctionBuilder().WithGoModuleFunction(f.fn, f.params, f.results).Export(name)
	}
	if _, err := b.Instantiate(ctx); err != nil {
		return fmt.Errorf("wasmpolicy: WASI host module: %w", err)
	}
	return nil
}

// checkImports refuses a module importing anything the sandbox does not
// provide, or with a signature other than WASI's.
func checkImports(cm wazero.CompiledModule) error {
	if len(cm.ImportedMemories()) > 0 {
		return fmt.Errorf("imports a memory; a policy module must define its own")
	}
	for _, def := range cm.ImportedFunctions() {
		mod, name, _ := def.Import()
		f, ok := wasiFuncs[name]
		if mod != wasiModule || !ok {
			return fmt.Errorf("imports %s.%s, which the policy sandbox does not provide (no filesystem, no network; see docs/policies.md)", mod, name)
		}
		if !slices.Equal(def.ParamTypes(), f.params) || !slices.Equal(def.ResultTypes(), f.results) {
			return fmt.Errorf("imports %s.%s with signature %v -> %v, WASI's is %v -> %v", mod, name,
				typeNames(def.ParamTypes()), typeNames(def.ResultTypes()), typeNames(f.params), typeNames(f.results))
		}
	}
	return nil
}

func typeNames(ts []api.ValueType) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = api.ValueTypeName(t)
	}
	return out
}
