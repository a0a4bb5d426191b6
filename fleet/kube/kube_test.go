package kube

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// serviceAccount writes the token and the test server's CA as the
// kubelet mounts them.
func serviceAccount(t *testing.T, srv *httptest.Server, token string) string {
	t.Helper()
	dir := t.TempDir()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), ca, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The patch is a merge patch of the node's labels, sent with the
// service account's token over TLS verified against its CA.
func TestPatchNode(t *testing.T) {
	var got struct{ method, path, ctype, auth, body string }
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.method, got.path, got.ctype, got.auth, got.body = r.Method, r.URL.EscapedPath(), r.Header.Get("Content-Type"), r.Header.Get("Authorization"), string(b)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"kind":"Node"}`)
	}))
	defer srv.Close()
	c, err := New(srv.URL, serviceAccount(t, srv, "tok-1"))
	if err != nil {
		t.Fatal(err)
	}
	patch := `{"metadata":{"labels":{"nvidia.com/gpu.clique":"u.1"}}}`
	if err := c.PatchNode(context.Background(), "gb200-a1", []byte(patch)); err != nil {
		t.Fatal(err)
	}
	if got.method != http.MethodPatch || got.path != "/api/v1/nodes/gb200-a1" || got.ctype != "application/merge-patch+json" ||
		got.auth != "Bearer tok-1" || got.body != patch {
		t.Errorf("request %+v", got)
	}
	// A name is one path segment, whatever it holds.
	if err := c.PatchNode(context.Background(), "a/../b", []byte(patch)); err != nil {
		t.Fatal(err)
	}
	if got.path != "/api/v1/nodes/a%2F..%2Fb" {
		t.Errorf("path %s, want the name escaped as one segment", got.path)
	}
}

// A refusal names the node and carries the API server's message.
func TestPatchNodeForbidden(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"kind":"Status","status":"Failure","message":"nodes \"n1\" is forbidden: User \"system:serviceaccount:x:y\" cannot patch resource \"nodes\"","reason":"Forbidden"}`)
	}))
	defer srv.Close()
	c, err := New(srv.URL, serviceAccount(t, srv, "tok"))
	if err != nil {
		t.Fatal(err)
	}
	err = c.PatchNode(context.Background(), "n1", []byte(`{}`))
	if err == nil || !strings.Contains(err.Error(), "patch node n1: 403 Forbidden") || !strings.Contains(err.Error(), "cannot patch resource") {
		t.Errorf("err %v", err)
	}
}

// A server whose certificate the CA did not sign is refused.
func TestPatchNodeWrongCA(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	dir := serviceAccount(t, srv, "tok")
	// Another CA: a fresh self-signed certificate (every httptest server
	// shares one built-in certificate).
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "other-ca"}, IsCA: true,
		BasicConstraintsValid: true, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "ca.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	c, err := New(srv.URL, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.PatchNode(context.Background(), "n1", []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("err %v, want a certificate error", err)
	}
}

// Missing or bad service account files are named.
func TestNewBadServiceAccount(t *testing.T) {
	dir := t.TempDir()
	if _, err := New("https://x", dir); err == nil || !strings.Contains(err.Error(), "ca.crt") {
		t.Errorf("no CA: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "ca.crt"), []byte("not pem"), 0o644)
	if _, err := New("https://x", dir); err == nil || !strings.Contains(err.Error(), "no PEM") {
		t.Errorf("bad CA: %v", err)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := InCluster(); err == nil || !strings.Contains(err.Error(), "not in a Kubernetes pod") {
		t.Errorf("InCluster outside a pod: %v", err)
	}
}

// A redirect is not followed: neither the token nor the patch goes to
// the place it points to, even on the same host, and the error says so.
func TestPatchNodeRedirect(t *testing.T) {
	var hits, redirected int
	var mu sync.Mutex
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path == "/elsewhere" {
			redirected++
			return
		}
		hits++
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	c, err := New(srv.URL, serviceAccount(t, srv, "tok"))
	if err != nil {
		t.Fatal(err)
	}
	err = c.PatchNode(context.Background(), "n1", []byte(`{}`))
	if err == nil || !strings.Contains(err.Error(), "307") || !strings.Contains(err.Error(), "not followed") {
		t.Errorf("err %v, want the redirect refused", err)
	}
	_, err = c.GetNode(context.Background(), "n1", func(string) bool { return true }, "")
	if err == nil || !strings.Contains(err.Error(), "not followed") {
		t.Errorf("get: err %v, want the redirect refused", err)
	}
	if hits != 2 || redirected != 0 {
		t.Errorf("%d requests, %d redirected: want 2 and none followed", hits, redirected)
	}
}

// ListNodes reads every page (limit and continue), keeps the labels asked
// for and the one annotation, and stops at a server that never ends.
func TestListNodes(t *testing.T) {
	pages := map[string]string{
		"": `{"kind":"PartialObjectMetadataList","metadata":{"continue":"p2"},"items":[
			{"metadata":{"name":"n1","resourceVersion":"11","labels":{"a/x":"1","kubernetes.io/os":"linux"},"annotations":{"own":"a/x","big":"zzz"},"managedFields":[{"manager":"kubelet"}]}},
			{"metadata":{"name":"n2","resourceVersion":"12"}}]}`,
		"p2": `{"kind":"PartialObjectMetadataList","metadata":{},"items":[{"metadata":{"name":"n3","resourceVersion":"13","labels":{"a/y":"2"}}}]}`,
	}
	var accept []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		accept = append(accept, r.Header.Get("Accept"))
		if r.URL.Query().Get("limit") != "500" || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, pages[r.URL.Query().Get("continue")])
	}))
	defer srv.Close()
	c, err := New(srv.URL, serviceAccount(t, srv, "tok"))
	if err != nil {
		t.Fatal(err)
	}
	var got []Node
	err = c.ListNodes(context.Background(), func(k string) bool { return strings.HasPrefix(k, "a/") }, "own", func(n Node) error {
		got = append(got, n)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Node{
		{Name: "n1", ResourceVersion: "11", Labels: map[string]string{"a/x": "1"}, Annotations: map[string]string{"own": "a/x"}},
		{Name: "n2", ResourceVersion: "12"},
		{Name: "n3", ResourceVersion: "13", Labels: map[string]string{"a/y": "2"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("nodes %+v, want %+v", got, want)
	}
	if len(accept) != 2 || !strings.Contains(accept[0], "as=PartialObjectMetadataList") {
		t.Errorf("Accept %q, want metadata only", accept)
	}

	// A server that always answers "continue" is stopped.
	loop := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"metadata":{"continue":"again"},"items":[]}`)
	}))
	defer loop.Close()
	c, _ = New(loop.URL, serviceAccount(t, loop, "tok"))
	err = c.ListNodes(context.Background(), func(string) bool { return true }, "", func(Node) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "more than 2000 pages") {
		t.Errorf("endless list: %v", err)
	}
}

// A page over the bound is refused with an error naming it, without
// holding it.
func TestListNodesBound(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"metadata":{},"items":[`)
		item := `{"metadata":{"name":"n","labels":{"x":"` + strings.Repeat("y", 1<<16) + `"}}},`
		for range (maxListBody / len(item)) + 10 {
			if _, err := io.WriteString(w, item); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	c, _ := New(srv.URL, serviceAccount(t, srv, "tok"))
	err := c.ListNodes(context.Background(), func(string) bool { return false }, "", func(Node) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "the bound on one page") {
		t.Errorf("huge page: %v", err)
	}
}
