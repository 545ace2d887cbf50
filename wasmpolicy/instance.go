package wasmpolicy

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/verbatim-kafka/verbatim/policies/abi"
)

// instance is one instantiated module. It is used by one caller at a time
// (wazero functions are not goroutine-safe) and belongs to one pool, so
// one topic: its memory never sees another topic's batches.
type instance struct {
	h      *Host
	m      *module
	mod    api.Module
	mem    api.Memory
	alloc  api.Function
	judge  api.Function
	ctx    context.Context // carries st to the WASI functions
	cc     *callContext    // judge calls' context, expired by the watchdog
	st     *guestState
	exit   uint32
	buf    uint32 // input buffer from verbatim_alloc
	bufCap uint32
	stack  [2]uint64
	// lastUsed is when the last call that returned it to its pool began.
	lastUsed time.Time
}

func (h *Host) newInstance(m *module) (*instance, error) {
	var seed [32]byte
	_, _ = rand.Read(seed[:])
	in := &instance{h: h, m: m, st: &guestState{rng: mrand.NewChaCha8(seed)}}
	in.st.exit = &in.exit
	in.ctx = context.WithValue(context.Background(), guestStateKey{}, in.st)
	ctx, cancel := context.WithTimeout(in.ctx, h.opts.InitTimeout)
	defer cancel()
	mod, err := h.eng.runtime(m.bounded).InstantiateModule(ctx, m.compiled, wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		return nil, in.explain("instantiating", err)
	}
	in.mod = mod
	if m.hasInit {
		if _, err := mod.ExportedFunction(abi.ExportInitialize).Call(ctx); err != nil {
			mod.Close(context.Background())
			return nil, in.explain("initialising ("+abi.ExportInitialize+")", err)
		}
	}
	in.cc = newCallContext(in.ctx)
	h.wd.add(in.cc)
	in.mem = mod.ExportedMemory(abi.ExportMemory)
	in.alloc = mod.ExportedFunction(abi.ExportAlloc)
	in.judge = mod.ExportedFunction(abi.ExportJudge)
	return in, nil
}

func (in *instance) close() {
	if in.cc != nil {
		in.h.wd.remove(in.cc)
	}
	if in.mod != nil {
		_ = in.mod.Close(context.Background())
	}
}

// explain turns a guest failure into an error that says what happened:
// deadline, exit (Go panics exit with 2 after printing to stderr), trap.
func (in *instance) explain(what string, err error) error {
	var ee *sys.ExitError
	msg := err.Error()
	if errors.As(err, &ee) {
		switch ee.ExitCode() {
		case sys.ExitCodeDeadlineExceeded:
			msg = fmt.Sprintf("deadline exceeded (%v)", in.h.opts.CallTimeout)
		case sys.ExitCodeContextCanceled:
			msg = "cancelled"
		default:
			msg = fmt.Sprintf("exited with code %d", ee.ExitCode())
		}
	} else if i := strings.IndexByte(msg, '\n'); i > 0 {
		msg = msg[:i] // wazero appends a wasm stack trace
	}
	if tail := firstLines(in.st.stderr, 2); tail != "" {
		msg += ": " + tail
	}
	return fmt.Errorf("%s: %s", what, msg)
}

// firstLines returns the first n non-empty lines of a guest's stderr.
func firstLines(b []byte, n int) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && len(out) < n {
			out = append(out, l)
		}
	}
	return strings.Join(out, " | ")
}

// describe calls verbatim_describe and parses the descriptor.
func (in *instance) describe(timeout time.Duration) (Descriptor, error) {
	ctx, cancel := context.WithTimeout(in.ctx, timeout)
	defer cancel()
	f := in.mod.ExportedFunction(abi.ExportDescribe)
	var stack [1]uint64
	if err := f.CallWithStack(ctx, stack[:]); err != nil {
		return Descriptor{}, in.explain(abi.ExportDescribe, err)
	}
	ptr, n := uint32(stack[0]>>32), uint32(stack[0])
	if n > 64<<10 {
		return Descriptor{}, fmt.Errorf("descriptor of %d bytes (limit 64 KiB)", n)
	}
	b, ok := in.mem.Read(ptr, n)
	if !ok {
		return Descriptor{}, fmt.Errorf("descriptor at [%d, +%d) is outside memory", ptr, n)
	}
	return parseDescriptor(string(b))
}

// errGuest marks failures of the guest (as opposed to bad input).
var errGuest = errors.New("guest failed")

// run judges one encoded call, begun at now. fill writes the input into the guest
// buffer; onReject receives the verdicts. A non-nil error means the
// instance failed and must not be reused.
func (in *instance) run(now time.Time, size int, fill func(dst []byte), nb int, onReject func(i int, code int16, reason []byte)) error {
	ctx := in.cc
	ctx.begin(now)
	defer ctx.end()
	in.st.stderr = in.st.stderr[:0]
	if uint32(size) > in.bufCap || in.bufCap == 0 {
		want := max(uint32(size), 2*in.bufCap, 4096)
		in.stack[0] = uint64(want)
		if err := in.alloc.CallWithStack(ctx, in.stack[:1]); err != nil {
			return in.explain(abi.ExportAlloc, err)
		}
		in.buf, in.bufCap = uint32(in.stack[0]), want
	}
	view, ok := in.mem.Read(in.buf, uint32(size))
	if !ok {
		return fmt.Errorf("%w: %s returned a buffer outside memory", errGuest, abi.ExportAlloc)
	}
	fill(view)
	in.stack[0], in.stack[1] = uint64(in.buf), uint64(size)
	if err := in.judge.CallWithStack(ctx, in.stack[:]); err != nil {
		return in.explain(abi.ExportJudge, err)
	}
	res := in.stack[0]
	if res == 0 {
		return nil
	}
	out, ok := in.mem.Read(uint32(res>>32), uint32(res))
	if !ok {
		return fmt.Errorf("%w: verdict list outside memory", errGuest)
	}
	if err := abi.DecodeVerdicts(out, nb, onReject); err != nil {
		return fmt.Errorf("%w: malformed verdict list", errGuest)
	}
	return nil
}
