//go:build wasip1

package sdk

import "unsafe"

// input is the buffer the host writes judge inputs into. It is only
// replaced when the host asks for more room, so the address handed out by
// verbatim_alloc stays valid until the next verbatim_alloc call.
var input []byte

func addrLen(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(&b[0])))<<32 | uint64(len(b))
}

//go:wasmexport verbatim_describe
func verbatimDescribe() uint64 {
	if registered == nil {
		return 0
	}
	return addrLen(descriptor)
}

//go:wasmexport verbatim_alloc
func verbatimAlloc(size uint32) uint32 {
	if uint32(len(input)) < size || len(input) == 0 {
		n := max(size, 4096)
		input = make([]byte, n)
	}
	return uint32(uintptr(unsafe.Pointer(&input[0])))
}

//go:wasmexport verbatim_judge
func verbatimJudge(ptr, n uint32) uint64 {
	base := uint32(uintptr(unsafe.Pointer(&input[0])))
	if registered == nil || ptr < base || uint64(ptr-base)+uint64(n) > uint64(len(input)) {
		panic("sdk: verbatim_judge called with a buffer verbatim_alloc did not hand out")
	}
	return addrLen(Run(registered, input[ptr-base:ptr-base+n]))
}
