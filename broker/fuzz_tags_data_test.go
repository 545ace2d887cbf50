package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/hotpath"
)

// FuzzScanProduceTags checks the mirror-tag scanner against kmsg: for a
// body both the hot path and kmsg decode, the request-level and every
// partition-level tag 22082 found by the scanner are the ones kmsg sees
// (kmsg keeps unknown tags), and the scanner never panics.
func FuzzScanProduceTags(f *testing.F) {
	set := []byte("records")
	for _, v := range []int16{9, 11, 13} {
		m := mirrorProduce(v, "t", 0, set, 5, 3)
		addProducePartition(m, "t", 1, set)
		f.Add(v, m.AppendTo(nil))
		plain := produceRequest(v, "t", 0, set)
		plain.Topics[0].Partitions[0].UnknownTags.Set(7, []byte{1, 2})
		f.Add(v, plain.AppendTo(nil))
	}
	f.Fuzz(func(t *testing.T, version int16, body []byte) {
		if version < 9 || version > 13 {
			return
		}
		var hr hotpath.ProduceRequest
		if hr.Decode(body, version) != nil {
			return
		}
		mreq, parts, err := scanProduceTags(body, version, nil)
		kr := kmsg.NewPtrProduceRequest()
		kr.Version = version
		if kr.ReadFrom(body) != nil {
			return
		}
		if len(parts) != hr.NumPartitions() && err == nil {
			t.Fatalf("scanner found %d partitions, decoder %d", len(parts), hr.NumPartitions())
		}
		var kreq []byte
		kr.UnknownTags.Each(func(tag uint32, v []byte) {
			if tag == mirrorTag {
				kreq = v
			}
		})
		if err != nil {
			// Only a tag 22082 value that does not parse may fail.
			if kreq == nil {
				bad := false
				for _, tp := range kr.Topics {
					for _, p := range tp.Partitions {
						p.UnknownTags.Each(func(tag uint32, _ []byte) { bad = bad || tag == mirrorTag })
					}
				}
				if !bad {
					t.Fatalf("scanner failed on a body without mirror tags: %v", err)
				}
			}
			return
		}
		if (kreq != nil) != (mreq != nil) {
			t.Fatalf("request-level tag: kmsg %v, scanner %v", kreq != nil, mreq != nil)
		}
		i := 0
		for _, tp := range kr.Topics {
			for _, p := range tp.Partitions {
				has := false
				p.UnknownTags.Each(func(tag uint32, _ []byte) { has = has || tag == mirrorTag })
				if has != parts[i].present {
					t.Fatalf("partition %d tag: kmsg %v, scanner %v", i, has, parts[i].present)
				}
				i++
			}
		}
	})
}
