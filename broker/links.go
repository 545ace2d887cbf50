package broker

// The cluster link as the broker sees it: the link manager (package link,
// an application above the broker) runs inside the serve process and is
// handed to the broker with SetLinkService; the link admin handlers
// (docs/protocol.md "Cluster link APIs", wireext/link.go) authorize the
// request and then call it. Without a link service those requests answer
// INVALID_REQUEST ("this broker runs no cluster links").
//
// The broker's side of what a link needs (the in-process mirror append,
// pull-mode topics, the meta files it persists, group offsets, truncation)
// are exported methods on *Server in the link_*.go files; package link
// declares the interfaces it uses of them (link/host*.go).

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"strings"
	"sync/atomic"

	"github.com/verbatim-kafka/verbatim/wireext"
)

// LinkService is the in-broker cluster link manager. Every method is
// called after the handler authorized the request (docs/security.md), by
// the principal Principal of the request. Errors are Kafka errors
// (kerr.Error, or an error wrapping one: the code of the first kerr.Error
// in its chain is answered, the text as ErrorMessage); an error without
// one answers UNKNOWN_SERVER_ERROR.
type LinkService interface {
	CreateLink(ctx context.Context, principal string, cfg wireext.LinkConfig, validateOnly bool) error
	DeleteLink(ctx context.Context, principal string, name string, force bool) error
	// DescribeLinks answers one description per name asked (a missing
	// one with its ErrorCode set), or every link when names is empty.
	DescribeLinks(ctx context.Context, names []string) ([]wireext.LinkDescription, error)
	StartMirrorTopics(ctx context.Context, principal string, req wireext.StartMirrorTopicsRequest) ([]wireext.MirrorTopicResult, error)
	PauseMirrorTopics(ctx context.Context, principal string, req wireext.PauseMirrorTopicsRequest) ([]wireext.MirrorTopicResult, error)
	DescribeMirrors(ctx context.Context, req wireext.DescribeMirrorsRequest) ([]wireext.MirrorPartitionStatus, error)
	TruncateMirrorTopics(ctx context.Context, principal string, req wireext.TruncateMirrorTopicsRequest) ([]wireext.MirrorTopicResult, error)
}

// linkService holds the installed LinkService (nil: none).
type linkService struct{ v atomic.Pointer[LinkService] }

// SetLinkService installs the link manager; call it once, before the
// listeners serve, or with nil to remove it at shutdown.
func (s *Server) SetLinkService(ls LinkService) {
	if ls == nil {
		s.links.v.Store(nil)
		return
	}
	s.links.v.Store(&ls)
}

// linkSvc returns the installed LinkService or nil.
func (s *Server) linkSvc() LinkService {
	if p := s.links.v.Load(); p != nil {
		return *p
	}
	return nil
}

// linkMetaDir holds the files the link manager persists through
// ReadLinkMeta and WriteLinkMeta.
const linkMetaDir = metaDirName + "/links"

// ErrLinkMetaName refuses a meta file name that is not a plain file name.
var ErrLinkMetaName = errors.New("broker: link meta file names are plain names (letters, digits, '.', '_', '-')")

func checkLinkMetaName(name string) error {
	if name == "" || name == "." || name == ".." || path.Base(name) != name || strings.ContainsAny(name, `/\`) {
		return fmt.Errorf("%w: %q", ErrLinkMetaName, name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("%w: %q", ErrLinkMetaName, name)
		}
	}
	return nil
}

// ReadLinkMeta returns the link meta file name (fs.ErrNotExist when
// absent).
func (s *Server) ReadLinkMeta(name string) ([]byte, error) {
	if err := checkLinkMetaName(name); err != nil {
		return nil, err
	}
	if s.cm != nil {
		return s.readClusterLinkMeta(name) // link_cluster.go
	}
	return readFile(s.fs, linkMetaDir+"/"+name)
}

// WriteLinkMeta replaces the link meta file name atomically (temporary
// file, fsync, rename, fsync of the directory).
func (s *Server) WriteLinkMeta(name string, data []byte) error {
	if err := checkLinkMetaName(name); err != nil {
		return err
	}
	if s.cm != nil {
		return s.writeClusterLinkMeta(name, data)
	}
	if err := s.fs.MkdirAll(linkMetaDir, 0o755); err != nil {
		return fmt.Errorf("%w: %v", errStorage, err)
	}
	return writeFileAtomic(s.fs, linkMetaDir, name, data)
}

// RemoveLinkMeta deletes the link meta file name (absent is no error).
func (s *Server) RemoveLinkMeta(name string) error {
	if err := checkLinkMetaName(name); err != nil {
		return err
	}
	if s.cm != nil {
		return s.removeClusterLinkMeta(name)
	}
	err := s.fs.Remove(linkMetaDir + "/" + name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// Log is the broker's logger (the link logs through it).
func (s *Server) Log() *slog.Logger { return s.log }
