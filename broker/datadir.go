package broker

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/verbatim-kafka/verbatim/storage"
)

// The data directory layout owned by the broker (storage owns the partition
// directories "<topic>-<partition>" beside these files):
//
//	.lock                 flock held while a broker runs; holds its pid
//	verbatim.format       the data format version, "1\n"
//	meta.properties       Kafka-style: version, cluster.id, node.id
//	verbatim-meta/        topic metadata and the producer id allocator
const (
	lockFileName   = ".lock"
	formatFileName = "verbatim.format"
	metaPropsName  = "meta.properties"
	metaDirName    = "verbatim-meta"
)

// DataFormatVersion is the on-disk format version this build writes and the
// newest it reads. A data dir written by a newer build is refused rather than
// misread.
const DataFormatVersion = 1

// ErrDataDirLocked is returned (wrapped, with the holder's pid) when another
// process holds the data dir.
var ErrDataDirLocked = errors.New("data dir is locked by another process")

// ErrDataDirFormat is returned (wrapped) when the data dir's format version is
// unknown to this build.
var ErrDataDirFormat = errors.New("unsupported data dir format version")

// dirLock is an flock held on <data-dir>/.lock for the broker's lifetime.
type dirLock struct {
	f *os.File
}

// lockDataDir creates dir if needed and takes an exclusive, non-blocking
// flock on its lock file. The lock is advisory and dies with the process,
// so a crashed broker never leaves a stale lock behind; the pid written into
// the file only serves the error message of a refused second broker.
func lockDataDir(dir string) (*dirLock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating data dir: %w", err)
	}
	name := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := make([]byte, 32)
		n, _ := f.ReadAt(holder, 0)
		f.Close()
		pid := strings.TrimSpace(string(holder[:n]))
		if pid == "" {
			pid = "unknown"
		}
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is held by pid %s", ErrDataDirLocked, dir, pid)
		}
		return nil, fmt.Errorf("locking data dir %s: %w", dir, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{f: f}, nil
}

func (l *dirLock) release() {
	if l == nil || l.f == nil {
		return
	}
	_ = l.f.Truncate(0)
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
	l.f = nil
}

// checkFormat reads the format version file, writing it on first start. A
// directory that holds anything but the lock file and no version file is
// refused too: it was not written by Verbatim.
func checkFormat(fsys storage.FS, dir string) error {
	data, err := readFile(fsys, formatFileName)
	if errors.Is(err, os.ErrNotExist) {
		names, err := fsys.ReadDir(".")
		if err != nil {
			return fmt.Errorf("listing data dir: %w", err)
		}
		for _, n := range names {
			if n != lockFileName {
				return fmt.Errorf("%w: %s has no %s but is not empty (found %q); refusing to use a directory not written by verbatim",
					ErrDataDirFormat, dir, formatFileName, n)
			}
		}
		return writeFileAtomic(fsys, ".", formatFileName, []byte(strconv.Itoa(DataFormatVersion)+"\n"))
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", formatFileName, err)
	}
	v, perr := strconv.Atoi(string(bytes.TrimSpace(data)))
	if perr != nil {
		return fmt.Errorf("%w: %s/%s holds %q, not a version number", ErrDataDirFormat, dir, formatFileName, strings.TrimSpace(string(data)))
	}
	if v != DataFormatVersion {
		return fmt.Errorf("%w: %s/%s says version %d, this build reads only version %d", ErrDataDirFormat, dir, formatFileName, v, DataFormatVersion)
	}
	return nil
}

// metaProps is Kafka's meta.properties: the cluster id and node id a data
// dir belongs to.
type metaProps struct {
	clusterID string
	nodeID    int32
}

// loadOrCreateMetaProps returns the persisted cluster id, creating one on
// first start. A node id different from the persisted one is refused, as
// Kafka does, so a data dir is never silently adopted by another node.
func loadOrCreateMetaProps(fsys storage.FS, nodeID int32) (metaProps, error) {
	return loadOrCreateMetaPropsWith(fsys, nodeID, "")
}

// loadOrCreateMetaPropsWith is loadOrCreateMetaProps with the cluster id
// given (cluster mode: the cluster store's); "" creates a random one. A
// data dir of another cluster is refused, as Kafka refuses it.
func loadOrCreateMetaPropsWith(fsys storage.FS, nodeID int32, clusterID string) (metaProps, error) {
	data, err := readFile(fsys, metaPropsName)
	if errors.Is(err, os.ErrNotExist) {
		var u [16]byte
		if _, err := rand.Read(u[:]); err != nil {
			return metaProps{}, err
		}
		u[6] = u[6]&0x0f | 0x40
		u[8] = u[8]&0x3f | 0x80
		mp := metaProps{clusterID: base64.RawURLEncoding.EncodeToString(u[:]), nodeID: nodeID}
		if clusterID != "" {
			mp.clusterID = clusterID
		}
		body := fmt.Sprintf("#Written by verbatim\nversion=1\ncluster.id=%s\nnode.id=%d\n", mp.clusterID, nodeID)
		return mp, writeFileAtomic(fsys, ".", metaPropsName, []byte(body))
	}
	if err != nil {
		return metaProps{}, err
	}
	var mp metaProps
	mp.nodeID = -1
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		switch k {
		case "cluster.id":
			mp.clusterID = v
		case "node.id":
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				return metaProps{}, fmt.Errorf("%s: bad node.id %q", metaPropsName, v)
			}
			mp.nodeID = int32(n)
		}
	}
	if mp.clusterID == "" {
		return metaProps{}, fmt.Errorf("%s has no cluster.id", metaPropsName)
	}
	if mp.nodeID != nodeID {
		return metaProps{}, fmt.Errorf("data dir belongs to node.id %d, but this broker was started with --node-id %d", mp.nodeID, nodeID)
	}
	if clusterID != "" && mp.clusterID != clusterID {
		return metaProps{}, fmt.Errorf("data dir belongs to cluster %s, but the cluster store is cluster %s", mp.clusterID, clusterID)
	}
	return mp, nil
}
