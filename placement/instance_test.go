package placement

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// instanceServer answers GCP's machine-type and Azure's vmSize (path and
// query as documented), each only with its cloud's header, 404 elsewhere.
func instanceServer(t *testing.T, gcp, azure string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == GCPMachineTypePath && r.Header.Get("Metadata-Flavor") == "Google":
			io.WriteString(w, gcp)
		case r.URL.RequestURI() == AzureVMSizePath && r.Header.Get("Metadata") == "true":
			io.WriteString(w, azure)
		case r.URL.Path == GCPMachineTypePath || strings.HasPrefix(r.URL.Path, "/metadata/"):
			http.Error(w, "missing header", http.StatusBadRequest)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// The machine type GCP's metadata server documents
// ("projects/<number>/machineTypes/<type>") and Azure IMDS's vmSize in
// text; malformed and hostile answers are errors naming the URL; AWS
// and OCI name the type in DMI.
func TestReadInstanceType(t *testing.T) {
	ctx := context.Background()
	base := instanceServer(t, "projects/123456789012/machineTypes/a3-ultragpu-8g", "Standard_ND96isr_H100_v5")
	if got, err := ReadInstanceType(ctx, "gcp", Options{BaseURL: base}); err != nil || got != "a3-ultragpu-8g" {
		t.Errorf("gcp: %q, %v; want a3-ultragpu-8g", got, err)
	}
	if got, err := ReadInstanceType(ctx, "azure", Options{BaseURL: base}); err != nil || got != "Standard_ND96isr_H100_v5" {
		t.Errorf("azure: %q, %v; want Standard_ND96isr_H100_v5", got, err)
	}
	for _, bad := range []string{"a3-ultragpu-8g", "projects/1/machineTypes/", "projects/1/machineTypes/a/b", "zones/x/machineTypes/a3", "projects/1/machineTypes/a3\nX"} {
		_, err := ReadInstanceType(ctx, "gcp", Options{BaseURL: instanceServer(t, bad, "")})
		if err == nil || !strings.Contains(err.Error(), GCPMachineTypePath) {
			t.Errorf("gcp machine type %q: %v, want an error naming the URL", bad, err)
		}
	}
	for _, bad := range []string{"", "Standard ND96", strings.Repeat("x", MaxValueLen+1)} {
		if _, err := ReadInstanceType(ctx, "azure", Options{BaseURL: instanceServer(t, "", bad)}); err == nil {
			t.Errorf("azure vmSize %q: no error", bad)
		}
	}
	for _, cloud := range []string{"aws", "oci", "baremetal"} {
		if _, err := ReadInstanceType(ctx, cloud, Options{BaseURL: base}); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%s: %v, want ErrUnsupported", cloud, err)
		}
	}
	// A service without the path: ErrNotAvailable, as Read's 404.
	empty := httptest.NewServer(http.NotFoundHandler())
	defer empty.Close()
	if _, err := ReadInstanceType(ctx, "gcp", Options{BaseURL: empty.URL}); !errors.Is(err, ErrNotAvailable) {
		t.Errorf("404: %v, want ErrNotAvailable", err)
	}
}
