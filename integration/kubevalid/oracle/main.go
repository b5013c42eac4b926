// Oracle for devlet's kube/ module: decodes Kubernetes objects with the real k8s.io/api types and
// prints, per object, either the errors of the API server's own validation code
// (k8s.io/kubernetes pkg/apis/resource/validation, v1.37.2, after API defaulting) or the object as
// encoding/json writes it.
//
//	oracle validate FILE   ->  "== Kind name" then one error per line
//	oracle json FILE       ->  one JSON object per line
//	oracle convert FILE    ->  v1beta1/v1beta2 objects converted to v1 by the API server's
//	                           conversion code, one JSON object per line
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	resourcev1 "k8s.io/api/resource/v1"
	resourcev1beta1 "k8s.io/api/resource/v1beta1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/apis/resource"
	_ "k8s.io/kubernetes/pkg/apis/resource/install"
	"k8s.io/kubernetes/pkg/apis/resource/validation"
	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: oracle validate|json FILE")
		os.Exit(2)
	}
	data, err := os.ReadFile(os.Args[2])
	check(err)
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err == io.EOF {
			break
		} else {
			check(err)
		}
		var tm struct{ Kind, APIVersion string }
		check(json.Unmarshal(raw, &tm))
		if os.Args[1] == "convert" {
			convert(raw, tm.Kind, tm.APIVersion)
			continue
		}
		var obj runtime.Object
		switch tm.Kind {
		case "ResourceClaim":
			obj = &resourcev1.ResourceClaim{}
		case "ResourceSlice":
			obj = &resourcev1.ResourceSlice{}
		case "DeviceClass":
			obj = &resourcev1.DeviceClass{}
		case "DeviceTaintRule":
			obj = &resourcev1.DeviceTaintRule{}
		default:
			continue // lists, core kinds and other versions are not compared
		}
		check(yaml.Unmarshal(raw, obj))
		if os.Args[1] == "json" {
			out, err := json.Marshal(obj)
			check(err)
			fmt.Println(string(out))
			continue
		}
		legacyscheme.Scheme.Default(obj)
		var errs field.ErrorList
		var name string
		switch v := obj.(type) {
		case *resourcev1.ResourceClaim:
			if v.Namespace == "" {
				v.Namespace = "default" // as kubectl fills it in
			}
			in := &resource.ResourceClaim{}
			check(legacyscheme.Scheme.Convert(v, in, nil))
			errs = validation.ValidateResourceClaim(in)
			// devlet validates a claim's status as a status update from an empty status would be.
			old := in.DeepCopy()
			old.Status = resource.ResourceClaimStatus{}
			in.ResourceVersion, old.ResourceVersion = "1", "1"
			errs = append(errs, validation.ValidateResourceClaimStatusUpdate(in, old)...)
			name = v.Name
		case *resourcev1.ResourceSlice:
			in := &resource.ResourceSlice{}
			check(legacyscheme.Scheme.Convert(v, in, nil))
			errs = validation.ValidateResourceSlice(in)
			name = v.Name
		case *resourcev1.DeviceClass:
			in := &resource.DeviceClass{}
			check(legacyscheme.Scheme.Convert(v, in, nil))
			errs = validation.ValidateDeviceClass(in)
			name = v.Name
		case *resourcev1.DeviceTaintRule:
			in := &resource.DeviceTaintRule{}
			check(legacyscheme.Scheme.Convert(v, in, nil))
			errs = validation.ValidateDeviceTaintRule(in)
			if len(in.Status.Conditions) > 0 {
				old := in.DeepCopy()
				old.Status = resource.DeviceTaintRuleStatus{}
				errs = append(errs, validation.ValidateDeviceTaintRuleStatusUpdate(in, old)...)
			}
			name = v.Name
		}
		fmt.Printf("== %s %s\n", tm.Kind, name)
		for _, e := range errs {
			fmt.Println(e.Error())
		}
	}
}

// convert decodes an older-version object strictly and converts it through the internal type to v1.
func convert(raw []byte, kind, apiVersion string) {
	var in, out runtime.Object
	switch apiVersion + "/" + kind {
	case "resource.k8s.io/v1beta1/ResourceClaim":
		in, out = &resourcev1beta1.ResourceClaim{}, &resourcev1.ResourceClaim{}
	case "resource.k8s.io/v1beta1/ResourceSlice":
		in, out = &resourcev1beta1.ResourceSlice{}, &resourcev1.ResourceSlice{}
	case "resource.k8s.io/v1beta1/DeviceClass":
		in, out = &resourcev1beta1.DeviceClass{}, &resourcev1.DeviceClass{}
	case "resource.k8s.io/v1beta2/ResourceClaim":
		in, out = &resourcev1beta2.ResourceClaim{}, &resourcev1.ResourceClaim{}
	case "resource.k8s.io/v1beta2/ResourceSlice":
		in, out = &resourcev1beta2.ResourceSlice{}, &resourcev1.ResourceSlice{}
	default:
		return
	}
	check(yaml.UnmarshalStrict(raw, in))
	internal, err := legacyscheme.Scheme.ConvertToVersion(in, resource.SchemeGroupVersion)
	check(err)
	check(legacyscheme.Scheme.Convert(internal, out, nil))
	b, err := json.Marshal(out)
	check(err)
	fmt.Println(string(b))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}
