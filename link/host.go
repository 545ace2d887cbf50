package link

// Host is what the link needs of the broker; *broker.Server implements
// it. It is split by concern, each part declared in its own file next to
// the code that uses it (host_*.go), so a simulation can provide a fake.
type Host interface {
	metaHost
	dataHost
	syncHost
	repairHost
}

// metaHost persists the link manager's own files (the broker's
// verbatim-meta/links directory; plain file names).
type metaHost interface {
	// ReadLinkMeta returns a file's bytes, fs.ErrNotExist when absent.
	ReadLinkMeta(name string) ([]byte, error)
	// WriteLinkMeta replaces a file atomically.
	WriteLinkMeta(name string, data []byte) error
	RemoveLinkMeta(name string) error
	// ClusterID is the destination's cluster id.
	ClusterID() string
}
