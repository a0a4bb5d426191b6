// Package platform tells which cloud (or bare metal) a node runs on from
// DMI: <root>/sys/class/dmi/id/{sys_vendor,product_name,chassis_asset_tag}.
// It asks no metadata service, so it works offline and under --root.
//
// Rules (each cloud documents its DMI strings):
//   - AWS: sys_vendor "Amazon EC2"; product_name is the instance type
//     ("p5.48xlarge").
//   - Azure: chassis_asset_tag "7783-7084-3265-9085-8269-3286-77"
//     (sys_vendor "Microsoft Corporation"); the VM size is not in DMI.
//   - Google Cloud: sys_vendor "Google" or product_name "Google Compute
//     Engine"; the machine type is not in DMI.
//   - OCI: chassis_asset_tag "OracleCloud.com"; product_name names the
//     shape on bare-metal shapes ("BM.GPU.H100.8") and is kept when it
//     looks like one.
//   - anything else with a readable sys_vendor: bare metal; no DMI at all
//     (Firecracker, some containers): unknown.
package platform

import (
	"errors"
	"io/fs"
	"path"
	"strings"

	"github.com/gpuaffinity/gpuaffinity/internal/cloudname"
	"github.com/gpuaffinity/gpuaffinity/internal/rootfs"
)

// Cloud names, as Classify returns them: internal/cloudname's, which
// topology.Cloud's constants are too.
const (
	AWS       = cloudname.AWS
	Azure     = cloudname.Azure
	GCP       = cloudname.GCP
	OCI       = cloudname.OCI
	BareMetal = cloudname.BareMetal
	Unknown   = cloudname.Unknown
)

// AzureAssetTag is the chassis asset tag of every Azure VM.
const AzureAssetTag = "7783-7084-3265-9085-8269-3286-77"

// Info is what DMI says.
type Info struct {
	Cloud        string
	InstanceType string
	SysVendor    string // sys_vendor
	ProductName  string // product_name
	AssetTag     string // chassis_asset_tag
}

// Read reads DMI under root. Missing files are not errors (no DMI is a
// platform answer: unknown); other read failures are returned.
func Read(root *rootfs.Root) (Info, error) {
	const dir = "sys/class/dmi/id"
	var errs []error
	read := func(name string) string {
		s, err := root.String(path.Join(dir, name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		return s
	}
	in := Info{
		SysVendor:   read("sys_vendor"),
		ProductName: read("product_name"),
		AssetTag:    read("chassis_asset_tag"),
	}
	in.Cloud, in.InstanceType = Classify(in.SysVendor, in.ProductName, in.AssetTag)
	return in, errors.Join(errs...)
}

// Classify applies the rules above. It does no I/O.
func Classify(sysVendor, product, assetTag string) (cloud, instanceType string) {
	switch {
	case sysVendor == "Amazon EC2":
		return AWS, product
	case assetTag == AzureAssetTag:
		return Azure, ""
	case sysVendor == "Google" || product == "Google Compute Engine":
		return GCP, ""
	case assetTag == "OracleCloud.com":
		if strings.HasPrefix(product, "BM.") || strings.HasPrefix(product, "VM.") {
			return OCI, product
		}
		return OCI, ""
	case sysVendor != "" || product != "":
		return BareMetal, ""
	}
	return Unknown, ""
}
