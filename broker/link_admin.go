package broker

// The cluster link's admin requests (wireext/link.go, docs/protocol.md
// "Cluster link APIs"), keys 22000-22006, version 0, flexible. Each
// handler decodes the raw body with wireext (malformed: the connection
// is closed, as for any malformed request), authorizes
// (docs/security.md), calls the installed LinkService and maps its error
// to Kafka's code (linkAnswer); every state-changing request writes audit
// records (validate-only creations do not). Without a LinkService every
// request answers INVALID_REQUEST "this broker runs no cluster links".
//
// Authorization:
//   - CreateMirrorLink, DeleteMirrorLink: ALTER on CLUSTER
//     (linkAdminPermitted), CLUSTER_AUTHORIZATION_FAILED.
//   - StartMirrorTopics, PauseMirrorTopics, TruncateMirrorTopics: the
//     mirror lifecycle permission (CLUSTER_ACTION or ALTER on CLUSTER,
//     CLUSTER_AUTHORIZATION_FAILED for the request) and per topic ALTER
//     (CREATE for a topic a StartMirrorTopics creates),
//     TOPIC_AUTHORIZATION_FAILED for that topic; refused topics never
//     reach the service. A pause or resume of a whole link checks each of
//     the link's topics and passes the permitted ones by name when some
//     are refused.
//   - DescribeMirrorLinks, DescribeMirrors: DESCRIBE on CLUSTER; the
//     topic rows the principal may not DESCRIBE are left out. A
//     DescribeMirrors with LeaderOnly (another broker asking the leaders'
//     view, link_status_cluster.go) also passes with CLUSTER_ACTION on
//     CLUSTER (an ACL: allow.everyone.if.no.acl.found does not grant
//     it), and then answers every row it leads.
//
// Source config values that are secrets (isSecretConfig) are masked in
// DescribeMirrorLinks whatever the service answers, and no audit record
// carries a config value.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/authz"
	"github.com/verbatim-kafka/verbatim/secret"
	"github.com/verbatim-kafka/verbatim/wireext"
)

func init() {
	registerExt(wireext.APIKeyCreateMirrorLink, 0, handleCreateMirrorLink)
	registerExt(wireext.APIKeyDeleteMirrorLink, 0, handleDeleteMirrorLink)
	registerExt(wireext.APIKeyDescribeMirrorLinks, 0, handleDescribeMirrorLinks)
	registerExt(wireext.APIKeyStartMirrorTopics, 0, handleStartMirrorTopics)
	registerExt(wireext.APIKeyPauseMirrorTopics, 0, handlePauseMirrorTopics)
	registerExt(wireext.APIKeyDescribeMirrors, 0, handleDescribeMirrors)
	registerExt(wireext.APIKeyTruncateMirrorTopics, 0, handleTruncateMirrorTopics)
}

// mirrorLinkFeature is the ApiVersions supported feature of the link
// admin requests.
func mirrorLinkFeature() kmsg.ApiVersionsResponseSupportedFeature {
	f := kmsg.NewApiVersionsResponseSupportedFeature()
	f.Name = wireext.FeatureMirrorLink
	f.MinVersion, f.MaxVersion = wireext.FeatureMirrorLinkMinVersion, wireext.FeatureMirrorLinkMaxVersion
	return f
}

// linkReply is a link response (always flexible).
type linkReply struct{ m wireext.LinkMessage }

func (r linkReply) AppendTo(dst []byte) []byte { return r.m.AppendTo(dst) }
func (linkReply) IsFlexible() bool             { return true }

// auditLinkType is the resource type of a link in audit records.
const auditLinkType = "CLUSTER_LINK"

// errNoLinks answers every link request of a broker without a link
// service.
var errNoLinks = kafkaErr(kerr.InvalidRequest, "this broker runs no cluster links")

// linkAnswer maps an error of a link request to Kafka's code and message:
// mapError's boundary; a wrapped bare kerr code keeps the wrapper's text;
// a deadline is REQUEST_TIMED_OUT.
func linkAnswer(err error) (int16, string) {
	if err == nil {
		return 0, ""
	}
	code, msg, ok := mapError(err, false)
	if ok && code == kerr.UnknownServerError.Code && errors.Is(err, context.DeadlineExceeded) {
		return kerr.RequestTimedOut.Code, err.Error()
	}
	if !ok {
		var k *kerr.Error
		if errors.As(err, &k) && error(k) != err {
			msg = strings.TrimPrefix(err.Error(), k.Error()+": ")
		}
	}
	return code, msg
}

// decodeLink decodes a link request body; an error closes the connection.
func decodeLink[T any, P interface {
	*T
	wireext.LinkMessage
}](r *Request) (*T, error) {
	v := new(T)
	if err := P(v).ReadFrom(r.Body); err != nil {
		return nil, fmt.Errorf("malformed %s v%d request: %w", apiName(r.Key), r.Version, err)
	}
	return v, nil
}

func handleCreateMirrorLink(ctx context.Context, s *Server, r *Request) (Reply, error) {
	req, err := decodeLink[wireext.CreateMirrorLinkRequest](r)
	if err != nil {
		return nil, err
	}
	resp := &wireext.CreateMirrorLinkResponse{}
	svc := s.linkSvc()
	switch {
	case svc == nil:
		err = errNoLinks
	case !s.linkAdminPermitted(r):
		err = errLinkAdminPermission(r, "creating cluster link "+req.Link.Name)
	case req.Link.Name == "":
		err = kafkaErr(kerr.InvalidRequest, "a cluster link needs a name")
	default:
		err = svc.CreateLink(ctx, r.Principal, req.Link, req.ValidateOnly)
	}
	resp.ErrorCode, resp.ErrorMessage = linkAnswer(err)
	if !req.ValidateOnly {
		c := &req.Link
		s.auditRecord(r, "create link", auditLinkType, c.Name, resp.ErrorCode,
			"source_bootstrap", auditString(c.SourceBootstrap), "source_config_keys", sortedConfigKeys(c.SourceConfig),
			"topics", auditString(c.Topics), "exclude", auditString(c.Exclude), "groups", auditString(c.Groups),
			"sync_configs", c.SyncConfigs, "sync_interval_ms", c.SyncIntervalMs, "throttle_bytes_per_sec", c.ThrottleBytesPerSec)
	}
	return linkReply{resp}, nil
}

func handleDeleteMirrorLink(ctx context.Context, s *Server, r *Request) (Reply, error) {
	req, err := decodeLink[wireext.DeleteMirrorLinkRequest](r)
	if err != nil {
		return nil, err
	}
	resp := &wireext.DeleteMirrorLinkResponse{}
	svc := s.linkSvc()
	switch {
	case svc == nil:
		err = errNoLinks
	case !s.linkAdminPermitted(r):
		err = errLinkAdminPermission(r, "deleting cluster link "+req.Name)
	default:
		err = svc.DeleteLink(ctx, r.Principal, req.Name, req.Force)
	}
	resp.ErrorCode, resp.ErrorMessage = linkAnswer(err)
	s.auditRecord(r, "delete link", auditLinkType, req.Name, resp.ErrorCode, "force", req.Force)
	return linkReply{resp}, nil
}

// describeRefusal is the check of the describing requests.
func (s *Server) describeRefusal(r *Request) error {
	if s.linkSvc() == nil {
		return errNoLinks
	}
	if !s.authorizedCluster(r, authz.OpDescribe) {
		return kafkaErr(kerr.ClusterAuthorizationFailed, fmt.Sprintf("describing cluster links and mirrors needs DESCRIBE on the CLUSTER resource %s (principal %s)", authz.ClusterName, r.Principal))
	}
	return nil
}

func handleDescribeMirrorLinks(ctx context.Context, s *Server, r *Request) (Reply, error) {
	req, err := decodeLink[wireext.DescribeMirrorLinksRequest](r)
	if err != nil {
		return nil, err
	}
	resp := &wireext.DescribeMirrorLinksResponse{}
	if err = s.describeRefusal(r); err == nil {
		resp.Links, err = s.linkSvc().DescribeLinks(ctx, req.Names)
	}
	resp.ErrorCode, resp.ErrorMessage = linkAnswer(err)
	if err != nil {
		resp.Links = nil
	}
	// Copies: the service's answer is not changed.
	links := resp.Links
	resp.Links = nil
	var leaders map[string]map[string]string
	if s.LinkClustered() && len(links) > 0 {
		leaders = s.leadersTopicStates(ctx) // link_status_cluster.go: one ask of the leaders for all
	}
	for _, l := range links {
		l.Config.SourceConfig = maskSecrets(l.Config.SourceConfig)
		if l.ErrorCode == 0 && leaders != nil {
			l.Topics = withTopicStates(l.Topics, leaders[l.Config.Name])
		}
		var kept []wireext.LinkTopic
		for _, t := range l.Topics {
			if s.authorized(r, authz.OpDescribe, authz.ResourceTopic, t.Topic) {
				kept = append(kept, t)
			}
		}
		l.Topics = kept
		resp.Links = append(resp.Links, l)
	}
	return linkReply{resp}, nil
}

func handleDescribeMirrors(ctx context.Context, s *Server, r *Request) (Reply, error) {
	req, err := decodeLink[wireext.DescribeMirrorsRequest](r)
	if err != nil {
		return nil, err
	}
	resp := &wireext.DescribeMirrorsResponse{}
	// A broker asking the leaders (LeaderOnly, link_status_cluster.go)
	// passes with CLUSTER_ACTION (never granted by
	// allow.everyone.if.no.acl.found, or the rows would not be filtered
	// by anyone), and its answer is filtered by the client's permissions
	// where the client asked.
	asBroker := req.LeaderOnly && s.linkSvc() != nil && s.mirrorPermitted(r)
	if !asBroker {
		err = s.describeRefusal(r)
	}
	if err == nil {
		resp.Partitions, err = s.linkSvc().DescribeMirrors(ctx, *req)
	}
	switch {
	case err != nil:
		resp.Partitions = nil
	case req.LeaderOnly:
		resp.Partitions = s.ledStatuses(resp.Partitions)
	case s.LinkClustered():
		resp.Partitions = s.leadersStatuses(ctx, *req, resp.Partitions)
	}
	resp.ErrorCode, resp.ErrorMessage = linkAnswer(err)
	if asBroker {
		return linkReply{resp}, nil
	}
	var kept []wireext.MirrorPartitionStatus
	for _, p := range resp.Partitions {
		if s.authorized(r, authz.OpDescribe, authz.ResourceTopic, p.Topic) {
			kept = append(kept, p)
		}
	}
	resp.Partitions = kept
	return linkReply{resp}, nil
}

// isSecretConfig reports whether a source client property holds a secret
// (its value is never answered or logged): the rule the link stores them
// encrypted by (secret.IsSecretName, Kafka's PASSWORD-typed client
// configs), applied case-insensitively here.
func isSecretConfig(k string) bool { return secret.IsSecretName(strings.ToLower(k)) }

// maskedValue replaces a secret's value in DescribeMirrorLinks.
const maskedValue = secret.Hidden

// maskSecrets returns m with its secret values masked (a copy; nil for
// an empty m).
func maskSecrets(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if isSecretConfig(k) {
			v = maskedValue
		}
		out[k] = v
	}
	return out
}

// sortedConfigKeys are the property names of a source config, for the
// audit log (values are left out).
func sortedConfigKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
