// Package hotpath is everything between a received Produce frame and the
// storage append: pooled frame buffers charged to in-flight byte budgets as
// their bytes arrive (frame.go: first chunk, promotion, pacing), in-place
// v2 batch validation (CRC-32C, header consistency, control batch structure)
// in normal and verbatim modes (normal mode patches MaxTimestamp, the
// timestamp type and the CRC where Kafka does, LogAppendTime included, and
// walks every record, compressed batches through kbatch's streaming
// RecordReader with its working memory charged to Options.Decode), the
// submission queue that coalesces appends and hands them to storage's group
// commit, and the Produce response encoding.
//
// It must not decide topic policy (wasmpolicy does, through the caller's
// Guard, which the queue runs at the moment of the write) nor own files or offsets
// (storage does: AppendLeader stamps base offsets and leader epochs); it
// never copies record bytes between the socket buffer and the storage
// write.
//
// # Path of a produce request
//
//	FrameReader.ReadFrame   4-byte size; the body into a pooled first chunk (<= 32 KiB), promoted
//	                        to larger buffers only as it fills, each charged when taken
//	                        (connection -> peer address -> broker; blocks: back-pressure);
//	                        the read deadline paces it (minimum rate after a grace, timeout)
//	                        (the broker's connection parses the request header)
//	ProduceRequest.Decode   v3-13, record sets alias the frame, 0 allocations when reused;
//	                        the mirror fields (wireext) come out of the same pass
//	Validate                per partition, in place (normal or verbatim); its Result is
//	                        the set's summary (offsets, largest epoch) for later steps
//	Partition.Submit        inline write when the partition is idle, else queued to its owner;
//	                        whoever writes runs the append's Guard (Begin, write, End) in queue order
//	Group.Wait              completions (after the group commit when Append.Durable)
//	ProduceResponse.AppendTo  the response body (the broker frames and writes it)
//	Frame.Release           after the response is written
//
// # Validation modes
//
// Normal mode applies Kafka 4's leader rules for client produce
// (ProduceRequest.validateRecords, UnifiedLog.analyzeAndValidateRecords,
// LogValidator with origin CLIENT). Verbatim mode applies the follower
// rules (appendAsFollower) plus structural checks that every batch of a real
// Kafka log passes; it patches nothing and decompresses nothing.
//
// Error codes (normal / verbatim):
//
//	length field < 14, magic < 0 or > 2, size < 61, CRC   CORRUPT_MESSAGE / same
//	magic 0 or 1                                            INVALID_RECORD (Kafka's produce check) / UNSUPPORTED_FOR_MESSAGE_FORMAT
//	no complete batch; more than one batch                  INVALID_RECORD / (several allowed; partial tail CORRUPT_MESSAGE)
//	base offset != 0                                        INVALID_RECORD / (any offset; must be >= 0 and increase)
//	batch over max.message.bytes                            MESSAGE_TOO_LARGE / (not checked, as a follower)
//	zstd with Produce < v7                                  UNSUPPORTED_COMPRESSION_TYPE / -
//	codec 5-7                                               INVALID_RECORD / INVALID_RECORD
//	LastOffsetDelta/count inconsistent                      INVALID_RECORD (count == lod+1 > 0) / INVALID_RECORD (0 <= count <= lod+1)
//	control batch                                           INVALID_RECORD / checked (below)
//	producer id without sequence                            INVALID_RECORD / accepted (markers, coordinator writes)
//	transactional without producer id                       INVALID_RECORD / INVALID_RECORD
//	malformed record (uncompressed, or decompressed)        INVALID_RECORD / (records not read)
//	compressed payload not valid for its codec              INVALID_RECORD / (not decompressed)
//	record over max.decompressed.message.bytes (compressed) INVALID_RECORD / -
//	records over max.decompressed.batch.bytes, or a decoder
//	working set over the decode budget                      MESSAGE_TOO_LARGE / -
//	decode budget wait ended by the request's context       REQUEST_TIMED_OUT / -
//	record without key on a compacted topic                 INVALID_RECORD + per-record errors / -
//	timestamp out of bounds, client LogAppendTime           INVALID_TIMESTAMP + per-record errors / -
//
// Control batches in verbatim mode: uncompressed, LastOffsetDelta 0, one
// record at offset delta 0 or none (a marker removed by compaction), key
// version 0, type ABORT (0), COMMIT (1) or MIRROR_PID_RESET (7). Types 2-6
// (LEADER_CHANGE, SNAPSHOT_HEADER/FOOTER, KRAFT_VERSION, KRAFT_VOTERS) exist
// only in the KRaft metadata log and are refused, as are unknown types.
// ABORT/COMMIT need the transactional bit, a producer id and a value of at
// least {version >= 0, coordinator epoch}; longer values (later versions)
// pass, so transaction-version-2 markers (bumped producer epoch, same
// layout) pass. MIRROR_PID_RESET needs a decodable MirrorPidResetRecord.
//
// # Deliberate differences from Kafka
//
//   - Trailing bytes after the batch (normal) are refused; Kafka silently
//     drops a trailing partial batch.
//   - Unknown codecs get INVALID_RECORD; Kafka fails with an unexpected
//     server error.
//   - A compressed batch whose inner offset deltas are not 0..n-1 is refused;
//     Kafka re-encodes it. Verbatim never re-encodes.
//   - A compressed payload that is not valid for its codec gets
//     INVALID_RECORD; Kafka 4.4 answers UNKNOWN_SERVER_ERROR.
//   - Varints longer than their type (bits past 32/64) are refused; Kafka
//     drops the excess bits.
//   - Per-record error lists are capped at 1024 entries.
package hotpath
