package placement

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gpuaffinity/gpuaffinity/platform"
)

// Defaults for Options.
const (
	// DefaultBaseURL is the link-local address both GCP and OCI serve
	// their metadata on.
	DefaultBaseURL = "http://169.254.169.254"
	// DefaultTimeout bounds one Read, connection and body included.
	DefaultTimeout = 2 * time.Second
	// MaxBodyBytes bounds a metadata response; real ones are a few
	// hundred bytes.
	MaxBodyBytes = 64 << 10
	// MaxValueLen bounds one identifier (an OCI OCID is about 100
	// characters).
	MaxValueLen = 256
	// maxRedirects bounds same-host redirects.
	maxRedirects = 3
)

// ErrNotAvailable means the metadata service has no placement for this
// instance (HTTP 404, or an OCI topology object with no fields). It is
// always returned wrapped, with the cloud and URL.
var ErrNotAvailable = errors.New("placement not available")

// Placement is where one instance sits in its cloud's network.
// Fields a cloud does not have are empty.
type Placement struct {
	// Cloud is platform.GCP or platform.OCI.
	Cloud string `json:"cloud"`
	// Tiers are the network groups above the host, tier 0 (closest
	// switch) first: GCP [SubBlock, Block]; OCI [LocalBlock,
	// NetworkBlock, HPCIsland]. Same numbering as topograph's
	// fabric.topograph.run/tier-N labels.
	Tiers []string `json:"tiers"`
	// Block is GCP's block: physical_host segment 1.
	Block string `json:"block,omitempty"`
	// SubBlock is GCP's sub-block: physical_host segment 2.
	SubBlock string `json:"subBlock,omitempty"`
	// Host is the physical host: GCP physical_host segment 3; OCI
	// customerHostId (optional there).
	Host string `json:"host,omitempty"`
	// LocalBlock is OCI customerLocalBlock (tier 0).
	LocalBlock string `json:"localBlock,omitempty"`
	// NetworkBlock is OCI customerNetworkBlock (tier 1).
	NetworkBlock string `json:"networkBlock,omitempty"`
	// HPCIsland is OCI customerHPCIslandId (tier 2).
	HPCIsland string `json:"hpcIsland,omitempty"`
	// NVLinkDomain is OCI customerGpuMemoryFabric, present on GPU memory
	// fabric shapes (GB200/GB300 NVL72); empty elsewhere.
	NVLinkDomain string `json:"nvlinkDomain,omitempty"`
	// InstanceType is the VM's machine type (GCP) or size (Azure) as
	// ReadInstanceType read it, where DMI does not name it; the agent
	// fills it, Read leaves it empty.
	InstanceType string `json:"instanceType,omitempty"`
	// Source is the URL the placement was read from, or SourceSite
	// where the site supplied the tiers (the agent's
	// --placement.switches).
	Source string `json:"source"`
}

// SourceSite is Placement.Source for tiers the site supplied.
const SourceSite = "site"

// Options for Read. The zero value reads the real link-local service.
type Options struct {
	// BaseURL is scheme://host[:port] of the metadata service; default
	// DefaultBaseURL. Tests and sites with a relay override it.
	BaseURL string
	// Timeout bounds the whole Read; default DefaultTimeout.
	Timeout time.Duration
	// Client, when set, is used for its Transport (which then decides
	// about proxies and dialing); Read still applies its own redirect
	// policy and timeout. When nil, Read uses a transport with no proxy
	// and no keep-alives.
	Client *http.Client
}

// Read asks the metadata service of cloud (a platform constant: "gcp",
// "oci", "aws", "azure") for this instance's placement. See the package
// documentation for the sources and the error contract.
func Read(ctx context.Context, cloud string, opts Options) (Placement, error) {
	switch cloud {
	case platform.GCP:
		return readGCP(ctx, opts)
	case platform.OCI:
		return readOCI(ctx, opts)
	case platform.AWS:
		return Placement{}, fmt.Errorf("placement: aws: no node-local source (DescribeInstanceTopology is an EC2 API that needs IAM credentials): %w", errors.ErrUnsupported)
	case platform.Azure:
		return Placement{}, fmt.Errorf("placement: azure: no public placement source: %w", errors.ErrUnsupported)
	default:
		return Placement{}, fmt.Errorf("placement: unknown cloud %q", cloud)
	}
}

// get performs one bounded GET of base+path with header set and returns
// the body and the URL it asked. 404 becomes ErrNotAvailable.
func get(ctx context.Context, cloud string, opts Options, path string, header http.Header) ([]byte, string, error) {
	base := opts.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	bu, err := url.Parse(base)
	if err != nil || (bu.Scheme != "http" && bu.Scheme != "https") || bu.Host == "" || (bu.Path != "" && bu.Path != "/") || bu.RawQuery != "" || bu.User != nil {
		return nil, "", fmt.Errorf("placement: %s: base URL %q: want scheme://host[:port]", cloud, base)
	}
	u := strings.TrimSuffix(base, "/") + path
	fail := func(format string, a ...any) ([]byte, string, error) {
		return nil, u, fmt.Errorf("placement: %s: GET %s: "+format, append([]any{cloud, u}, a...)...)
	}

	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	client := newClient(opts, bu)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fail("%w", err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		return fail("%w", err)
	}
	defer resp.Body.Close()

	switch {
	case resp.StatusCode == http.StatusNotFound:
		return fail("%w (HTTP 404)", ErrNotAvailable)
	case resp.StatusCode != http.StatusOK:
		return fail("HTTP %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes+1))
	if err != nil {
		return fail("read body: %w", err)
	}
	if len(body) > MaxBodyBytes {
		return fail("body exceeds %d bytes", MaxBodyBytes)
	}
	return body, u, nil
}

// newClient returns a client that follows redirects only on the base
// URL's scheme and host.
func newClient(opts Options, base *url.URL) *http.Client {
	var c http.Client
	if opts.Client != nil {
		c = *opts.Client
	} else {
		c.Transport = &http.Transport{
			Proxy:                  nil, // link-local: never via a proxy
			DialContext:            (&net.Dialer{}).DialContext,
			DisableKeepAlives:      true,
			MaxResponseHeaderBytes: MaxBodyBytes,
		}
	}
	c.Timeout = 0 // the context carries the deadline
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.URL.Scheme != base.Scheme || req.URL.Host != base.Host {
			return fmt.Errorf("refused redirect to %s: not %s://%s", req.URL.Redacted(), base.Scheme, base.Host)
		}
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		return nil
	}
	return &c
}

// ValidValue reports why s is not an acceptable identifier, or "" when it
// is: 1–MaxValueLen bytes, each printable ASCII other than space. Pure.
func ValidValue(s string) string {
	if s == "" {
		return "empty"
	}
	if len(s) > MaxValueLen {
		return fmt.Sprintf("longer than %d bytes", MaxValueLen)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' {
			return fmt.Sprintf("byte %#02x at offset %d is not printable ASCII", c, i)
		}
	}
	return ""
}
