package broker

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// BenchmarkFetchTransfer compares the ways a fetch can move stored bytes
// (page-cache hot) to a client socket over loopback:
//
//   - copy: read into a fresh buffer, append to the response buffer, write
//     (what a kmsg-encoded response costs);
//   - pread+writev: read into a pooled buffer, one vectored write of the
//     response header and the records;
//   - sendfile: write the header, then sendfile(2) from the segment at an
//     explicit offset (no shared file position).
func BenchmarkFetchTransfer(b *testing.B) {
	const fileSize = 64 << 20
	path := filepath.Join(b.TempDir(), "seg.log")
	data := make([]byte, fileSize)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	hdr := make([]byte, 128)
	pool := sync.Pool{New: func() any { return new([]byte) }}
	for _, size := range []int{16 << 10, 256 << 10, 1 << 20} {
		for _, mode := range []string{"copy", "pread+writev", "sendfile"} {
			b.Run(fmt.Sprintf("%s/%dKiB", mode, size>>10), func(b *testing.B) {
				c, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				tc := c.(*net.TCPConn)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				var resp []byte
				pos := int64(0)
				for i := 0; i < b.N; i++ {
					if pos+int64(size) > fileSize {
						pos = 0
					}
					switch mode {
					case "copy":
						buf := make([]byte, size)
						if _, err := f.ReadAt(buf, pos); err != nil {
							b.Fatal(err)
						}
						resp = append(append(resp[:0], hdr...), buf...)
						if _, err := c.Write(resp); err != nil {
							b.Fatal(err)
						}
						if cap(resp) > 1<<20 {
							resp = nil // as the connection writer drops large buffers
						}
					case "pread+writev":
						pb := pool.Get().(*[]byte)
						if cap(*pb) < size {
							*pb = make([]byte, size)
						}
						buf := (*pb)[:size]
						if _, err := f.ReadAt(buf, pos); err != nil {
							b.Fatal(err)
						}
						bufs := net.Buffers{hdr, buf}
						if _, err := bufs.WriteTo(c); err != nil {
							b.Fatal(err)
						}
						pool.Put(pb)
					case "sendfile":
						if _, err := c.Write(hdr); err != nil {
							b.Fatal(err)
						}
						if err := sendfileAt(tc, f, pos, size); err != nil {
							b.Fatal(err)
						}
					}
					pos += int64(size)
				}
			})
		}
	}
}

// sendfileAt sends n bytes of f from off to c with sendfile(2), waiting
// for the socket when it is full.
func sendfileAt(c *net.TCPConn, f *os.File, off int64, n int) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	for n > 0 && serr == nil {
		werr := rc.Write(func(fd uintptr) bool {
			w, e := syscall.Sendfile(int(fd), int(f.Fd()), &off, n)
			if w > 0 {
				n -= w
			}
			if e == syscall.EAGAIN {
				return false
			}
			if e != nil && e != syscall.EINTR {
				serr = e
			}
			return true
		})
		if werr != nil {
			return werr
		}
	}
	return serr
}
