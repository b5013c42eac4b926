// Oracle for devlet's kube/ module: decodes Kubernetes objects with the real k8s.io/api types and
// prints, per object, either the errors of the API server's own validation code
// (k8s.io/kubernetes pkg/apis/resource/validation, v1.37.2, after API defaulting) or the object as
// encoding/json writes it.
//
//	oracle validate FILE   ->  "== Kind name" then one error per line
//	oracle json FILE       ->  one JSON object per line
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	resourcev1 "k8s.io/api/resource/v1"
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
		var tm struct{ Kind string }
		check(json.Unmarshal(raw, &tm))
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

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}
