// Package kube patches Kubernetes node labels through the API server, as
// a pod reaches it: the service account's token and CA
// (/var/run/secrets/kubernetes.io/serviceaccount) and the
// KUBERNETES_SERVICE_HOST/PORT the kubelet sets. It is the one request
// `gpuaffinity fleet labels --apply` makes, a JSON merge patch of
// metadata.labels (https://kubernetes.io/docs/reference/using-api/api-concepts/#patch-and-apply),
// written against net/http: client-go would bring some forty modules for
// it.
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
	"strings"
	"time"
)

// ServiceAccountDir is where the kubelet mounts a pod's service account.
const ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// maxBody bounds the API server's answer the client reads.
const maxBody = 64 << 10

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
	return &Client{Base: strings.TrimSuffix(base, "/"), TokenFile: tokenFile, HTTP: &http.Client{Transport: tr, Timeout: 30 * time.Second}}, nil
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
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	// A Status object says why (https://kubernetes.io/docs/reference/using-api/api-concepts/#api-verbs).
	var st struct {
		Message string `json:"message"`
		Reason  string `json:"reason"`
	}
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &st) == nil && st.Message != "" {
		msg = st.Message
	}
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return fmt.Errorf("patch node %s: %s: %s", name, resp.Status, msg)
}
