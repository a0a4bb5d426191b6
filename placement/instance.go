package placement

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/platform"
)

// Instance type paths: where a VM reads its own machine type or size.
// On GCP and Azure DMI names only the hypervisor's product ("Google
// Compute Engine", "Virtual Machine"), so without these every VM of the
// cloud would look like one model to the fleet's comparison.
const (
	// GCPMachineTypePath answers "projects/<number>/machineTypes/<type>"
	// (https://cloud.google.com/compute/docs/metadata/predefined-metadata-keys,
	// instance/machine-type).
	GCPMachineTypePath = "/computeMetadata/v1/instance/machine-type"
	// AzureVMSizePath answers the VM size in text, "Standard_ND96isr_H100_v5",
	// with header "Metadata: true" (Azure Instance Metadata Service,
	// https://learn.microsoft.com/azure/virtual-machines/instance-metadata-service,
	// compute/vmSize; format=text returns a leaf's value).
	AzureVMSizePath = "/metadata/instance/compute/vmSize?api-version=2021-02-01&format=text"
)

// ReadInstanceType asks the metadata service of cloud for the instance's
// machine type (GCP) or VM size (Azure), one bounded GET with the header
// the service requires, under Read's safety rules (Options). Other clouds
// name the type in DMI (AWS's product_name, OCI's shape) and answer
// errors.ErrUnsupported, as does a cloud without a metadata service.
// Errors follow Read's contract and name the cloud and the URL.
func ReadInstanceType(ctx context.Context, cloud string, opts Options) (string, error) {
	switch cloud {
	case platform.GCP:
		body, u, err := get(ctx, cloud, opts, GCPMachineTypePath, http.Header{"Metadata-Flavor": {"Google"}})
		if err != nil {
			return "", err
		}
		v := string(body)
		_, t, ok := strings.Cut(v, "/machineTypes/")
		if !ok || !strings.HasPrefix(v, "projects/") || strings.Contains(t, "/") {
			return "", fmt.Errorf("placement: gcp: GET %s: machine type %q: want projects/<project>/machineTypes/<type>", u, clip(v))
		}
		if why := ValidValue(t); why != "" {
			return "", fmt.Errorf("placement: gcp: GET %s: machine type %q: %s", u, clip(v), why)
		}
		return t, nil
	case platform.Azure:
		body, u, err := get(ctx, cloud, opts, AzureVMSizePath, http.Header{"Metadata": {"true"}})
		if err != nil {
			return "", err
		}
		v := string(body)
		if why := ValidValue(v); why != "" {
			return "", fmt.Errorf("placement: azure: GET %s: VM size %q: %s", u, clip(v), why)
		}
		return v, nil
	}
	return "", fmt.Errorf("placement: %s: the instance type is DMI's, not the metadata service's: %w", cloud, errors.ErrUnsupported)
}
