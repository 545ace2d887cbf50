package link

// syncHost is the part of Host for continuous sync: topic configs, source
// topic deletion and re-creation, consumer group offsets.
// Its owner fills it in (methods the broker exports in broker/link_sync.go).
type syncHost interface{}
