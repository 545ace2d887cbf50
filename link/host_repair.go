package link

// repairHost is the part of Host for divergence repair and failback:
// truncation keeping the cut records, converting a writable topic into a
// mirror.
// Its owner fills it in (methods the broker exports in broker/link_repair.go).
type repairHost interface{}
