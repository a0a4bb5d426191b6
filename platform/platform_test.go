package platform

import "testing"

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		vendor, product, tag string
		cloud, instance      string
	}{
		{"Amazon EC2", "p5.48xlarge", "Amazon EC2", AWS, "p5.48xlarge"},
		{"Microsoft Corporation", "Virtual Machine", AzureAssetTag, Azure, ""},
		// Hyper-V on premises has the vendor but not Azure's asset tag.
		{"Microsoft Corporation", "Virtual Machine", "", BareMetal, ""},
		{"Google", "Google Compute Engine", "", GCP, ""},
		{"Oracle Corporation", "BM.GPU.H100.8", "OracleCloud.com", OCI, "BM.GPU.H100.8"},
		{"Oracle Corporation", "SUN SERVER", "OracleCloud.com", OCI, ""},
		{"NVIDIA", "DGXH100", "", BareMetal, ""},
		{"", "", "", Unknown, ""},
	} {
		c, i := Classify(tc.vendor, tc.product, tc.tag)
		if c != tc.cloud || i != tc.instance {
			t.Errorf("Classify(%q, %q, %q) = %q, %q; want %q, %q", tc.vendor, tc.product, tc.tag, c, i, tc.cloud, tc.instance)
		}
	}
}
