package verify

import (
	"errors"
	"fmt"
	"io"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// UndecodableBatch is a batch whose compressed records cannot be read:
// stored verbatim (mirror mode never looks inside batches), it would fail
// every consumer that reads it.
type UndecodableBatch struct {
	Offset int64  `json:"offset"`
	Codec  string `json:"codec"`
	Reason string `json:"reason"`
}

// maxUndecodable bounds the batches listed per partition.
const maxUndecodable = 16

// verifyLimits bound what verify decompresses per batch (1 GiB: the most
// kbatch decodes at all), streaming: nothing but the decoder's working
// set is held.
var verifyLimits = kbatch.Limits{MaxBatchBytes: 1 << 30}

// checkDecodable walks a compressed batch's records; nil when they read
// (or the batch is not compressed).
func checkDecodable(b []byte) *UndecodableBatch {
	if len(b) < kbatch.HeaderSize || kbatch.Codec(kbatch.Attributes(b)&kbatch.CodecMask) == kbatch.CodecNone {
		return nil
	}
	err := walkBatch(b)
	if err == nil {
		return nil
	}
	return &UndecodableBatch{Offset: kbatch.BaseOffset(b), Codec: kbatch.Codec(kbatch.Attributes(b) & kbatch.CodecMask).String(), Reason: err.Error()}
}

func walkBatch(b []byte) error {
	rr, err := kbatch.NewRecordReader(b, verifyLimits)
	if err != nil {
		return err
	}
	defer rr.Close()
	for {
		if _, err := rr.Next(); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

// unreadable describes why a batch's records could not be decoded, with
// its offset and codec.
func unreadable(b []byte, err error) string {
	what := "records are malformed"
	if errors.Is(err, kbatch.ErrUndecodable) || errors.Is(err, kbatch.ErrBatchTooLarge) {
		what = "cannot be decompressed"
	}
	codec := "?"
	if len(b) >= kbatch.HeaderSize {
		codec = kbatch.Codec(kbatch.Attributes(b) & kbatch.CodecMask).String()
	}
	return fmt.Sprintf("batch at offset %d (%s) %s: %v", baseOffset(b), codec, what, err)
}
