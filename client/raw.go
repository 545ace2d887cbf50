package client

import (
	"bytes"
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// RawRequest is a request whose body the caller encodes: an API key kmsg
// does not know (a broker's protocol extension) at a version the caller
// chose. It implements kmsg.Request so that it travels like any request,
// and its response is a *RawResponse holding the body after the response
// header. Extensions are not listed in ApiVersions' ApiKeys (a broker
// advertises them as supported features), so RequestRaw does not
// negotiate the version: the caller checks HasFeature first.
type RawRequest struct {
	APIKey, Version int16
	// Flexible selects request header v2 and response header v1.
	Flexible bool
	Body     []byte
}

// RawResponse is the answer of a RawRequest: the body after the header.
type RawResponse struct {
	APIKey, Version int16
	Flexible        bool
	Body            []byte
}

var (
	_ kmsg.Request  = (*RawRequest)(nil)
	_ kmsg.Response = (*RawResponse)(nil)
)

func (r *RawRequest) Key() int16                 { return r.APIKey }
func (r *RawRequest) MaxVersion() int16          { return r.Version }
func (r *RawRequest) SetVersion(v int16)         { r.Version = v }
func (r *RawRequest) GetVersion() int16          { return r.Version }
func (r *RawRequest) IsFlexible() bool           { return r.Flexible }
func (r *RawRequest) AppendTo(dst []byte) []byte { return append(dst, r.Body...) }
func (r *RawRequest) ReadFrom(b []byte) error    { r.Body = bytes.Clone(b); return nil }
func (r *RawRequest) ResponseKind() kmsg.Response {
	return &RawResponse{APIKey: r.APIKey, Version: r.Version, Flexible: r.Flexible}
}
func (r *RawResponse) Key() int16                 { return r.APIKey }
func (r *RawResponse) MaxVersion() int16          { return r.Version }
func (r *RawResponse) SetVersion(v int16)         { r.Version = v }
func (r *RawResponse) GetVersion() int16          { return r.Version }
func (r *RawResponse) IsFlexible() bool           { return r.Flexible }
func (r *RawResponse) AppendTo(dst []byte) []byte { return append(dst, r.Body...) }
func (r *RawResponse) ReadFrom(b []byte) error    { r.Body = bytes.Clone(b); return nil }
func (r *RawResponse) RequestKind() kmsg.Request {
	return &RawRequest{APIKey: r.APIKey, Version: r.Version, Flexible: r.Flexible}
}

// RequestRaw sends req as it is (its key and version, no negotiation)
// and returns the response body.
func (c *Conn) RequestRaw(ctx context.Context, req *RawRequest) ([]byte, error) {
	if req.APIKey <= kmsg.MaxKey {
		return nil, fmt.Errorf("RequestRaw is for extension keys, not Kafka's %s", kmsg.NameForKey(req.APIKey))
	}
	resp, err := c.roundTrip(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.(*RawResponse).Body, nil
}
