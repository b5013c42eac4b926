// cdi-peer loads CDI spec directories with the reference library
// (tags.cncf.io/container-device-interface), reports what it sees, and injects devices into an
// OCI spec, so that devlet's C++ cdi/ module can be compared with it.
//
//	cdi-peer -spec-dir DIR [-spec-dir DIR2] -oci config.json -devices a/b=c,d/e=f
//
// Output (stdout, one JSON object):
//
//	{"devices": [...], "errors": {path: [..]}, "minVersions": {path: "x.y.z"},
//	 "input": <OCI spec as the reference types decode it>, "output": <OCI spec after injection>,
//	 "unresolved": [...], "error": "..."}
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"tags.cncf.io/container-device-interface/pkg/cdi"
	specs "tags.cncf.io/container-device-interface/specs-go"
)

type dirList []string

func (d *dirList) String() string     { return strings.Join(*d, ",") }
func (d *dirList) Set(v string) error { *d = append(*d, v); return nil }

type result struct {
	Devices     []string            `json:"devices"`
	Errors      map[string][]string `json:"errors"`
	MinVersions map[string]string   `json:"minVersions"`
	Input       json.RawMessage     `json:"input,omitempty"`
	Output      json.RawMessage     `json:"output,omitempty"`
	Unresolved  []string            `json:"unresolved,omitempty"`
	Error       string              `json:"error,omitempty"`
}

func main() {
	var dirs dirList
	flag.Var(&dirs, "spec-dir", "CDI spec directory (repeatable; later wins)")
	ociPath := flag.String("oci", "", "OCI runtime spec (config.json) to inject into")
	devices := flag.String("devices", "", "comma-separated qualified device names")
	flag.Parse()

	if err := run(dirs, *ociPath, *devices); err != nil {
		fmt.Fprintln(os.Stderr, "cdi-peer:", err)
		os.Exit(2)
	}
}

func run(dirs []string, ociPath, devices string) error {
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dirs...), cdi.WithAutoRefresh(false))
	if err != nil {
		return err
	}
	res := result{
		Devices:     cache.ListDevices(),
		Errors:      map[string][]string{},
		MinVersions: map[string]string{},
	}
	for path, errs := range cache.GetErrors() {
		for _, e := range errs {
			res.Errors[path] = append(res.Errors[path], e.Error())
		}
	}
	for _, dir := range dirs {
		entries, _ := os.ReadDir(dir)
		for _, entry := range entries {
			if ext := filepath.Ext(entry.Name()); ext != ".json" && ext != ".yaml" {
				continue
			}
			path := filepath.Join(dir, entry.Name())
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			raw, err := cdi.ParseSpec(data)
			if err != nil || raw == nil {
				continue
			}
			v, err := specs.MinimumRequiredVersion(raw)
			if err != nil {
				return err
			}
			res.MinVersions[path] = v
		}
	}

	if ociPath != "" {
		data, err := os.ReadFile(ociPath)
		if err != nil {
			return err
		}
		var spec oci.Spec
		if err := json.Unmarshal(data, &spec); err != nil {
			return fmt.Errorf("decode OCI spec: %w", err)
		}
		if res.Input, err = json.Marshal(&spec); err != nil {
			return err
		}
		var names []string
		if devices != "" {
			names = strings.Split(devices, ",")
		}
		unresolved, err := cache.InjectDevices(&spec, names...)
		res.Unresolved = unresolved
		if err != nil {
			res.Error = err.Error()
		} else if res.Output, err = json.Marshal(&spec); err != nil {
			return err
		}
	}
	out, err := json.Marshal(&res)
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(append(out, '\n'))
	return err
}
