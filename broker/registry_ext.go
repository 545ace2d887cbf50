package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/wireext"
)

// Verbatim's own API keys (wireext: the cluster link's admin requests)
// lie above kmsg.MaxKey, so they are not in registry and kmsg cannot
// decode them. Their handlers take the raw body and decode it with
// wireext; every version is flexible (request header v2, response header
// v1). They are not listed in ApiVersions' ApiKeys (advertisedAPIs walks
// registry only): a broker that serves them advertises a supported
// feature instead (wireext.FeatureMirrorLink, 18_api_versions.go).

// extRegistry holds the extension keys; written only by init functions.
var extRegistry = map[int16]*apiEntry{}

// registerExt declares that the extension key is served in versions
// 0..maxVersion by h (raw body, flexible from version 0).
func registerExt(key, maxVersion int16, h Handler) {
	if int(key) < len(registry) || key < 0 {
		panic("broker: registerExt: key inside Kafka's range")
	}
	if extRegistry[key] != nil {
		panic("broker: registerExt: key " + apiName(key) + " registered twice")
	}
	extRegistry[key] = &apiEntry{key: key, maxVersion: maxVersion, rawBody: true, flexibleFrom: 0, handler: h}
}

// apiName names an API key in logs and errors: Kafka's name, or the
// extension's.
func apiName(key int16) string {
	if n := wireext.LinkAPIName(key); n != "" {
		return n
	}
	return kmsg.NameForKey(key)
}
