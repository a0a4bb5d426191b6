// Package kube reads and patches Kubernetes nodes' labels through the
// API server, as a pod reaches it: the service account's token and CA
// (/var/run/secrets/kubernetes.io/serviceaccount) and the
// KUBERNETES_SERVICE_HOST/PORT the kubelet sets. It makes the requests
// `gpuaffinity fleet labels --apply` needs and no other: the nodes'
// metadata, listed in pages (PartialObjectMetadataList: no status, no
// spec), one node's metadata, and a JSON merge patch of one node's
// metadata (https://kubernetes.io/docs/reference/using-api/api-concepts/#patch-and-apply).
// It is written against net/http: client-go would bring some forty
// modules for it. It follows no redirect (a token and a patch are sent
// to the API server and nowhere else), and bounds every answer.
package kube

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	jsoniter "github.com/json-iterator/go"
)

// ServiceAccountDir is where the kubelet mounts a pod's service account.
const ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// maxBody bounds the API server's answer to a patch the client reads;
// maxListBody one page of a node list (500 nodes' metadata with their
// managed fields are a few megabytes).
const (
	maxBody     = 64 << 10
	maxListBody = 64 << 20
)

// listPage is how many nodes one list request asks for; maxPages bounds
// the pages of one list (a million nodes).
const (
	listPage = 500
	maxPages = 2000
)

// ErrConflict is wrapped when the API server refuses a patch because the
// node changed since it was read (409 Conflict on the resourceVersion
// precondition): read it again and make the patch anew.
var ErrConflict = errors.New("the node changed since it was read")

// Client patches nodes. Its token is read from TokenFile at every request:
// projected service account tokens are rotated on disk.
type Client struct {
	// Base is the API server's URL, https://host:port.
	Base string
	// TokenFile holds the bearer token.
	TokenFile string
	// HTTP is the client, its transport trusting the cluster's CA.
	HTTP *http.Client
}

// InCluster is the client of the pod it runs in.
func InCluster() (*Client, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, errors.New("not in a Kubernetes pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT unset (run it as the CronJob of docs/fleet.md, or print the patch list and apply it with kubectl)")
	}
	return New("https://"+net.JoinHostPort(host, port), ServiceAccountDir)
}

// New is the client of the API server at base, with the service account
// files (token, ca.crt) in dir.
func New(base, dir string) (*Client, error) {
	caFile := filepath.Join(dir, "ca.crt")
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("kubernetes CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("kubernetes CA %s: no PEM certificate in it", caFile)
	}
	tokenFile := filepath.Join(dir, "token")
	if _, err := readToken(tokenFile); err != nil {
		return nil, err
	}
	tr := &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: 10 * time.Second}
	return &Client{Base: strings.TrimSuffix(base, "/"), TokenFile: tokenFile, HTTP: &http.Client{Transport: tr, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}, nil
}

func readToken(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("kubernetes token: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" || strings.ContainsAny(t, "\r\n") {
		return "", fmt.Errorf("kubernetes token %s: empty or not one line", file)
	}
	return t, nil
}

// PatchNode applies patch, a JSON merge patch, to node name.
func (c *Client) PatchNode(ctx context.Context, name string, patch []byte) error {
	token, err := readToken(c.TokenFile)
	if err != nil {
		return err
	}
	u := c.Base + "/api/v1/nodes/" + url.PathEscape(name)
	req, err := http.NewRequestWithContext(ctx, http.MethodPatch, u, bytes.NewReader(patch))
	if err != nil {
		return fmt.Errorf("patch node %s: %w", name, err)
	}
	req.Header.Set("Content-Type", "application/merge-patch+json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("patch node %s: %w", name, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	switch resp.StatusCode {
	case http.StatusOK:
		return nil
	case http.StatusConflict:
		return fmt.Errorf("patch node %s: %w (%s)", name, ErrConflict, statusMessage(resp, body))
	}
	return fmt.Errorf("patch node %s: %s", name, statusMessage(resp, body))
}

// statusMessage says why the API server refused a request: its Status
// object's message (https://kubernetes.io/docs/reference/using-api/api-concepts/#api-verbs),
// else the body's start, quoted and clipped; a redirect, which is not
// followed, names where it pointed.
func statusMessage(resp *http.Response, body []byte) string {
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		loc := resp.Header.Get("Location")
		if u, err := url.Parse(loc); err == nil {
			loc = u.Redacted()
		}
		return fmt.Sprintf("%s, a redirect to %s: not followed (the token goes to the API server only)", resp.Status, strconv.Quote(clip(loc, 200)))
	}
	var st struct {
		Message string `json:"message"`
	}
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &st) == nil && st.Message != "" {
		msg = st.Message
	}
	return resp.Status + ": " + strconv.Quote(clip(msg, 300))
}

// clip cuts s to n bytes at most.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Node is a node's metadata as ListNodes and GetNode give it: its name,
// resourceVersion, the labels the caller keeps and the annotations it
// asks for.
type Node struct {
	Name            string
	ResourceVersion string
	Labels          map[string]string
	Annotations     map[string]string
}

// metadataAccept asks for PartialObjectMetadata(List): metadata only
// (https://kubernetes.io/docs/reference/using-api/api-concepts/#receiving-resources-as-tables
// and "Retrieving metadata"), falling back to the full object where the
// server does not serve it.
const metadataAccept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"

// ListNodes calls visit with every node's metadata, a page of listPage
// nodes at a time, keeping the labels keep accepts and the annotation
// annotation. Each page is decoded as it arrives and bounded.
func (c *Client) ListNodes(ctx context.Context, keep func(string) bool, annotation string, visit func(Node) error) error {
	cont := ""
	for page := 1; ; page++ {
		if page > maxPages {
			return fmt.Errorf("list nodes: more than %d pages of %d nodes: the API server keeps answering \"continue\"", maxPages, listPage)
		}
		q := url.Values{"limit": {strconv.Itoa(listPage)}}
		if cont != "" {
			q.Set("continue", cont)
		}
		cont = "" // the page's own, where it has one
		next, err := c.get(ctx, "/api/v1/nodes?"+q.Encode(), "list nodes", func(it *jsoniter.Iterator, field string) bool {
			switch field {
			case "metadata":
				it.ReadObjectCB(func(it *jsoniter.Iterator, f string) bool {
					if f == "continue" {
						cont = it.ReadString()
					} else {
						it.Skip()
					}
					return it.Error == nil
				})
			case "items":
				it.ReadArrayCB(func(it *jsoniter.Iterator) bool {
					var n Node
					it.ReadObjectCB(func(it *jsoniter.Iterator, f string) bool {
						if f == "metadata" {
							readMeta(it, &n, keep, annotation)
						} else {
							it.Skip()
						}
						return it.Error == nil
					})
					if it.Error != nil {
						return false
					}
					if n.Name == "" {
						it.ReportError("items", "a node without a name")
						return false
					}
					if err := visit(n); err != nil {
						it.Error = err
						return false
					}
					return true
				})
			default:
				it.Skip()
			}
			return it.Error == nil
		})
		if err != nil {
			return err
		}
		if !next || cont == "" {
			return nil
		}
	}
}

// GetNode returns node name's metadata, as ListNodes gives it.
func (c *Client) GetNode(ctx context.Context, name string, keep func(string) bool, annotation string) (Node, error) {
	var n Node
	_, err := c.get(ctx, "/api/v1/nodes/"+url.PathEscape(name), "get node "+name, func(it *jsoniter.Iterator, field string) bool {
		if field == "metadata" {
			readMeta(it, &n, keep, annotation)
		} else {
			it.Skip()
		}
		return it.Error == nil
	})
	return n, err
}

// readMeta reads an object's metadata into n.
func readMeta(it *jsoniter.Iterator, n *Node, keep func(string) bool, annotation string) {
	it.ReadObjectCB(func(it *jsoniter.Iterator, f string) bool {
		switch f {
		case "name":
			n.Name = it.ReadString()
		case "resourceVersion":
			n.ResourceVersion = it.ReadString()
		case "labels":
			it.ReadMapCB(func(it *jsoniter.Iterator, k string) bool {
				v := it.ReadString()
				if keep(k) {
					if n.Labels == nil {
						n.Labels = make(map[string]string)
					}
					n.Labels[k] = v
				}
				return it.Error == nil
			})
		case "annotations":
			it.ReadMapCB(func(it *jsoniter.Iterator, k string) bool {
				v := it.ReadString()
				if k == annotation {
					n.Annotations = map[string]string{k: v}
				}
				return it.Error == nil
			})
		default:
			it.Skip()
		}
		return it.Error == nil
	})
}

// get sends GET path and decodes the object answered with field, a
// callback per top-level field. It reports false where the answer was
// not 200.
func (c *Client) get(ctx context.Context, path, what string, field func(*jsoniter.Iterator, string) bool) (bool, error) {
	token, err := readToken(c.TokenFile)
	if err != nil {
		return false, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+path, nil)
	if err != nil {
		return false, fmt.Errorf("%s: %w", what, err)
	}
	req.Header.Set("Accept", metadataAccept)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return false, fmt.Errorf("%s: %w", what, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		return false, fmt.Errorf("%s: %s", what, statusMessage(resp, body))
	}
	body := &bounded{r: resp.Body, left: maxListBody}
	it := jsoniter.Parse(jsoniter.ConfigDefault, body, 64<<10)
	it.ReadObjectCB(field)
	switch {
	case body.over:
		return false, fmt.Errorf("%s: the answer is over %d MiB, the bound on one page", what, maxListBody>>20)
	case it.Error != nil && it.Error != io.EOF:
		return false, fmt.Errorf("%s: %s", what, strconv.Quote(clip(it.Error.Error(), 300)))
	}
	return true, nil
}

// bounded reads r to left bytes, then fails.
type bounded struct {
	r    io.Reader
	left int64
	over bool
}

func (b *bounded) Read(p []byte) (int, error) {
	if b.left <= 0 {
		b.over = true
		return 0, errors.New("answer too large")
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}
