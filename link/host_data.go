package link

// dataHost is the part of Host for the partition copies: pull-mode topics,
// the in-process mirror append and the reads a copy resumes from.
// Its owner fills it in (methods the broker exports in broker/link_data.go).
type dataHost interface{}
