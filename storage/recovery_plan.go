package storage

import (
	"errors"
	"sort"
	"strings"
)

// Open loads a partition in three phases:
//
//	scan   what is on disk: the directory listing and the checkpoints
//	       (scanDir, Log.scan), then, segment by segment, what loading it
//	       as trusted finds (segProbe);
//	plan   pure functions of the scan: which files go, which segments are
//	       opened and trusted, where batch-by-batch validation starts (its
//	       only I/O is the probe it is given), the log bounds, the producer
//	       snapshots kept and the recovery point (planOpen, planTrust,
//	       planBounds);
//	apply  Log.load does it, in an order that is safe across a second crash.

// dirListing is what the names in a partition directory say.
type dirListing struct {
	cleanMarker bool     // the clean-shutdown marker is present
	stray       []string // leftover temporary files, then index files whose log is gone
	bases       []int64  // segment base offsets, ascending
}

// scanDir classifies the names of a partition directory.
func scanDir(names []string) dirListing {
	var d dirListing
	logs := map[int64]bool{}
	for _, name := range names {
		switch {
		case name == cleanShutdownFile:
			d.cleanMarker = true
		case strings.HasSuffix(name, ".tmp") || strings.HasSuffix(name, deletedSuffix) ||
			strings.HasSuffix(name, cleanedSuffix) || strings.HasSuffix(name, swapSuffix):
			d.stray = append(d.stray, name)
		}
		if b, ok := parseSegmentFileName(name, logSuffix); ok {
			d.bases = append(d.bases, b)
			logs[b] = true
		}
	}
	// Index files without a log (the log's creation was lost) go away.
	for _, name := range names {
		for _, suf := range []string{indexSuffix, timeIndexSuffix, TxnIndexSuffix} {
			if b, ok := parseSegmentFileName(name, suf); ok && !logs[b] {
				d.stray = append(d.stray, name)
			}
		}
	}
	sort.Slice(d.bases, func(i, j int) bool { return d.bases[i] < d.bases[j] })
	return d
}

// diskScan is what Open reads before changing anything.
type diskScan struct {
	dirListing
	// epochs is the leader-epoch cache as checkpointed; nil when the
	// checkpoint is corrupt.
	epochs *EpochCache
	// logStart and recoveryPoint are the checkpointed values, -1 when
	// absent or corrupt.
	logStart, recoveryPoint int64
	// rolled is the size and end of each segment when it rolled (read
	// only when there are segments).
	rolled map[int64]rolledSegment
}

// scan reads the directory listing and the checkpoints.
func (l *Log) scan() (diskScan, error) {
	fs, dir := l.fs, l.dir
	names, err := fs.ReadDir(dir)
	if err != nil {
		return diskScan{}, err
	}
	sc := diskScan{dirListing: scanDir(names)}
	if sc.epochs, err = OpenEpochCache(fs, dir); err != nil {
		if !errors.Is(err, ErrCorruptCheckpoint) {
			return diskScan{}, err
		}
		sc.epochs = nil
	}
	if sc.logStart, err = readLogStartOffset(fs, dir, l.cfg.Topic, l.cfg.Partition); err != nil {
		if !errors.Is(err, ErrCorruptCheckpoint) {
			return diskScan{}, err
		}
		sc.logStart = -1
	}
	if sc.recoveryPoint, err = readRecoveryPoint(fs, dir, l.cfg.Topic, l.cfg.Partition); err != nil {
		if !errors.Is(err, ErrCorruptCheckpoint) {
			return diskScan{}, err
		}
		// Unknown: nothing is trusted, every segment is validated.
		sc.recoveryPoint = -1
	}
	if len(sc.bases) > 0 {
		if sc.rolled, err = readRolledSegments(fs, dir); err != nil {
			return diskScan{}, err
		}
	}
	return sc, nil
}

// openPlan is what to do with the files before any segment is read.
type openPlan struct {
	remove []string // stray files to delete
	// discardEpochs: the leader-epoch checkpoint is corrupt; it is
	// deleted and the cache rebuilt from the batches.
	discardEpochs bool
	// emptyAt >= 0: there is no segment; the log starts empty there (the
	// checkpointed log start, or 0).
	emptyAt int64
	// dropBelowStart are segments wholly below the checkpointed log start
	// (their deletion did not reach the disk), deleted again; open are
	// the segments kept, ascending.
	dropBelowStart, open []int64
	// trustAll: a clean shutdown with a usable epoch checkpoint; every
	// segment is trusted as loaded (indexes checked) unless loading it
	// fails.
	trustAll bool
}

// planOpen decides from the scan what goes and what is opened.
func planOpen(sc *diskScan) openPlan {
	p := openPlan{remove: sc.stray, discardEpochs: sc.epochs == nil, emptyAt: -1,
		trustAll: sc.cleanMarker && sc.epochs != nil}
	if len(sc.bases) == 0 {
		p.emptyAt = max(sc.logStart, 0)
		return p
	}
	bases := sc.bases
	for len(bases) > 1 && sc.logStart >= bases[1] {
		p.dropBelowStart = append(p.dropBelowStart, bases[0])
		bases = bases[1:]
	}
	p.open = bases
	return p
}

// segProbe is what loading one segment as trusted (segment.loadRolled:
// indexes checked, headers after the last index entry read) found.
type segProbe struct {
	base, next, size int64
	loaded           bool // loadRolled succeeded
}

// trusted reports whether probe i of n (the previous probe, when i > 0, is
// prev) may be kept as loaded: it loaded, and a segment before the active
// one does not overlap the previous segment and, without a clean shutdown,
// lies wholly below the recovery point rp.
func trusted(i, n int, p, prev segProbe, trustAll bool, rolled map[int64]rolledSegment, rp int64) bool {
	if !p.loaded {
		return false
	}
	if i == n-1 {
		return true
	}
	if i > 0 && p.base < prev.next {
		return false
	}
	return trustAll || trustedBelow(p, rolled, rp)
}

// trustedBelow reports whether a rolled segment, as loaded, lies wholly
// below the recovery point rp. Its end is the one recorded at its roll
// when there is one: a segment that lost its tail ends lower on disk than
// it did, possibly below rp although the lost batches were not.
func trustedBelow(p segProbe, rolled map[int64]rolledSegment, rp int64) bool {
	end, size := p.next, p.size
	if want, ok := rolled[p.base]; ok {
		end, size = max(end, want.next), max(size, want.size)
	}
	return end <= rp && size == p.size
}

// planTrust decides where batch-by-batch validation starts. It walks the
// n segments in order, loading each as trusted with probe(k), while they
// may be trusted: every segment before the active one until the first
// that is not, and the active one too after a clean shutdown (otherwise
// the active segment is always validated). validate is false when every
// segment, the active one included, is trusted; otherwise recoverFrom is
// the first segment that is not. probe is the only I/O; the decisions
// are the scan's.
func planTrust(n int, trustAll bool, rolled map[int64]rolledSegment, rp int64, probe func(k int) segProbe) (recoverFrom int, validate bool) {
	var prev segProbe
	for k := 0; k < n-1 || (k == n-1 && trustAll); k++ {
		p := probe(k)
		if !trusted(k, n, p, prev, trustAll, rolled, rp) {
			return k, true
		}
		prev = p
	}
	if trustAll {
		return n - 1, false
	}
	return n - 1, true
}

// boundsPlan is what the recovered segments and the checkpoints imply.
type boundsPlan struct {
	// restartAt >= 0: the checkpointed log start is above the recovered
	// log end (the commit point of TruncateFullyAndStartAt, or of
	// DeleteRecords up to an end a crash then cut back): every segment is
	// deleted and the log restarts empty there, as Kafka's loading does.
	restartAt int64
	logStart  int64
	// snapshotsAbove >= 0: producer snapshots above it are deleted (only
	// those up to the first validated segment describe durable data whose
	// transaction indexes are durable too); -1 keeps them all.
	snapshotsAbove int64
	// recoveryPoint is the in-memory recovery point: the log end after a
	// clean load; else the recorded one (the first segment's base without
	// one), no higher than the log end (data recovered above it, from the
	// page cache, is not known durable). persistRP: the recorded value is
	// higher and is lowered on disk.
	recoveryPoint int64
	persistRP     bool
}

// planBounds computes the log bounds after the segments are loaded: first
// is the first segment's base, leo the recovered log end, recoveredBase
// the base of the first validated segment; clean means nothing was
// validated or rebuilt.
func planBounds(first, leo, recoveredBase int64, sc *diskScan, clean bool) boundsPlan {
	b := boundsPlan{restartAt: -1, logStart: first, snapshotsAbove: -1}
	cp := sc.logStart
	if cp > leo {
		b.restartAt, b.logStart = cp, cp
		return b
	}
	if cp > first {
		b.logStart = cp
	}
	if clean {
		b.recoveryPoint = leo
		return b
	}
	b.snapshotsAbove = recoveredBase
	b.recoveryPoint = min(first, leo)
	if sc.recoveryPoint >= 0 {
		b.recoveryPoint = min(sc.recoveryPoint, leo)
	}
	b.persistRP = sc.recoveryPoint > b.recoveryPoint
	return b
}
