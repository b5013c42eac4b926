package main

// Reading corpus.txt: devices and selectors in a line format a person can edit.
//
//	device NAME DRIVER
//	  TYPE NAME = VALUE          TYPE: int bool string version ints bools strings versions capacity
//	  allowMultipleAllocations = true|false
//	selectors:
//	<one CEL expression per line>
//
// `#` starts a comment line; list values are comma-separated. A selector line `escaped: TEXT`
// reads \n, \t, \r and \\ in TEXT as a newline, tab, carriage return and backslash (multi-line
// selectors; `escaped:` alone is the empty selector).

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// corpusDevice is one device: what the oracle evaluates against, and its JSON description for
// the C++ side (attribute values in resourceapi.DeviceAttribute's JSON form).
type corpusDevice struct {
	Name                     string                                 `json:"name"`
	Driver                   string                                 `json:"driver"`
	AllowMultipleAllocations *bool                                  `json:"allowMultipleAllocations,omitempty"`
	Attributes               map[string]resourceapi.DeviceAttribute `json:"attributes"`
	Capacity                 map[string]string                      `json:"capacity"`
	capacity                 map[resourceapi.QualifiedName]resourceapi.DeviceCapacity
}

type corpusSelector struct {
	Expr   string `json:"expr"`
	Source string `json:"source"`
}

type corpus struct {
	Devices   []*corpusDevice
	Selectors []corpusSelector
}

func splitList(value string) []string {
	var out []string
	for _, v := range strings.Split(value, ",") {
		out = append(out, strings.TrimSpace(v))
	}
	return out
}

func readCorpus(path string) (*corpus, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c := &corpus{}
	var dev *corpusDevice
	inSelectors := false
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	lineNo := 0
	for scanner.Scan() {
		lineNo++
		raw := scanner.Text()
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		where := fmt.Sprintf("%s:%d", path, lineNo)
		if inSelectors {
			expr := line
			if rest, ok := strings.CutPrefix(line, "escaped:"); ok {
				expr = unescapeSelector(strings.TrimPrefix(rest, " "))
			}
			c.Selectors = append(c.Selectors, corpusSelector{Expr: expr, Source: fmt.Sprintf("corpus:%d", lineNo)})
			continue
		}
		if line == "selectors:" {
			inSelectors = true
			continue
		}
		if strings.HasPrefix(line, "device ") {
			fields := strings.Fields(line)
			if len(fields) != 3 {
				return nil, fmt.Errorf("%s: want 'device NAME DRIVER'", where)
			}
			dev = &corpusDevice{Name: fields[1], Driver: fields[2],
				Attributes: map[string]resourceapi.DeviceAttribute{}, Capacity: map[string]string{},
				capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{}}
			c.Devices = append(c.Devices, dev)
			continue
		}
		if dev == nil {
			return nil, fmt.Errorf("%s: attribute outside a device", where)
		}
		lhs, value, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s: want 'TYPE NAME = VALUE'", where)
		}
		lhs = strings.TrimSpace(lhs)
		value = strings.TrimSpace(value)
		if lhs == "allowMultipleAllocations" {
			b := value == "true"
			dev.AllowMultipleAllocations = &b
			continue
		}
		typ, name, ok := strings.Cut(lhs, " ")
		if !ok {
			return nil, fmt.Errorf("%s: want 'TYPE NAME = VALUE'", where)
		}
		name = strings.TrimSpace(name)
		var attr resourceapi.DeviceAttribute
		switch typ {
		case "int":
			v, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", where, err)
			}
			attr.IntValue = &v
		case "bool":
			v := value == "true"
			attr.BoolValue = &v
		case "string":
			v := value
			attr.StringValue = &v
		case "version":
			v := value
			attr.VersionValue = &v
		case "ints":
			for _, s := range splitList(value) {
				v, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("%s: %v", where, err)
				}
				attr.IntValues = append(attr.IntValues, v)
			}
		case "bools":
			for _, s := range splitList(value) {
				attr.BoolValues = append(attr.BoolValues, s == "true")
			}
		case "strings":
			attr.StringValues = splitList(value)
		case "versions":
			attr.VersionValues = splitList(value)
		case "capacity":
			q, err := resource.ParseQuantity(value)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", where, err)
			}
			dev.Capacity[name] = value
			dev.capacity[resourceapi.QualifiedName(name)] = resourceapi.DeviceCapacity{Value: q}
			continue
		default:
			return nil, fmt.Errorf("%s: unknown type %q", where, typ)
		}
		dev.Attributes[name] = attr
	}
	return c, scanner.Err()
}

// unescapeSelector decodes the escapes of an `escaped:` selector line.
func unescapeSelector(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}
