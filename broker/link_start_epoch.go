package broker

// LinkForwardStartEpoch is LinkForwardLogStart carrying the source's
// leader epoch at offset (epoch >= 0), as a pusher's mirror DeleteRecords
// with MirrorStartEpoch does (mirror_start_epoch.go): the epoch cache
// takes it when it agrees with the stored batches. It meets the link's
// copy (link/dest.go) and the start-epoch forward of main in
// link-repair's merge; the link's own owner may fold it into
// link_data.go.
func (s *Server) LinkForwardStartEpoch(link, topic string, partition int32, w LinkWriter, offset int64, epoch int32) error {
	p, _, err := s.pullPartition(link, topic, partition)
	if err != nil {
		return err
	}
	if err := s.admitMirrorDelete(p, w.mirrorWriter()); err != nil {
		return linkErr(err)
	}
	if _, err := deleteRecordsAs(p, offset, true, link, epoch); err != nil {
		return linkErr(err)
	}
	return nil
}
