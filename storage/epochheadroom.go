package storage

// KIP-1279 keeps a mirror partition's leader epoch (what Metadata reports
// and produce fencing checks) ahead of the leader epochs of the batches it
// stores, without adding leader-epoch cache entries: once a stored batch's
// epoch comes within MirrorEpochHeadroom of the partition's epoch, the
// partition's epoch is raised to MirrorEpochBump above the larger of the two.
const (
	MirrorEpochHeadroom = 3
	MirrorEpochBump     = 10
)

// MirrorLeaderEpoch returns the leader epoch a mirror partition whose
// epoch is cur must have after storing batches whose largest leader epoch
// is batchEpoch: cur while cur is more than MirrorEpochHeadroom ahead, else
// max(cur, batchEpoch) + MirrorEpochBump.
func MirrorLeaderEpoch(cur, batchEpoch int32) int32 {
	if batchEpoch > cur-MirrorEpochHeadroom {
		return max(cur, batchEpoch) + MirrorEpochBump
	}
	return cur
}
