package main

// A minimal OCI image archive built locally (no registry is reachable from the test machines):
// the same construction as integration/containerd/image.go (a package main there, so not
// importable): one layer with a static busybox, one image per name sharing it; `ctr images
// import` names each image by its io.containerd.image.name annotation.

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"time"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type blob struct {
	digest string
	data   []byte
}

func newBlob(data []byte) blob {
	sum := sha256.Sum256(data)
	return blob{digest: "sha256:" + hex.EncodeToString(sum[:]), data: data}
}

// imageSpec is one image of the archive: its name and the process it runs.
type imageSpec struct {
	name       string
	entrypoint []string
	cmd        []string
}

// buildLayer returns an uncompressed layer tar with busybox at /bin/busybox.
func buildLayer(busybox string) ([]byte, error) {
	binary, err := os.ReadFile(busybox)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := time.Unix(0, 0)
	for _, dir := range []string{"bin", "dev", "etc", "proc", "sys", "tmp", "var", "var/run", "usr", "usr/lib"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755,
			ModTime: mtime}); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755,
		Size: int64(len(binary)), ModTime: mtime}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(binary); err != nil {
		return nil, err
	}
	for _, applet := range []string{"sh", "sleep", "cat", "ls", "env", "true", "grep", "stat", "find", "test"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + applet,
			Linkname: "busybox", Mode: 0o777, ModTime: mtime}); err != nil {
			return nil, err
		}
	}
	passwd := []byte("root:x:0:0:root:/:/bin/sh\n")
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "etc/passwd", Mode: 0o644,
		Size: int64(len(passwd)), ModTime: mtime}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(passwd); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeImageArchive writes an OCI image layout tar with `images` to `path`.
func writeImageArchive(path, busybox string, images []imageSpec) error {
	layerData, err := buildLayer(busybox)
	if err != nil {
		return fmt.Errorf("image layer: %w", err)
	}
	layer := newBlob(layerData)
	blobs := []blob{layer}
	var manifests []descriptor
	for _, img := range images {
		config, err := json.Marshal(map[string]any{
			"architecture": runtime.GOARCH,
			"os":           "linux",
			"config": map[string]any{
				"Entrypoint": img.entrypoint,
				"Cmd":        img.cmd,
				"Env":        []string{"PATH=/bin"},
				"WorkingDir": "/",
			},
			"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layer.digest}},
		})
		if err != nil {
			return err
		}
		configBlob := newBlob(config)
		manifest, err := json.Marshal(map[string]any{
			"schemaVersion": 2,
			"mediaType":     "application/vnd.oci.image.manifest.v1+json",
			"config": descriptor{MediaType: "application/vnd.oci.image.config.v1+json",
				Digest: configBlob.digest, Size: int64(len(configBlob.data))},
			"layers": []descriptor{{MediaType: "application/vnd.oci.image.layer.v1.tar",
				Digest: layer.digest, Size: int64(len(layer.data))}},
		})
		if err != nil {
			return err
		}
		manifestBlob := newBlob(manifest)
		blobs = append(blobs, configBlob, manifestBlob)
		manifests = append(manifests, descriptor{
			MediaType: "application/vnd.oci.image.manifest.v1+json",
			Digest:    manifestBlob.digest, Size: int64(len(manifest)),
			Annotations: map[string]string{
				"io.containerd.image.name":          img.name,
				"org.opencontainers.image.ref.name": img.name,
			},
		})
	}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests":     manifests,
	})
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644,
			Size: int64(len(data)), ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := add("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := add("index.json", index); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, b := range blobs {
		if seen[b.digest] {
			continue
		}
		seen[b.digest] = true
		if err := add("blobs/sha256/"+b.digest[len("sha256:"):], b.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
