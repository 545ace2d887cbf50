package broker

// Formatting a data dir ahead of the first start (`verbatim format`, as
// kafka-storage.sh format): the format version, meta.properties and the
// first SCRAM users, so a broker whose listeners all require SASL has an
// administrator from its first start.

import (
	"errors"
	"fmt"
	"os"

	"github.com/verbatim-kafka/verbatim/authn"
)

// FormatOptions says how to format a data dir.
type FormatOptions struct {
	DataDir string
	NodeID  int32
	// ClusterID is written to meta.properties ("" : a random one).
	ClusterID string
	// SCRAM are the credentials to store (`--add-scram`).
	SCRAM []authn.ScramEntry
}

// ErrAlreadyFormatted is returned by Format for a data dir that has been
// formatted (or used by a broker) before.
var ErrAlreadyFormatted = errors.New("data dir is already formatted")

// Format creates and formats o.DataDir as the first start of a broker
// would, then stores o.SCRAM. A data dir that is already formatted is
// refused with ErrAlreadyFormatted and left as it is.
func Format(o FormatOptions) error {
	if o.DataDir == "" {
		return errors.New("broker: the data dir is required")
	}
	lock, err := lockDataDir(o.DataDir)
	if err != nil {
		return err
	}
	defer lock.release()
	fsys := newDirFS(o.DataDir)
	if _, err := fsys.Stat(formatFileName); err == nil {
		return fmt.Errorf("%w: %s", ErrAlreadyFormatted, o.DataDir)
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := checkFormat(fsys, o.DataDir); err != nil {
		return err
	}
	if o.ClusterID != "" {
		body := fmt.Sprintf("#Written by verbatim\nversion=1\ncluster.id=%s\nnode.id=%d\n", o.ClusterID, o.NodeID)
		if err := writeFileAtomic(fsys, ".", metaPropsName, []byte(body)); err != nil {
			return err
		}
	}
	if _, err := loadOrCreateMetaProps(fsys, o.NodeID); err != nil {
		return err
	}
	if len(o.SCRAM) == 0 {
		return nil
	}
	st, err := openSCRAMStore(fsys)
	if err != nil {
		return err
	}
	return st.Update(func(tx *authn.Tx) error {
		for _, e := range o.SCRAM {
			tx.Put(e.User, e.Mechanism.Name, e.Credential)
		}
		return nil
	})
}
